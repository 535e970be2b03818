#pragma once
// A/B comparison output: the seeds' two tables per board (throughput at the same pressure,
// and under increasing pressure relative to the first column), the statistics per cell
// (n per side, Hodges–Lehmann change, CI, p, q, verdict) and `faultline compare`'s output.
// Pure formatting, like format.h.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "faultline/v1/job.pb.h"
#include "report/format.h"
#include "stats/statistics.h"

namespace faultline::report {

// "vanilla" -> "Vanilla" (first letter upper-cased, the rest as given), as the seeds head
// their tables. A label with a source ("patched@1743ea3805bc") is an identifier the reader
// types back into commands: kept as it is.
std::string KernelTitle(std::string_view label);

// How a swept knob is named in the tables: writers -> "mmap writers" (columns "2 mmap
// writers", titles "... mmap writer pressure"), threads -> "Threads" ("40 threads",
// "thread count"); any other key as itself ("key=value", "key").
struct KnobNames {
  std::string header;    // first column of the same-pressure table
  std::string unit;      // "mmap writers"; empty: columns are "key=value"
  std::string pressure;  // "mmap writer pressure"
  std::string key;
  std::string Column(std::string_view value) const;
};
KnobNames NamesForKnob(std::string_view key);

// Whether two matrix cells are the same (every key with the same value).
// The comparison's value of knob `key`, "-" where its cell has none.
std::string CellValue(const v1::Comparison& c, const std::string& key);
bool SameCell(const google::protobuf::Map<std::string, std::string>& a,
              const google::protobuf::Map<std::string, std::string>& b);

// ratio 1.063 -> "+6.3%"; "-" when not finite or not positive.
std::string FormatChange(double ratio);
// "[-2.1%, +9.8%]"; "unbounded" when the samples cannot bound it; "-" when absent.
std::string FormatCi(double low, double high);
// A counter's change: "+6.3%" from its ratio; where some run counted 0 (no ratio), the
// difference B − A per unit, "+7.6" (no % sign); "-" when neither.
std::string FormatCounterChange(const v1::CounterComparison& k);
// Its CI in the same form: "[-2.1%, +9.8%]" or "[+5.1, +9.3]"; "unbounded"; "-".
std::string FormatCounterCi(const v1::CounterComparison& k);
// True for a counter compared by its difference (FormatCounterChange without %).
bool IsDifference(const v1::CounterComparison& k);
// The note under the seed's box table: its Improvement is the statistics' estimate, the one
// number a report gives for a change (not the ratio of the two medians beside it).
inline constexpr char kImprovementNote[] =
    "Improvement: the Hodges-Lehmann change, as in the statistics below.";
// The note under a counter table that has differences.
inline constexpr char kDifferenceNote[] =
    "A change without %: the difference B - A per unit, where some run counted 0\n"
    "(a ratio to 0 says nothing).";
// "0.0040", "<0.0001"; "-" when absent.
std::string FormatPValue(double p);

// The comparisons of one board and kernel pair (and one value of every matrix key other
// than the swept one), cells ordered by the swept knob (numerically when all are numbers).
struct ComparisonGroup {
  std::string board;
  std::string baseline;
  std::string candidate;
  std::string knob;  // the swept matrix key: writers, else threads, else the last key; "" if none
  std::vector<std::pair<std::string, std::string>> fixed;  // the other matrix keys' values
  std::vector<const v1::Comparison*> cells;
};
// Groups in first-seen order. Pointers refer into `report`.
std::vector<ComparisonGroup> GroupComparisons(const v1::GetReportResponse& report);
std::string GroupHeading(const ComparisonGroup& group);  // "board i7: Patched vs Vanilla"

// | mmap writers | Vanilla | Patched | Improvement |  (improvement of the medians shown)
Table SamePressureTable(const ComparisonGroup& group);
std::string SamePressureTitle(const ComparisonGroup& group);
// | Kernel | 0 mmap writers | 2 mmap writers (-3.3%) ... ; no rows with fewer than 2 knob values.
Table PressureTable(const ComparisonGroup& group);
std::string PressureTitle(const ComparisonGroup& group);
// | mmap writers | n Vanilla | n Patched | Change | 95% CI | p | q | Verdict |
Table ComparisonStatsTable(const ComparisonGroup& group);
std::string StatsTitle(const ComparisonGroup& group, double alpha, double min_effect);

// The comparisons section of `faultline report` (empty when there are none): per group the
// three tables, then the environment differences (keys "board/fact" grouped per board).
// kTable and kMarkdown only.
// Under each cell's statistics, the counters that changed significantly (largest first), or
// every compared counter with all_counters.
std::string RenderComparisons(const v1::GetReportResponse& report, ReportFormat format,
                              bool all_counters = false);

// | Counter | Vanilla /round | Patched /round | Ratio | 95% CI | q |: the comparison's
// significant counter changes, or all of them (then also the ones on one side only).
Table CounterTable(const v1::Comparison& comparison, bool all_counters);
// One row per compared counter of every comparison: the CSV of `report --counters all`.
Table CounterCsvTable(const v1::GetReportResponse& report);

// `report --format csv`: one row per ReportRow (matrix keys, kernel, board, n, median, min,
// max, mean, failed), plus the comparison of that row's kernel with the baseline when there
// is one (baseline, ratio, ci_low, ci_high, p_value, q_value, verdict; empty otherwise).
Table ReportCsvTable(const v1::GetReportResponse& report);
std::string CsvNumber(double value);  // shortest round-trip form; "" for NaN

// `faultline compare`: the statistics of two sample files as a Comparison message
// (baseline/candidate = the file names).
v1::Comparison ToComparison(const stats::CellComparison& cell, std::string_view baseline,
                            std::string_view candidate);
std::string RenderOfflineComparison(const v1::Comparison& comparison,
                                    const stats::CompareOptions& options, ReportFormat format);

}  // namespace faultline::report
