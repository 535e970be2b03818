#pragma once
// A report as one self-contained HTML page (`faultline report JOB --format html`,
// `faultline compare A B --format html`): no network at view time, the plots drawn as
// inline SVG by the CLI. Why SVG from C++ and no charting library: a page that pulls
// nothing (no npm tree to vendor, audit and update), points that are DOM elements a test
// can count, and the same code path as the text formats.
//
// Plots (each an <svg class="plot" data-plot=KIND data-points=N>, each point class "pt"):
// - runs: every run's throughput in the order the runs finished, coloured by kernel, per
//   board and cell: drift and the A/B alternation are visible where a table hides them;
// - dist: each kernel's runs per board and cell, with the median marked;
// - samples: the rounds completed in each second of the median run of each kernel, per
//   board and cell (where the report holds samples: GetReportRequest.samples);
// - forest: the throughput's and the changed counters' ratios (B/A) with their 95% CIs on a
//   log axis, per comparison.
// A small inline script checks every plot holds the points it declares (console.error
// otherwise) and marks <body data-checked="N plots">: what a headless browser test reads.
#include <string>
#include <vector>

#include "faultline/v1/job.pb.h"

namespace faultline::report {

std::string RenderHtml(const v1::GetReportResponse& report);

// `faultline compare A B --format html`: the two sample files' distributions, their values
// in file order, and the comparison.
std::string RenderComparisonHtml(const v1::Comparison& comparison, const std::vector<double>& a,
                                 const std::vector<double>& b, const std::string& text);

}  // namespace faultline::report
