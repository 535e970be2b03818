#include "services/controller/convert/convert.h"

#include <algorithm>

#include "common/strings.h"
#include "faultline/v1/run_options.h"
#include "faultline/v1/values.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "google/protobuf/util/type_resolver_util.h"
#include "nlohmann/json.hpp"
#include "services/controller/convert/run_options.h"
#include "services/controller/core/profiles.h"

namespace faultline::controller {

using google::protobuf::util::TimeUtil;

absl::StatusOr<JobSpecInput> SpecFromProto(const v1::JobSpec& spec) {
  auto options = ValidateRunOptions(spec);
  if (!options.ok()) return options.status();
  JobSpecInput in;
  in.run_options = v1::RunOptionsToJson(*options);
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
  // Maps (params, matrix, kernel_sources) in key order: MessageToJsonString writes them in
  // the order of their hash table, which differs between two messages holding the same
  // entries, and the stored spec's digest is what a retry under a request id is compared by.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream raw(&binary);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    spec.SerializeToCodedStream(&coded);
  }
  static google::protobuf::util::TypeResolver* const resolver =
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          "type.googleapis.com", google::protobuf::DescriptorPool::generated_pool());
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::BinaryToJsonString(
      resolver, "type.googleapis.com/" + spec.GetDescriptor()->full_name(), binary, &out, options);
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
  rec.summary.boots_built_kernels = board.boots_built_kernels();
  rec.summary.build_arches.assign(board.build_arches().begin(), board.build_arches().end());
  rec.summary.reports_unbooted_switches = board.reports_unbooted_switches();
  // What an agent may say: needs-check or not (switching is the controller's to set).
  rec.summary.health =
      board.health() == v1::BOARD_HEALTH_NEEDS_CHECK ? BoardHealth::kNeedsCheck : BoardHealth::kOk;
  rec.summary.health_reason = board.health_reason();
  rec.previous_boot_log = board.previous_boot_log();
  v1::Board facts = board;
  facts.clear_previous_boot_log();
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
  out->mutable_limits()->set_memory_max(a.memcg.memory_max);
  if (a.memcg.memory_high) out->mutable_limits()->set_memory_high(*a.memcg.memory_high);
  if (a.memcg.swap_max) out->mutable_limits()->set_swap_max(*a.memcg.swap_max);
  out->set_warmup_ms(a.warmup_ms);
  out->set_lease_seconds(a.lease_seconds);
  // The job's options whole, and in the older fields for agents before Assignment.options.
  // (jobs.run_options is jsonb this controller wrote; one written by a newer controller
  // is read for the options this one knows.)
  auto options = RunOptionsFromJson(a.run_options);
  if (!options.ok()) options = v1::RunOptions();
  *out->mutable_options() = *options;
  *out->mutable_events() = options->events();
  out->set_mmap_lock_waits(options->mmap_lock_waits());
  if (options->has_profile()) *out->mutable_profile() = options->profile();
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
  r.folded_stacks = ValidUtf8(result.folded_stacks());
  // An agent before the field sent the stacks as an environment fact: they are a result.
  if (auto it = env.find(std::string(kFoldedStacksKey)); it != env.end()) {
    if (r.folded_stacks.empty() && it->is_string())
      r.folded_stacks = ValidUtf8(it->get<std::string>());
    env.erase(it);
  }
  r.counters_json = counters.dump();
  r.environment_json = env.dump();
  return r;
}

void ScheduleToProto(const ScheduleRecord& r, v1::Schedule* out) {
  out->set_id(r.id);
  out->set_name(r.name);
  out->set_cron(r.cron);
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  (void)google::protobuf::util::JsonStringToMessage(r.spec_json, out->mutable_spec(), options);
  *out->mutable_next_run() = TimeUtil::MillisecondsToTimestamp(r.next_run_ms);
  if (r.last_run_ms != 0)
    *out->mutable_last_run() = TimeUtil::MillisecondsToTimestamp(r.last_run_ms);
  out->set_last_job_id(r.last_job_id);
  out->set_last_error(r.last_error);
}

void ChangePointToProto(const ChangePointRecord& c, v1::ChangePoint* out) {
  out->set_id(c.id);
  out->set_study(c.study);
  out->set_benchmark(c.benchmark);
  out->set_config(c.config);
  out->set_arch(c.arch);
  out->set_board(c.board);
  out->set_kernel(c.kernel);
  out->set_job_id(c.job_id);
  out->set_previous_job_id(c.previous_job_id);
  out->set_mean_before(c.mean_before);
  out->set_mean_after(c.mean_after);
  out->set_relative_change(c.relative_change);
  out->set_p_value(c.p_value);
  out->set_state(ToProto(c.state));
  *out->mutable_detected_at() = TimeUtil::MillisecondsToTimestamp(c.detected_at_ms);
}

