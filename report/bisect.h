#pragma once
// A bisection (`faultline bisect status|log|watch`, docs/bisect.md) as text. Every line
// fits 80 columns.
#include <string>

#include "faultline/v1/job.pb.h"

namespace faultline::report {

// What was asked, the result (first bad commit, confirmation, revert), the command to
// reproduce; with `steps`, the step table.
std::string RenderBisection(const v1::Bisection& b, bool steps);
// One line of progress: phase, range left, the step measuring now, estimates.
std::string FormatBisectProgress(const v1::Bisection& b);
// "throughput (rounds/s)", "pgfault per round": what the bisection measures.
std::string BisectMetricName(const v1::BisectRequest& r);
// The commit at `index` of the bisection's range, short ("?" outside it).
std::string BisectCommitName(const v1::Bisection& b, int index);

}  // namespace faultline::report
