#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// A job's report: per cell/kernel/board summaries, A/B comparisons with verdicts, and the
// environment that differs between kernels. Shared by GetReport and /metrics.
absl::Status BuildReport(JobStore* store, int64_t job_id, v1::GetReportResponse* resp);

}  // namespace faultline::controller
