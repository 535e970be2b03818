#pragma once
// The page's profiles section (issue #46, docs/profiles.md): per profiled comparison, the
// frames that changed (frames.h) as a table and two differential flame graphs drawn as
// inline SVG like every plot of the page (html.h: no script library, rects a test counts):
// - B's stacks: each frame as wide as its samples per round on B, coloured by its change
//   from A (red: more on B, blue: less; the deeper the colour, the larger the change);
// - A's stacks, coloured the same way: where what shrank or vanished on B is seen.
// Each graph is <svg class="plot" data-plot="flame" data-points=N>, each frame a
// <rect class="pt" data-frame=NAME data-a=.. data-b=..> with a <title> tooltip.
#include <string>

#include "faultline/v1/job.pb.h"
#include "report/table.h"

namespace faultline::report {

// "" when no comparison of the report was profiled.
std::string ProfilesHtml(const v1::GetReportResponse& report);

// For the page's other parts: & < > " escaped.
std::string HtmlEscape(const std::string& text);
// <table class=CSS_CLASS><caption>CAPTION</caption> the headers, then a row per row, escaped.
std::string HtmlTable(const Table& table, const std::string& css_class, const std::string& caption);

}  // namespace faultline::report
