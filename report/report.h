#pragma once
// The CLI's roof: `faultline report` as a whole (summary, per-run table, A/B comparisons,
// caveats) in each output format. No I/O and no gRPC calls.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "report/format.h"
#include "report/run_table.h"

namespace faultline::report {

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

// GetReportRequest.run_counters: at most this many names (the controller refuses more).
inline constexpr int kMaxRunCounters = 64;

// What `format` needs from GetReport: the view's counters per run; the runs for mmtests, lkp
// and html (their statistics and plots are over runs), and their seconds for html; `runs`
// asks for both whatever the format.
v1::GetReportRequest ReportRequest(int64_t job_id, ReportFormat format, const ReportView& view,
                                   bool runs);

// GetReport, however it is reached: over gRPC (the CLI) or in-process (the controller).
using ReportFetch =
    std::function<absl::StatusOr<v1::GetReportResponse>(const v1::GetReportRequest&)>;

// The job's report as RenderReport gives it, fetched through `fetch` with ReportRequest and,
// for lkp without asked-for counters, once more with the counters that changed per run (each
// side's stddev needs them). The first error of `fetch` is returned as it is.
absl::StatusOr<std::string> RenderJobReport(int64_t job_id, ReportFormat format,
                                            const ReportView& view, bool runs,
                                            const ReportFetch& fetch);

}  // namespace faultline::report
