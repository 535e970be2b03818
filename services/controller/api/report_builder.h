#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// A job's report: per cell/kernel/board summaries, A/B comparisons with verdicts, and the
// environment that differs between kernels. Shared by GetReport and /metrics.
struct ReportOptions {
  // Compare every counter under each comparison (CompareCounters); off: throughput only.
  bool compare_counters = true;
  // Counters to return per succeeded run (GetReportResponse.run_results), for seed-shaped
  // tables; empty: no per-run rows.
  std::vector<std::string> run_counters;
};
absl::Status BuildReport(JobStore* store, int64_t job_id, v1::GetReportResponse* resp,
                         const ReportOptions& options = {});

}  // namespace faultline::controller