namespace {

// A cell (a map, or the report's ordered key/value list) into a proto map.
template <typename Pairs, typename Map>
void CellToProto(const Pairs& cell, Map* out) {
  for (const auto& [k, v] : cell) (*out)[k] = v;
}

void CounterToProto(const CounterComparison& k, v1::CounterComparison* out) {
  out->set_name(k.name);
  out->set_unit(k.unit);
  out->set_baseline_median(k.median_a);
  out->set_candidate_median(k.median_b);
  out->set_baseline_per_second(k.median_a_per_second);
  out->set_candidate_per_second(k.median_b_per_second);
  out->set_ratio(k.ratio);
  out->set_ci_low(k.ci_low);
  out->set_ci_high(k.ci_high);
  out->set_p_value(k.p_value);
  out->set_q_value(k.q_value);
  out->set_significant(k.significant);
  out->set_paired(k.paired);
  out->set_only_on(k.only_on);
  out->set_difference(k.difference);
  out->set_difference_low(k.difference_low);
  out->set_difference_high(k.difference_high);
}

void MedianToProto(const stats::MedianInterval& m, v1::MedianSummary* out) {
  out->set_n(static_cast<uint32_t>(m.n));
  out->set_median(m.median);
  out->set_ci_low(m.low);
  out->set_ci_high(m.high);
}

void MedianTableToProto(const MedianTable& table, v1::MedianTable* out) {
  out->set_title(table.title);
  out->set_first_column(table.first_column);
  out->set_unit(table.unit);
  for (const MedianTableRow& row : table.rows) {
    v1::MedianTableRow* r = out->add_rows();
    r->set_label(row.label);
    MedianToProto(row.baseline, r->mutable_baseline());
    MedianToProto(row.candidate, r->mutable_candidate());
    r->set_ratio(row.ratio);
    r->set_ci_low(row.ci_low);
    r->set_ci_high(row.ci_high);
    r->set_per_unit(row.per_unit);
    r->set_p_value(row.p_value);
    r->set_q_value(row.q_value);
    r->set_significant(row.significant);
  }
}

void ComparisonToProto(const ReportComparison& comparison, v1::Comparison* out) {
  const ComparisonRow& c = comparison.row;
  CellToProto(c.cell, out->mutable_cell());
  out->set_board(c.board);
  out->set_baseline(c.baseline);
  out->set_candidate(c.candidate);
  out->set_n_baseline(static_cast<uint32_t>(c.stats.n_a));
  out->set_n_candidate(static_cast<uint32_t>(c.stats.n_b));
  out->set_baseline_median(c.stats.median_a);
  out->set_candidate_median(c.stats.median_b);
  out->set_ratio(c.stats.ratio);
  out->set_ci_low(c.stats.ci_low);
  out->set_ci_high(c.stats.ci_high);
  out->set_p_value(c.stats.p_value);
  out->set_q_value(c.stats.q_value);
  out->set_metric(c.metric);
  out->set_paired(c.stats.paired);
  out->set_unpaired_ratio(c.unpaired.ratio);
  out->set_unpaired_ci_low(c.unpaired.ci_low);
  out->set_unpaired_ci_high(c.unpaired.ci_high);
  v1::SetVerdict(out, v1::ParseVerdict(stats::ToString(c.stats.verdict)));
  for (const CounterComparison& k : comparison.counters) CounterToProto(k, out->add_counters());
  for (const MedianTable& t : comparison.tables) MedianTableToProto(t, out->add_tables());
  for (const auto& [from, to] :
       {std::make_pair(&comparison.baseline_stacks, out->mutable_baseline_stacks()),
        std::make_pair(&comparison.candidate_stacks, out->mutable_candidate_stacks())}) {
    for (const FoldedStack& f : *from) {
      v1::FoldedStack* stack = to->Add();
      stack->set_stack(f.stack);
      stack->set_per_round(f.per_round);
    }
  }
}

}  // namespace

