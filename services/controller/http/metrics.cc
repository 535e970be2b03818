#include "services/controller/http/metrics.h"

#include <cmath>
#include <sstream>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "prometheus/text_serializer.h"
#include "services/controller/core/cron.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/core/report.h"
#include "services/controller/http/exposition.h"

namespace faultline::controller {
namespace {

// The codes a dashboard tells apart, by gRPC's (= absl's) names; the rest are "OTHER", so
// the label's values stay bounded.
std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::INTERNAL:
      return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    default:
      return "OTHER";
  }
}

const char* kVerdicts[] = {"improvement", "regression", "no-change", "inconclusive", "collapse"};
const char* kRunStates[] = {"queued", "assigned", "running", "succeeded", "failed", "cancelled"};
const char* kJobStates[] = {"queued", "running", "succeeded", "failed", "cancelled"};

}  // namespace

ControllerMetrics::ControllerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  rpc_duration_ = &prometheus::BuildHistogram()
                       .Name("faultline_rpc_duration_seconds")
                       .Help("Latency of unary gRPC calls served by the controller")
                       .Register(*registry_);
  run_duration_ = &prometheus::BuildHistogram()
                       .Name("faultline_run_duration_seconds")
                       .Help("Measured duration plus warm-up of finished runs")
                       .Register(*registry_);
  runs_finished_ = &prometheus::BuildCounter()
                        .Name("faultline_runs_finished_total")
                        .Help("Runs whose outcome this controller stored")
                        .Register(*registry_);
  build_duration_ = &prometheus::BuildHistogram()
                         .Name("faultline_kernel_build_seconds")
                         .Help("Kernel builds by builders: time of the build that made the image")
                         .Register(*registry_);
  builds_finished_ = &prometheus::BuildCounter()
                          .Name("faultline_kernel_builds_total")
                          .Help(
                              "Kernel builds finished, by outcome and builder cache (hit: "
                              "found built, miss: compiled)")
                          .Register(*registry_);
  job_phase_ = &prometheus::BuildHistogram()
                    .Name("faultline_job_phase_seconds")
                    .Help(
                        "Finished jobs' time per arch and phase: build_queue, building, "
                        "board_wait, switching, measuring")
                    .Register(*registry_);
  job_total_ = &prometheus::BuildHistogram()
                    .Name("faultline_job_seconds")
                    .Help("Finished jobs' time per arch, from submission to its last run's end")
                    .Register(*registry_);
}

void ControllerMetrics::ObserveRpc(const std::string& method, grpc::StatusCode code,
                                   double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  rpc_duration_->Add({{"method", method}, {"code", CodeName(code)}}, kBuckets).Observe(seconds);
}

void ControllerMetrics::ObserveRunFinished(const std::string& benchmark, bool succeeded,
                                           double seconds) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400};
  run_duration_->Add({{"benchmark", benchmark}}, kBuckets).Observe(seconds);
  runs_finished_->Add({{"benchmark", benchmark}, {"outcome", succeeded ? "succeeded" : "failed"}})
      .Increment();
}

void ControllerMetrics::ObserveBuild(bool succeeded, double seconds, bool cached) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {5,   15,  30,   60,   120,
                                                                   300, 600, 1200, 2400, 4800};
  const std::string outcome = succeeded ? "succeeded" : "failed";
  if (succeeded && !cached) build_duration_->Add({}, kBuckets).Observe(seconds);
  builds_finished_->Add({{"outcome", outcome}, {"cache", cached ? "hit" : "miss"}}).Increment();
}

void ControllerMetrics::ObservePhases(const std::vector<ArchPhases>& phases) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200};
  for (const ArchPhases& a : phases) {
    for (int p = 0; p < kPhaseCount; ++p) {
      job_phase_->Add({{"arch", a.arch}, {"phase", PhaseName(static_cast<Phase>(p))}}, kBuckets)
          .Observe(a.seconds[p]);
    }
    job_total_->Add({{"arch", a.arch}}, kBuckets).Observe(a.total_seconds);
  }
}

