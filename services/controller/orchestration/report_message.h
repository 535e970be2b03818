#pragma once
// A job's report as the API returns it (GetReport) and as text in any of report/'s formats:
// what the controller sends by itself (a reply to a posted series) reads as what
// `faultline report JOB --format F` prints.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "report/report.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// GetReport's response: the built report (report_builder.h) with the job's builds, newest
// last. `builds` may be null (no kernels built by the controller). A request out of bounds
// (run_counters) is INVALID_ARGUMENT naming the field and the limit.
absl::StatusOr<v1::GetReportResponse> ReportResponse(JobStore* jobs, BuildStore* builds,
                                                     const v1::GetReportRequest& request);

// The job's report rendered as `format`, fetched with what that format needs
// (report::RenderJobReport).
absl::StatusOr<std::string> RenderJobReport(JobStore* jobs, BuildStore* builds, int64_t job_id,
                                            report::ReportFormat format,
                                            const report::ReportView& view = {});

}  // namespace faultline::controller
