#include "services/controller/api/convert.h"

#include <algorithm>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

namespace faultline::controller {

using google::protobuf::util::TimeUtil;

JobSpecInput SpecFromProto(const v1::JobSpec& spec) {
  JobSpecInput in;
  in.benchmark = spec.benchmark();
  in.duration = spec.duration();
  in.repetitions = spec.repetitions();
  in.kernels.assign(spec.kernels().begin(), spec.kernels().end());
  in.memory_max = spec.memcg().memory_max();
  in.memory_high = spec.memcg().memory_high();
  in.swap_max = spec.memcg().swap_max();
  for (const auto& [k, v] : spec.params()) in.params[k] = v;
  // Protobuf maps have no order; sort the matrix keys so expansion is deterministic.
  for (const auto& [k, v] : spec.matrix()) {
    in.matrix.emplace_back(k, std::vector<std::string>(v.values().begin(), v.values().end()));
  }
  std::sort(in.matrix.begin(), in.matrix.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  in.arches.assign(spec.arches().begin(), spec.arches().end());
  in.boards.assign(spec.boards().begin(), spec.boards().end());
  in.each_board = spec.each_board();
  in.events.assign(spec.events().begin(), spec.events().end());
  in.name = spec.name();
  in.baseline = spec.baseline();
  in.block_size = spec.block_size();
  in.shuffle_seed = spec.shuffle_seed();
  in.alpha = spec.alpha();
  in.min_effect = spec.min_effect();
  in.max_repetitions = spec.max_repetitions();
  in.target_ci_half_width = spec.target_ci_half_width();
  for (const auto& [label, o] : spec.kernel_overrides()) {
    in.kernel_overrides[label].insert(o.params().begin(), o.params().end());
  }
  return in;
}

std::string SpecToJson(const v1::JobSpec& spec) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &out, options);
  return out;
}

v1::JobState ToProto(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return v1::JOB_STATE_QUEUED;
    case JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

v1::RunState ToProto(RunState state) {
  switch (state) {
    case RunState::kQueued:
      return v1::RUN_STATE_QUEUED;
    case RunState::kAssigned:
      return v1::RUN_STATE_ASSIGNED;
    case RunState::kRunning:
      return v1::RUN_STATE_RUNNING;
    case RunState::kSucceeded:
      return v1::RUN_STATE_SUCCEEDED;
    case RunState::kFailed:
      return v1::RUN_STATE_FAILED;
    case RunState::kCancelled:
      return v1::RUN_STATE_CANCELLED;
  }
  return v1::RUN_STATE_UNSPECIFIED;
}

v1::BoardHealth ToProto(BoardHealth health) {
  switch (health) {
    case BoardHealth::kOk:
      return v1::BOARD_HEALTH_OK;
    case BoardHealth::kSwitching:
      return v1::BOARD_HEALTH_SWITCHING;
    case BoardHealth::kNeedsCheck:
      return v1::BOARD_HEALTH_NEEDS_CHECK;
  }
  return v1::BOARD_HEALTH_UNSPECIFIED;
}

v1::ChangePointState ToProto(ChangePointState state) {
  switch (state) {
    case ChangePointState::kOpen:
      return v1::CHANGE_POINT_STATE_OPEN;
    case ChangePointState::kAcknowledged:
      return v1::CHANGE_POINT_STATE_ACKNOWLEDGED;
    case ChangePointState::kFixed:
      return v1::CHANGE_POINT_STATE_FIXED;
    case ChangePointState::kInvalid:
      return v1::CHANGE_POINT_STATE_INVALID;
  }
  return v1::CHANGE_POINT_STATE_UNSPECIFIED;
}

std::optional<ChangePointState> FromProto(v1::ChangePointState state) {
  switch (state) {
    case v1::CHANGE_POINT_STATE_OPEN:
      return ChangePointState::kOpen;
    case v1::CHANGE_POINT_STATE_ACKNOWLEDGED:
      return ChangePointState::kAcknowledged;
    case v1::CHANGE_POINT_STATE_FIXED:
      return ChangePointState::kFixed;
    case v1::CHANGE_POINT_STATE_INVALID:
      return ChangePointState::kInvalid;
    default:
      return std::nullopt;
  }
}

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

void JobToProto(const JobRecord& job, v1::Job* out) {
  out->set_id(job.id);
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  (void)google::protobuf::util::JsonStringToMessage(job.spec_json, out->mutable_spec(), options);
  out->set_state(ToProto(job.state));
  auto* c = out->mutable_runs();
  c->set_total(job.counts.total);
  c->set_queued(job.counts.queued);
  c->set_assigned(job.counts.assigned);
  c->set_running(job.counts.running);
  c->set_succeeded(job.counts.succeeded);
  c->set_failed(job.counts.failed);
  c->set_cancelled(job.counts.cancelled);
  *out->mutable_created_at() = TimeUtil::MillisecondsToTimestamp(job.created_at_ms);
  if (job.finished_at_ms != 0) {
    *out->mutable_finished_at() = TimeUtil::MillisecondsToTimestamp(job.finished_at_ms);
  }
}

void RunToProto(const RunRecord& run, v1::Run* out) {
  out->set_id(run.id);
  out->set_job_id(run.job_id);
  for (const auto& [k, v] : run.cell) (*out->mutable_cell())[k] = v;
  out->set_kernel(run.kernel);
  out->set_repetition(static_cast<uint32_t>(run.repetition));
  out->set_state(ToProto(run.state));
  out->set_board(run.board);
  out->set_failure_reason(run.failure_reason);
  out->set_attempt(static_cast<uint32_t>(run.attempt));
  if (run.has_result) {
    out->set_throughput_rounds_per_second(run.throughput);
    out->set_duration_seconds(run.duration_seconds);
    out->set_rounds(run.rounds);
  }
}

void BoardToProto(const BoardRecord& board, v1::Board* out) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  (void)google::protobuf::util::JsonStringToMessage(board.facts_json, out, options);
  out->set_name(board.summary.name);
  out->set_state(board.online ? v1::BOARD_STATE_ONLINE : v1::BOARD_STATE_OFFLINE);
  *out->mutable_last_seen() = TimeUtil::MillisecondsToTimestamp(board.last_seen_ms);
  out->set_current_run_id(board.current_run_id);
  out->set_health(ToProto(board.summary.health));
  out->set_health_reason(board.summary.health_reason);
  out->set_kernel_switches(board.summary.kernel_switches);
  if (!board.summary.boot_id.empty()) out->set_boot_id(board.summary.boot_id);
}