namespace {

// The comparison families, in the order they are written.
enum ComparisonFamily {
  kRatio,
  kCiLow,
  kCiHigh,
  kPValue,
  kQValue,
  kVerdict,
  kSamples,
  kCounterRatio,
  kCounterLow,
  kCounterHigh,
  kCountersChanged,
  kComparisonFamilies
};

std::vector<TextFamily> ComparisonFamilies() {
  std::vector<TextFamily> f;
  f.emplace_back("faultline_comparison_ratio",
                 "Hodges-Lehmann estimate of candidate/baseline throughput");
  f.emplace_back("faultline_comparison_ratio_ci_lower",
                 "Lower bound of the ratio's 95% confidence interval");
  f.emplace_back("faultline_comparison_ratio_ci_upper",
                 "Upper bound of the ratio's 95% confidence interval");
  f.emplace_back("faultline_comparison_p_value",
                 "One-sided exact Mann-Whitney p in the estimate's direction");
  f.emplace_back("faultline_comparison_q_value",
                 "Benjamini-Hochberg adjusted p across the study's cells");
  f.emplace_back("faultline_comparison_verdict",
                 "1 for the comparison's current verdict, 0 for the others");
  f.emplace_back("faultline_comparison_samples", "Succeeded runs per side of the comparison");
  f.emplace_back("faultline_comparison_counters_ratio",
                 "Hodges-Lehmann candidate/baseline ratio of a counter per round (per second "
                 "when runs completed too few rounds), for the counters that changed "
                 "significantly (Benjamini-Hochberg across the comparison's counters)");
  f.emplace_back("faultline_comparison_counters_ratio_ci_lower",
                 "Lower bound of the counter ratio's 95% confidence interval");
  f.emplace_back("faultline_comparison_counters_ratio_ci_upper",
                 "Upper bound of the counter ratio's 95% confidence interval");
  f.emplace_back("faultline_comparison_counters_changed",
                 "Counters of the comparison that changed significantly");
  return f;
}

}  // namespace

std::shared_ptr<const ControllerMetrics::RenderedJob> ControllerMetrics::RenderComparisons(
    const JobComparisons& job) {
  static const std::vector<TextFamily> kNames = ComparisonFamilies();
  auto out = std::make_shared<RenderedJob>();
  out->finished_ms = job.finished_ms;
  out->chunks.resize(kComparisonFamilies);
  auto add = [&](ComparisonFamily f, const std::vector<Label>& labels, double v,
                 std::initializer_list<Label> extra = {}) {
    AppendSample(&out->chunks[f], kNames[f].name(), labels, v, extra);
  };
  // Kernels by series: a schedule's nightly label keeps its alerts' label set.
  for (const ComparisonSummary& c : job.comparisons) {
    const std::string config = ConfigLabel(c.cell);
    // Labels hold views: the strings they view live through the loop body.
    const std::string baseline = SeriesKernel(c.baseline), candidate = SeriesKernel(c.candidate);
    const std::vector<Label> labels = {{"study", job.study},   {"benchmark", job.benchmark},
                                       {"config", config},     {"board", c.board},
                                       {"baseline", baseline}, {"candidate", candidate}};
    add(kRatio, labels, c.ratio);
    add(kCiLow, labels, c.ci_low);
    add(kCiHigh, labels, c.ci_high);
    add(kPValue, labels, c.p_value);
    add(kQValue, labels, c.q_value);
    for (const char* v : kVerdicts) add(kVerdict, labels, c.verdict == v ? 1 : 0, {{"verdict", v}});
    add(kSamples, labels, static_cast<double>(c.n_baseline), {{"side", "baseline"}});
    add(kSamples, labels, static_cast<double>(c.n_candidate), {{"side", "candidate"}});
    // Counter names are the kernel's own keys and validated perf events: a fixed set per
    // kernel, never user text.
    for (const CounterChange& k : c.counters) {
      add(kCounterRatio, labels, k.ratio, {{"counter", k.name}, {"unit", k.unit}});
      add(kCounterLow, labels, k.ci_low, {{"counter", k.name}, {"unit", k.unit}});
      add(kCounterHigh, labels, k.ci_high, {{"counter", k.name}, {"unit", k.unit}});
    }
    add(kCountersChanged, labels, static_cast<double>(c.counters.size()));
  }
  return out;
}

