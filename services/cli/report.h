#pragma once
// The CLI's roof: `faultline report` as a whole (summary, per-run table, A/B comparisons,
// caveats) in each output format. No I/O and no gRPC calls.
#include <string>
#include <vector>

#include "faultline/v1/job.pb.h"
#include "services/cli/format.h"
#include "services/cli/run_table.h"

namespace faultline::cli {

// Reports: one row per (matrix cell, kernel); columns = matrix_keys, then kernel, board,
// n, median, min, max, failed.
Table ReportTable(const v1::GetReportResponse& report);
// "job 42: filemap-thrash "nightly" (succeeded, 6/6 runs)"
std::string ReportTitle(const v1::GetReportResponse& report);
// Whole output for `faultline report`, ending in a newline. JSON uses the proto field names.
// With comparisons, table and markdown add the A/B tables (comparison.h); CSV is
// ReportCsvTable().
struct ReportView {
  // Every compared counter under each comparison instead of the significant ones; with CSV,
  // the counters' table (CounterCsvTable) instead of the throughput one.
  bool all_counters = false;
  // Non-empty: the per-run table with these columns (RunTable) after the summary; with CSV,
  // that table instead of the throughput one. The report must hold run_results.
  std::vector<ColumnSpec> columns;
  bool utf8 = false;  // mail, mmtests, lkp: keep non-ASCII characters (mail.h)
};
std::string RenderReport(const v1::GetReportResponse& report, ReportFormat format,
                         const ReportView& view = {});

}  // namespace faultline::cli