BoardRecord BoardFromProto(const v1::Board& board) {
  BoardRecord rec;
  rec.summary.name = board.name();
  rec.summary.arch = board.arch();
  rec.summary.memory_bytes = board.memory_bytes();
  for (const auto& k : board.kernels()) rec.summary.kernel_labels.push_back(k.label());
  rec.summary.running_kernel_label = board.running_kernel_label();
  rec.summary.running_kernel_labels.assign(board.running_kernel_labels().begin(),
                                           board.running_kernel_labels().end());
  for (const auto& k : board.kernels()) {
    if (!k.boot_method().empty() && k.boot_method() != "none") {
      rec.summary.bootable_kernel_labels.push_back(k.label());
    }
  }
  rec.summary.boot_id = board.boot_id();
  // What an agent may say: needs-check or not (switching is the controller's to set).
  rec.summary.health =
      board.health() == v1::BOARD_HEALTH_NEEDS_CHECK ? BoardHealth::kNeedsCheck : BoardHealth::kOk;
  rec.summary.health_reason = board.health_reason();
  v1::Board facts = board;
  facts.clear_health();
  facts.clear_health_reason();
  facts.clear_kernel_switches();
  facts.clear_state();
  facts.clear_last_seen();
  facts.clear_current_run_id();
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(facts, &rec.facts_json, options);
  return rec;
}

void AssignmentToProto(const Assignment& a, v1::Assignment* out) {
  out->set_run_id(a.run_id);
  out->set_attempt_id(a.attempt_id);
  out->set_job_id(a.job_id);
  out->set_benchmark(a.benchmark);
  out->set_kernel(a.kernel);
  out->set_duration_seconds(a.duration_seconds);
  for (const auto& [k, v] : a.params) (*out->mutable_params())[k] = v;
  out->mutable_memcg()->set_memory_max(std::to_string(a.memcg.memory_max));
  if (a.memcg.memory_high)
    out->mutable_memcg()->set_memory_high(std::to_string(*a.memcg.memory_high));
  out->mutable_memcg()->set_swap_max(a.memcg.swap_max ? std::to_string(*a.memcg.swap_max) : "max");
  out->set_lease_seconds(a.lease_seconds);
  for (const auto& event : a.events) out->add_events(event);
}

ResultRecord ResultFromProto(const v1::WorkloadResult& result) {
  ResultRecord r;
  r.throughput = result.throughput_rounds_per_second();
  r.rounds = result.rounds();
  r.duration_seconds = result.duration_seconds();
  r.warmup_seconds = result.warmup_seconds();
  for (const auto& s : result.samples()) {
    r.samples.emplace_back(s.second(), s.rounds());
    r.sample_pages.push_back(s.pages());
  }
  r.pages = result.pages();
  r.pages_per_second = result.pages_per_second();
  r.too_coarse = result.too_coarse();
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [k, v] : result.counters()) counters[k] = v;
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : result.environment()) env[k] = v;
  for (const auto& [k, v] : result.params()) env["param." + k] = v;
  r.counters_json = counters.dump();
  r.environment_json = env.dump();
  return r;
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace faultline::controller