std::string ControllerMetrics::RenderSeries(const std::vector<SeriesPoint>& series) {
  const TextFamily throughput("faultline_throughput_rounds_per_second",
                              "Median throughput of the latest job of each series");
  const TextFamily last_success("faultline_last_success_timestamp_seconds",
                                "When the series last stored a succeeded run");
  std::vector<std::string> configs;
  configs.reserve(series.size());
  for (const auto& p : series) configs.push_back(ConfigLabel(p.cell));
  std::string out;
  out.reserve(series.size() * 2 * 200 + 512);
  // One family after the other, straight into the text.
  for (const TextFamily* family : {&throughput, &last_success}) {
    family->WriteHeaderTo(&out);
    for (size_t i = 0; i < series.size(); ++i) {
      const SeriesPoint& p = series[i];
      const std::vector<Label> labels = {{"study", p.study},     {"benchmark", p.benchmark},
                                         {"config", configs[i]}, {"arch", p.arch},
                                         {"board", p.board},     {"kernel", p.kernel}};
      AppendSample(
          &out, family->name(), labels,
          family == &throughput ? p.median : static_cast<double>(p.last_success_ms) / 1000.0);
    }
  }
  return out;
}

std::string ControllerMetrics::Render(MetricsSource* source, BoardStore* boards,
                                      const HttpServerStats* http) {
  std::string out;
  for (const auto& part : RenderParts(source, boards, http)) out.append(*part);
  return out;
}