void ReportToProto(const JobRecord& job, const JobReport& report, v1::GetReportResponse* out) {
  JobToProto(job, out->mutable_job());
  for (const auto& k : report.matrix_keys) out->add_matrix_keys(k);
  for (const SummaryRow& row : report.rows) {
    auto* r = out->add_rows();
    CellToProto(row.cell, r->mutable_cell());
    r->set_kernel(row.kernel);
    r->set_board(row.board);
    r->set_n(row.n);
    r->set_median(row.median);
    r->set_min(row.min);
    r->set_max(row.max);
    r->set_mean(row.mean);
    r->set_failed(row.failed);
    r->set_too_coarse(row.too_coarse);
    r->set_median_pages_per_second(row.median_pages_per_second);
  }
  for (const auto& c : report.comparisons) ComparisonToProto(c, out->add_comparisons());
  out->set_alpha(report.alpha);
  out->set_min_effect(report.min_effect);
  for (const auto& [k, v] : report.environment_differences) {
    (*out->mutable_environment_differences())[k] = v;
  }
  for (const auto& c : report.caveats) out->add_caveats(c);
  for (const ReportRunResult& r : report.run_results) {
    auto* row = out->add_run_results();
    CellToProto(r.cell, row->mutable_cell());
    row->set_kernel(r.kernel);
    row->set_board(r.board);
    row->set_repetition(static_cast<uint32_t>(r.repetition));
    row->set_rounds(r.rounds);
    row->set_throughput(r.throughput);
    row->set_order(r.order);
    for (double s : r.samples) row->add_samples(s);
    for (const auto& [name, value] : r.counters) (*row->mutable_counters())[name] = value;
  }
  for (const auto& [board, facts] : report.board_facts) {
    auto* b = out->add_boards();
    b->set_board(board);
    for (const auto& [k, v] : facts) (*b->mutable_facts())[k] = v;
  }
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::string KernelSourceToJson(const v1::KernelSource& source) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(source, &out, options);
  return out;
}

v1::KernelSource KernelSourceFromJson(const std::string& json) {
  v1::KernelSource source;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  (void)google::protobuf::util::JsonStringToMessage(json, &source, options);
  return source;
}

void BuildToProto(const BuildRecord& b, v1::Build* out) {
  out->set_id(b.id);
  out->set_label(b.label);
  out->set_arch(b.arch);
  v1::SetBuildState(out, v1::ParseBuildState(ToString(b.state)));
  out->set_builder(b.builder);
  out->set_key(b.key);
  out->set_release(b.release);
  out->set_base_commit(b.base_commit);
  out->set_tree_hash(b.tree_hash);
  out->set_config_sha256(b.config_sha256);
  out->set_compiler(b.compiler);
  for (const auto& s : b.series) out->add_series(s);
  out->set_image_sha256(b.image_sha256);
  out->set_image_bytes(b.image_bytes);
  out->set_build_seconds(b.build_seconds);
  out->set_cached(b.cached);
  out->set_error(b.error);
  if (b.apply_failure) {
    v1::ApplyFailure* f = out->mutable_apply_failure();
    f->set_patch(b.apply_failure->patch);
    f->set_subject(b.apply_failure->subject);
    f->set_source(b.apply_failure->source);
    f->set_file(b.apply_failure->file);
    f->set_hunk(b.apply_failure->hunk);
    f->set_reason(b.apply_failure->reason);
  }
  out->set_attempts(b.attempts);
  if (b.created_ms > 0) {
    *out->mutable_created_at() =
        google::protobuf::util::TimeUtil::MillisecondsToTimestamp(b.created_ms);
  }
  if (b.finished_ms > 0) {
    *out->mutable_finished_at() =
        google::protobuf::util::TimeUtil::MillisecondsToTimestamp(b.finished_ms);
  }
  const v1::KernelSource source = KernelSourceFromJson(b.source_json);
  out->set_ref(source.ref());
  out->set_config_base(source.config_base());
  out->set_image_url(source.image());
  for (const auto& bad : b.bad_boots) {
    v1::BadBoot* o = out->add_bad_boots();
    o->set_board(bad.board);
    o->set_reason(bad.reason);
    o->set_console(bad.console);
    if (bad.at_ms > 0) {
      *o->mutable_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(bad.at_ms);
    }
  }
}

BuildRecord BuildFromProto(const v1::Build& build) {
  BuildRecord b;
  b.key = build.key();
  b.release = build.release();
  b.base_commit = build.base_commit();
  b.tree_hash = build.tree_hash();
  b.config_sha256 = build.config_sha256();
  b.compiler = build.compiler();
  b.series.assign(build.series().begin(), build.series().end());
  b.image_sha256 = build.image_sha256();
  b.image_bytes = build.image_bytes();
  b.build_seconds = build.build_seconds();
  b.cached = build.cached();
  b.error = build.error();
  if (build.has_apply_failure() && build.apply_failure().patch() > 0) {
    // A builder's words about a stranger's series: bounded, and fit for a text column.
    auto text = [](const std::string& s) { return ValidUtf8(s.substr(0, 2000)); };
    const v1::ApplyFailure& f = build.apply_failure();
    b.apply_failure = ApplyFailureRecord{.patch = f.patch(),
                                         .subject = text(f.subject()),
                                         .source = text(f.source()),
                                         .file = text(f.file()),
                                         .hunk = text(f.hunk()),
                                         .reason = text(f.reason())};
  }
  return b;
}

}  // namespace faultline::controller
