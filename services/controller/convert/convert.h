#pragma once
// Proto <-> domain conversion at the API boundary (core and storage never see protobuf).
#include <optional>
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "faultline/v1/agent.pb.h"
#include "faultline/v1/job.pb.h"
#include "grpcpp/support/status.h"
#include "services/controller/core/domain.h"
#include "services/controller/core/report.h"
#include "services/controller/storage/records.h"

namespace faultline::controller {

// The spec for core's validation; its run options are checked here (run_options.h), an
// error is INVALID_ARGUMENT naming the field.
absl::StatusOr<JobSpecInput> SpecFromProto(const v1::JobSpec& spec);
std::string SpecToJson(const v1::JobSpec& spec);
v1::JobState ToProto(JobState state);
v1::RunState ToProto(RunState state);
v1::ChangePointState ToProto(ChangePointState state);
v1::BoardHealth ToProto(BoardHealth health);
// nullopt for UNSPECIFIED (or a value this controller does not know).
std::optional<ChangePointState> FromProto(v1::ChangePointState state);
void JobToProto(const JobRecord& job, v1::Job* out);
void RunToProto(const RunRecord& run, v1::Run* out);
void BoardToProto(const BoardRecord& board, v1::Board* out);
BoardRecord BoardFromProto(const v1::Board& board);
void AssignmentToProto(const Assignment& a, v1::Assignment* out);
void ScheduleToProto(const ScheduleRecord& schedule, v1::Schedule* out);
void ChangePointToProto(const ChangePointRecord& change_point, v1::ChangePoint* out);
// A built report (orchestration/report_builder.h) for GetReport.
void ReportToProto(const JobRecord& job, const JobReport& report, v1::GetReportResponse* out);
ResultRecord ResultFromProto(const v1::WorkloadResult& result);
// Builds of kernels jobs bring; `ref` and `config_base` come from the stored source.
void BuildToProto(const BuildRecord& build, v1::Build* out);
// What a builder reports (key, release, image, ...) as a record.
BuildRecord BuildFromProto(const v1::Build& build);
// A resolved kernel source as stored with its builds (JSON), and back.
std::string KernelSourceToJson(const v1::KernelSource& source);
v1::KernelSource KernelSourceFromJson(const std::string& json);

// The one place absl::Status becomes a gRPC status.
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace faultline::controller