namespace {

// The latest open change point of each series, and the count of change points by state.
void WriteChangePoints(const MetricsSnapshot& snapshot, std::string* out) {
  TextFamily change("faultline_change_point_relative_change",
                    "Latest open change point of a series' history: after/before - 1");
  TextFamily change_p("faultline_change_point_p_value",
                      "t-test p of the latest open change point of a series");
  for (const auto& c : snapshot.open_change_points) {
    const std::vector<Label> labels = {{"study", c.study},   {"benchmark", c.benchmark},
                                       {"config", c.config}, {"arch", c.arch},
                                       {"board", c.board},   {"kernel", c.kernel}};
    change.Add(labels, c.relative_change);
    change_p.Add(labels, c.p_value);
  }
  change.WriteTo(out);
  change_p.WriteTo(out);
  TextFamily change_points("faultline_change_points",
                           "Change points found in series histories, by state");
  for (const char* st : {"open", "acknowledged", "fixed", "invalid"}) {
    auto it = snapshot.change_points_by_state.find(st);
    change_points.Add({{"state", st}},
                      it == snapshot.change_points_by_state.end() ? 0 : it->second);
  }
  change_points.WriteTo(out);
}

// One gauge per state of a family, every state written (0 when absent from `counts`).
void WriteByState(const char* name, const char* help, const char* label,
                  std::initializer_list<const char*> states,
                  const std::map<std::string, int64_t>& counts, std::string* out) {
  TextFamily family(name, help);
  for (const char* st : states) {
    auto it = counts.find(st);
    family.Add({{label, st}}, it == counts.end() ? 0 : it->second);
  }
  family.WriteTo(out);
}

// The series robot (robot/robot.h): what it decided of each posted series, the
// kernels its jobs built, its replies and its patchwork checks.
void WriteRobot(const MetricsSnapshot& snapshot, std::string* out) {
  WriteByState(
      "faultline_robot_series",
      "Posted series the robot saw whole, by what it did: skipped (outside its "
      "filter), chosen, submitted (jobs running), measured, replied, failed, "
      "does_not_apply (to its base: answered with the hunk)",
      "state",
      {"skipped", "chosen", "submitted", "measured", "replied", "failed", "does_not_apply"},
      snapshot.robot_series_by_state, out);
  WriteByState("faultline_robot_mails_skipped",
               "Mails the robot read and did not take, kept as bytes with the reason: "
               "unreadable (no Message-ID), too large, too many patches, too large a diff",
               "reason", {"unreadable", "too large", "too many patches", "too large a diff"},
               snapshot.robot_skipped_mails_by_reason, out);
  WriteByState("faultline_robot_replies",
               "The robot's reply mails by state: queued, sending, sent, uncertain (it died "
               "while sending: never sent again)",
               "state", {"queued", "sending", "sent", "uncertain"}, snapshot.robot_replies_by_state,
               out);
  WriteByState("faultline_robot_patchwork_checks",
               "Patchwork checks the robot owes or gave, by status: queued (retried), posted, "
               "superseded, failed (refused 8 times)",
               "status", {"queued", "posted", "superseded", "failed"},
               snapshot.robot_checks_by_status, out);
  WriteByState("faultline_robot_kernel_builds",
               "Kernel builds of the robot's jobs (the bases and the series), by state: queued, "
               "building, done (built), failed (a series that does not apply too), cancelled "
               "(no job needed it any more)",
               "state", {"queued", "building", "done", "failed", "cancelled"},
               snapshot.robot_builds_by_state, out);
  TextFamily mails("faultline_robot_patch_mails",
                   "Patch mails the robot read from the list archive and kept");
  mails.Add({}, snapshot.robot_mails);
  mails.WriteTo(out);
}

void WriteSchedules(const MetricsSnapshot& snapshot, std::string* out) {
  TextFamily schedule_success("faultline_schedule_last_success_timestamp_seconds",
                              "Newest succeeded job of a schedule (its creation if none)");
  TextFamily schedule_interval("faultline_schedule_interval_seconds",
                               "Typical time between two slots of a schedule");
  for (const auto& sch : snapshot.schedules) {
    schedule_success.Add({{"schedule", sch.name}},
                         static_cast<double>(sch.last_success_ms) / 1000.0);
    auto cron = CronSchedule::Parse(sch.cron);
    if (cron.ok()) {
      schedule_interval.Add({{"schedule", sch.name}},
                            static_cast<double>(cron->TypicalInterval().count()));
    }
  }
  schedule_success.WriteTo(out);
  schedule_interval.WriteTo(out);
}

// What each kernel a job brought is, for dashboards to name kernels by more than a label.
void WriteBuiltKernels(const MetricsSnapshot& snapshot, std::string* out) {
  TextFamily info("faultline_kernel_build_info",
                  "1 per kernel a job brought and that was built or fetched: its release, base "
                  "commit and ref, patch series (count and subjects), config sha256, compiler; "
                  "or the prebuilt image's URL and sha256");
  TextFamily bad("faultline_kernel_build_bad_boots",
                 "Boards a built kernel did not come back on (each is needs-check, the kernel "
                 "no longer offered there)");
  auto cut = [](const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n) : s; };
  for (const auto& k : snapshot.built_kernels) {
    const std::vector<Label> labels = {{"kernel", k.label}, {"arch", k.arch}};
    info.Add(labels, 1,
             {{"release", k.release},
              {"base_commit", cut(k.base_commit, 12)},
              {"ref", cut(k.ref, 64)},
              {"patches", std::to_string(k.patches)},
              {"series", cut(k.series, 256)},
              {"config_sha256", cut(k.config_sha256, 12)},
              {"compiler", cut(k.compiler, 64)},
              {"image_url", cut(k.image_url, 256)},
              {"image_sha256", cut(k.image_sha256, 12)}});
    bad.Add(labels, k.bad_boots);
  }
  info.WriteTo(out);
  bad.WriteTo(out);
}

