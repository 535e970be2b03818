#include "services/controller/orchestration/report_message.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/report_builder.h"

namespace faultline::controller {

absl::StatusOr<v1::GetReportResponse> ReportResponse(JobStore* jobs, BuildStore* builds,
                                                     const v1::GetReportRequest& request) {
  ReportOptions options;
  if (request.run_counters_size() > report::kMaxRunCounters) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_counters: at most ", report::kMaxRunCounters, " counter names"));
  }
  for (const auto& name : request.run_counters()) {
    if (name.empty() || name.size() > 128) {
      return absl::InvalidArgumentError("run_counters: each name must be 1..128 characters");
    }
    options.run_counters.push_back(name);
  }
  options.runs = request.runs();
  options.samples = request.samples();
  options.profiles = request.profiles();
  auto built = BuildReport(jobs, request.job_id(), options);
  if (!built.ok()) return built.status();
  v1::GetReportResponse response;
  ReportToProto(built->job, built->report, &response);
  if (builds != nullptr) {
    auto listed = builds->ListBuilds(request.job_id());
    if (!listed.ok()) return listed.status();
    for (auto it = listed->rbegin(); it != listed->rend(); ++it) {
      BuildToProto(*it, response.add_builds());
    }
  }
  return response;
}

absl::StatusOr<std::string> RenderJobReport(JobStore* jobs, BuildStore* builds, int64_t job_id,
                                            report::ReportFormat format,
                                            const report::ReportView& view) {
  return report::RenderJobReport(
      job_id, format, view, /*runs=*/false,
      [&](const v1::GetReportRequest& request) { return ReportResponse(jobs, builds, request); });
}

}  // namespace faultline::controller
