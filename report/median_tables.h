#pragma once
// The seed series' mmap_lock tables in `faultline report` (controller
// core/lock_wait_tables.h): per comparison, "== title ==" and a ruled table with the
// baseline (Before) and candidate (After) medians per round with their 95% CIs, and the
// change. Pure formatting, like comparison.h.
#include <string>

#include "faultline/v1/job.pb.h"
#include "report/table.h"

namespace faultline::report {

// 20010 -> "20,010", 534 -> "534", 71.04 -> "71.0", 5.719 -> "5.72", 0.0123 -> "0.0123",
// 10695877 -> "10.7M", NaN -> "-": three significant figures (all digits up to 99,949,
// thousands grouped).
std::string SeedNumber(double value);

// What a table's per-unit rows are multiplied by so that the smallest non-zero median is at
// least 0.1: 1, 1000 or 1000000 ("per 1,000 rounds").
double TableScale(const v1::MedianTable& table);
// "per round", "per 1,000 rounds; averages and maxima per acquisition": what its values are.
std::string TableUnit(const v1::MedianTable& table);

// | Metric | Vanilla (median [95% CI]) | Patched (...) | Change |: Change is the
// Hodges-Lehmann B/A as a percentage, starred when the row is significant (q ≤ α after
// Benjamini-Hochberg over all the comparison's rows); "N/A" when a side never saw any (as
// the seed prints it).
Table MedianTableRows(const v1::MedianTable& table, const std::string& baseline,
                      const std::string& candidate);

// "medians of 16 runs per kernel [95% CI];\n* marks a change with q <= 0.01 (...)\n";
// "" when the comparison has no tables.
std::string MedianTablesLegend(const v1::Comparison& comparison, double alpha);
// "== title ==\n(per round)\n", as the seed heads its tables.
std::string MedianTableHeading(const v1::MedianTable& table);

// Every table of the comparison, titled as the seed titles them; "" when it has none.
// `where`: " at threads=8" (the cell), or "". `alpha`: the report's (what a star means).
std::string RenderMedianTables(const v1::Comparison& comparison, const std::string& where,
                               ReportFormat format, double alpha);

}  // namespace faultline::report