void WriteRunsAndJobs(const MetricsSnapshot& snapshot, std::string* out) {
  TextFamily runs("faultline_runs", "Runs by state");
  for (const char* st : kRunStates) {
    auto it = snapshot.runs_by_state.find(st);
    runs.Add({{"state", st}}, it == snapshot.runs_by_state.end() ? 0 : it->second);
  }
  runs.WriteTo(out);
  TextFamily jobs("faultline_jobs", "Jobs by state");
  for (const char* st : kJobStates) {
    auto it = snapshot.jobs_by_state.find(st);
    jobs.Add({{"state", st}}, it == snapshot.jobs_by_state.end() ? 0 : it->second);
  }
  jobs.WriteTo(out);
}

// Per board: up, busy, health, kernel switches, info; and the agents by state.
void WriteBoards(const std::vector<BoardRecord>& boards, std::string* out) {
  TextFamily board_up("faultline_board_up", "1 when the board's agent was heard from recently");
  TextFamily board_busy("faultline_board_busy", "1 when the board is running a run");
  TextFamily board_health("faultline_board_health",
                          "1 for the board's current health: ok, switching (booting "
                          "another kernel) or needs-check (no runs until checked)");
  TextFamily board_switches("faultline_board_kernel_switches_total",
                            "Kernel switches ordered for the board", "counter");
  TextFamily board_info("faultline_board_info",
                        "1 per board, with what it is: virt_accel (tcg = emulated CPU, "
                        "not hardware numbers; kvm; none) and the running kernel release");
  int online = 0, offline = 0;
  for (const auto& b : boards) {
    const std::vector<Label> labels = {{"board", b.summary.name}, {"arch", b.summary.arch}};
    const auto facts = nlohmann::json::parse(b.facts_json, nullptr, false);
    auto text = [&](const char* key) {
      return facts.is_object() && facts.contains(key) && facts[key].is_string()
                 ? facts[key].get<std::string>()
                 : std::string();
    };
    const std::string accel = text("virt_accel");
    const std::string release = text("running_kernel_release");
    board_info.Add(
        labels, 1,
        {{"virt_accel", accel.empty() ? "unknown" : accel}, {"kernel_release", release}});
    board_up.Add(labels, b.online ? 1 : 0);
    board_busy.Add(labels, b.current_run_id != 0 ? 1 : 0);
    board_switches.Add(labels, static_cast<double>(b.summary.kernel_switches));
    for (BoardHealth h : {BoardHealth::kOk, BoardHealth::kSwitching, BoardHealth::kNeedsCheck}) {
      board_health.Add(labels, b.summary.health == h ? 1 : 0, {{"health", ToString(h)}});
    }
    (b.online ? online : offline)++;
  }
  board_up.WriteTo(out);
  board_busy.WriteTo(out);
  board_health.WriteTo(out);
  board_switches.WriteTo(out);
  board_info.WriteTo(out);
  TextFamily agents("faultline_agents", "Registered agents by state");
  agents.Add({{"state", "online"}}, online);
  agents.Add({{"state", "offline"}}, offline);
  agents.WriteTo(out);
}

// The HTTP endpoint's own connections and refusals.
void WriteHttpStats(const HttpServerStats& http, std::string* out) {
  TextFamily connections("faultline_http_connections",
                         "Open connections of the HTTP endpoint by state");
  connections.Add({{"state", "idle"}}, http.idle);
  connections.Add({{"state", "reading"}}, http.reading);
  connections.Add({{"state", "handling"}}, http.handling);
  connections.Add({{"state", "writing"}}, http.writing);
  connections.WriteTo(out);
  TextFamily ended("faultline_http_connections_ended_total",
                   "HTTP connections the server ended early, by reason", "counter");
  ended.Add({{"reason", "timeout"}}, static_cast<double>(http.timed_out));
  ended.Add({{"reason", "dropped_at_cap"}}, static_cast<double>(http.dropped_for_newcomer));
  ended.Add({{"reason", "refused_at_cap"}}, static_cast<double>(http.refused_at_cap));
  ended.WriteTo(out);
  TextFamily refused("faultline_http_requests_refused_total",
                     "HTTP requests refused before their handler, by status", "counter");
  refused.Add({{"code", "400"}}, static_cast<double>(http.bad_requests));
  refused.Add({{"code", "413"}}, static_cast<double>(http.body_too_large));
  refused.Add({{"code", "431"}}, static_cast<double>(http.header_too_large));
  refused.WriteTo(out);
}

}  // namespace

// A finished job's comparisons are rendered once per job version, and the families' text
// once per set of exported jobs: a scrape appends comparisons_block_.
void ControllerMetrics::UpdateComparisons(const MetricsSnapshot& snapshot, MetricsSource* source) {
  if (snapshot.comparison_jobs == comparisons_key_) return;
  {
    std::map<int64_t, std::shared_ptr<const RenderedJob>> kept;
    std::vector<JobVersion> exported;
    for (const JobVersion& job : snapshot.comparison_jobs) {
      auto cached = rendered_.find(job.job_id);
      if (cached != rendered_.end() && cached->second->finished_ms == job.finished_ms) {
        kept[job.job_id] = cached->second;
      } else if (auto loaded = source->LoadComparisons(job); loaded.ok()) {
        kept[job.job_id] = RenderComparisons(*loaded);
      } else {
        continue;  // replaced meanwhile: the next scrape has the new one
      }
      exported.push_back(job);
    }
    rendered_ = std::move(kept);
    std::vector<TextFamily> families = ComparisonFamilies();
    std::string block;
    for (size_t f = 0; f < families.size(); ++f) {
      for (const JobVersion& job : exported) families[f].Append(rendered_[job.job_id]->chunks[f]);
      families[f].WriteTo(&block);
    }
    comparisons_block_ = std::make_shared<const std::string>(std::move(block));
    // A job that could not be loaded is retried on the next scrape.
    comparisons_key_ =
        exported.size() == snapshot.comparison_jobs.size() ? exported : std::vector<JobVersion>{};
  }
}

std::vector<std::shared_ptr<const std::string>> ControllerMetrics::RenderParts(
    MetricsSource* source, BoardStore* boards, const HttpServerStats* http) {
  std::vector<std::shared_ptr<const std::string>> parts;
  std::string out;
  // One render at a time (the HTTP route coalesces scrapes anyway): the kept parts and the
  // version the store is asked about stay consistent.
  std::lock_guard lock(rendered_mu_);
  auto snapshot = source->Snapshot(series_version_);
  auto listed_boards = boards->ListBoards();
  {
    TextFamily db_up("faultline_database_up",
                     "1 when the controller could read its database for this scrape");
    db_up.Add({}, snapshot.ok() && listed_boards.ok() ? 1 : 0);
    db_up.WriteTo(&out);
  }
  if (snapshot.ok() && listed_boards.ok()) {
    UpdateComparisons(*snapshot, source);
    parts.push_back(std::make_shared<const std::string>(std::move(out)));
    parts.push_back(comparisons_block_);
    out = std::string();
    out.reserve(listed_boards->size() * 1200 + (64 << 10));
    // One series per board, kernel and study, kept between scrapes while the store says
    // they are the same version.
    if (snapshot->series_version < 0 || snapshot->series_version != series_version_) {
      series_block_ = std::make_shared<const std::string>(RenderSeries(snapshot->series));
      series_version_ = snapshot->series_version;
    }
    parts.push_back(series_block_);
    WriteChangePoints(*snapshot, &out);
    WriteSchedules(*snapshot, &out);
    WriteRobot(*snapshot, &out);
    WriteRunsAndJobs(*snapshot, &out);
    WriteBuiltKernels(*snapshot, &out);
    WriteBoards(*listed_boards, &out);
  }
  if (http != nullptr) WriteHttpStats(*http, &out);

  // The process metrics (histograms) from prometheus-cpp.
  std::ostringstream process;
  prometheus::TextSerializer serializer;
  serializer.Serialize(process, registry_->Collect());
  out.append(process.str());
  parts.push_back(std::make_shared<const std::string>(std::move(out)));
  return parts;
}

}  // namespace faultline::controller
