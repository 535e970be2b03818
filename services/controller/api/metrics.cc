#include "services/controller/api/metrics.h"

#include <cmath>
#include <sstream>

#include "nlohmann/json.hpp"
#include "prometheus/gauge.h"
#include "prometheus/text_serializer.h"
#include "services/controller/api/report_builder.h"
#include "services/controller/core/cron.h"
#include "services/controller/core/lifecycle.h"

namespace faultline::controller {
namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    default: return "OTHER";
  }
}

// One comparison of a report: its board, kernels and cell.
std::string ComparisonKey(const v1::Comparison& c) {
  std::map<std::string, std::string> cell(c.cell().begin(), c.cell().end());
  return c.board() + '\n' + c.baseline() + '\n' + c.candidate() + '\n' + ConfigLabel(cell);
}

const char* kVerdicts[] = {"improvement", "regression", "no-change", "inconclusive", "collapse"};
const char* kRunStates[] = {"queued", "assigned", "running", "succeeded", "failed", "cancelled"};
const char* kJobStates[] = {"queued", "running", "succeeded", "failed", "cancelled"};

}  // namespace

std::string ConfigLabel(const std::map<std::string, std::string>& cell) {
  if (cell.empty()) return "default";
  std::string out;
  for (const auto& [k, v] : cell) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

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

std::string ControllerMetrics::Render(MetricsSource* source, BoardStore* boards, JobStore* jobs,
                                      const HttpServerStats* http) {
  prometheus::Registry state;
  auto& db_up = prometheus::BuildGauge()
                    .Name("faultline_database_up")
                    .Help("1 when the controller could read its database for this scrape")
                    .Register(state)
                    .Add({});
  auto snapshot = source->Snapshot();
  auto listed_boards = boards->ListBoards();
  db_up.Set(snapshot.ok() && listed_boards.ok() ? 1 : 0);
  if (snapshot.ok() && listed_boards.ok()) {
    auto& throughput = prometheus::BuildGauge()
                           .Name("faultline_throughput_rounds_per_second")
                           .Help("Median throughput of the latest job of each series")
                           .Register(state);
    auto& last_success = prometheus::BuildGauge()
                             .Name("faultline_last_success_timestamp_seconds")
                             .Help("When the series last stored a succeeded run")
                             .Register(state);
    for (const auto& p : snapshot->series) {
      prometheus::Labels labels = {{"study", p.study},   {"benchmark", p.benchmark},
                                   {"config", ConfigLabel(p.cell)}, {"arch", p.arch},
                                   {"board", p.board},   {"kernel", p.kernel}};
      throughput.Add(labels).Set(p.median);
      last_success.Add(labels).Set(static_cast<double>(p.last_success_ms) / 1000.0);
    }

    auto& ratio = prometheus::BuildGauge()
                      .Name("faultline_comparison_ratio")
                      .Help("Hodges-Lehmann estimate of candidate/baseline throughput")
                      .Register(state);
    auto& ci_low = prometheus::BuildGauge()
                       .Name("faultline_comparison_ratio_ci_lower")
                       .Help("Lower bound of the ratio's 95% confidence interval")
                       .Register(state);
    auto& ci_high = prometheus::BuildGauge()
                        .Name("faultline_comparison_ratio_ci_upper")
                        .Help("Upper bound of the ratio's 95% confidence interval")
                        .Register(state);
    auto& p_value = prometheus::BuildGauge()
                        .Name("faultline_comparison_p_value")
                        .Help("One-sided exact Mann-Whitney p in the estimate's direction")
                        .Register(state);
    auto& q_value = prometheus::BuildGauge()
                        .Name("faultline_comparison_q_value")
                        .Help("Benjamini-Hochberg adjusted p across the study's cells")
                        .Register(state);
    auto& verdict = prometheus::BuildGauge()
                        .Name("faultline_comparison_verdict")
                        .Help("1 for the comparison's current verdict, 0 for the others")
                        .Register(state);
    auto& samples = prometheus::BuildGauge()
                        .Name("faultline_comparison_samples")
                        .Help("Succeeded runs per side of the comparison")
                        .Register(state);
    auto& counter_ratio =
        prometheus::BuildGauge()
            .Name("faultline_comparison_counters_ratio")
            .Help(
                "Hodges-Lehmann candidate/baseline ratio of a counter per round (per second "
                "when runs completed too few rounds), for the counters that changed "
                "significantly (Benjamini-Hochberg across the comparison's counters)")
            .Register(state);
    auto& counter_low = prometheus::BuildGauge()
                            .Name("faultline_comparison_counters_ratio_ci_lower")
                            .Help("Lower bound of the counter ratio's 95% confidence interval")
                            .Register(state);
    auto& counter_high = prometheus::BuildGauge()
                             .Name("faultline_comparison_counters_ratio_ci_upper")
                             .Help("Upper bound of the counter ratio's 95% confidence interval")
                             .Register(state);
    auto& counters_changed = prometheus::BuildGauge()
                                 .Name("faultline_comparison_counters_changed")
                                 .Help("Counters of the comparison that changed significantly")
                                 .Register(state);
    std::lock_guard cache_lock(counter_cache_mu_);
    std::map<int64_t, JobCounterChanges> kept;
    for (const auto& job : snapshot->comparison_jobs) {
      auto cached = counter_cache_.find(job.id);
      const bool have_counters =
          cached != counter_cache_.end() && cached->second.finished_ms == job.finished_ms;
      v1::GetReportResponse report;
      if (!BuildReport(jobs, job.id, &report, ReportOptions{.compare_counters = !have_counters})
               .ok())
        continue;
      JobCounterChanges changes;
      if (have_counters) {
        changes = std::move(cached->second);
      } else {
        changes.finished_ms = job.finished_ms;
        for (const auto& c : report.comparisons()) {
          auto& list = changes.by_comparison[ComparisonKey(c)];
          for (const auto& k : c.counters()) {
            // A counter present on one side only has no finite ratio; the report names it.
            // Like throughput, a change smaller than the study's min_effect is not one: a
            // steady counter (faults per round) is "significant" at ×0.9999.
            if (!k.significant() || !std::isfinite(k.ratio()) || k.ratio() <= 0 ||
                std::fabs(std::log(k.ratio())) < std::log1p(report.min_effect()))
              continue;
            list.push_back({k.name(), k.unit(), k.ratio(), k.ci_low(), k.ci_high()});
          }
        }
      }
      std::string study = report.job().spec().name().empty() ? report.job().spec().benchmark()
                                                              : report.job().spec().name();
      for (const auto& c : report.comparisons()) {
        std::map<std::string, std::string> cell(c.cell().begin(), c.cell().end());
        prometheus::Labels labels = {{"study", study},
                                     {"benchmark", report.job().spec().benchmark()},
                                     {"config", ConfigLabel(cell)},
                                     {"board", c.board()},
                                     {"baseline", c.baseline()},
                                     {"candidate", c.candidate()}};
        ratio.Add(labels).Set(c.ratio());
        ci_low.Add(labels).Set(c.ci_low());
        ci_high.Add(labels).Set(c.ci_high());
        p_value.Add(labels).Set(c.p_value());
        q_value.Add(labels).Set(c.q_value());
        for (const char* v : kVerdicts) {
          prometheus::Labels with = labels;
          with["verdict"] = v;
          verdict.Add(with).Set(c.verdict() == v ? 1 : 0);
        }
        prometheus::Labels base = labels, cand = labels;
        base["side"] = "baseline";
        cand["side"] = "candidate";
        samples.Add(base).Set(c.n_baseline());
        samples.Add(cand).Set(c.n_candidate());
        // Counter names are the kernel's own keys and validated perf events: a fixed set
        // per kernel, never user text.
        const auto changed = changes.by_comparison.find(ComparisonKey(c));
        size_t n_changed = 0;
        if (changed != changes.by_comparison.end()) {
          n_changed = changed->second.size();
          for (const CounterChange& k : changed->second) {
            prometheus::Labels with = labels;
            with["counter"] = k.name;
            with["unit"] = k.unit;
            counter_ratio.Add(with).Set(k.ratio);
            counter_low.Add(with).Set(k.ci_low);
            counter_high.Add(with).Set(k.ci_high);
          }
        }
        counters_changed.Add(labels).Set(static_cast<double>(n_changed));
      }
      kept[job.id] = std::move(changes);
    }
    counter_cache_ = std::move(kept);

    auto& change = prometheus::BuildGauge()
                       .Name("faultline_change_point_relative_change")
                       .Help("Latest open change point of a series' history: after/before - 1")
                       .Register(state);
    auto& change_p = prometheus::BuildGauge()
                         .Name("faultline_change_point_p_value")
                         .Help("t-test p of the latest open change point of a series")
                         .Register(state);
    for (const auto& c : snapshot->open_change_points) {
      prometheus::Labels labels = {{"study", c.study}, {"benchmark", c.benchmark},
                                   {"config", c.config}, {"arch", c.arch},
                                   {"board", c.board}, {"kernel", c.kernel}};
      change.Add(labels).Set(c.relative_change);
      change_p.Add(labels).Set(c.p_value);
    }
    auto& change_points = prometheus::BuildGauge()
                              .Name("faultline_change_points")
                              .Help("Change points found in series histories, by state")
                              .Register(state);
    for (const char* st : {"open", "acknowledged", "fixed", "invalid"}) {
      auto it = snapshot->change_points_by_state.find(st);
      change_points.Add({{"state", st}})
          .Set(it == snapshot->change_points_by_state.end() ? 0 : it->second);
    }

    auto& schedule_success = prometheus::BuildGauge()
                                 .Name("faultline_schedule_last_success_timestamp_seconds")
                                 .Help("Newest succeeded job of a schedule (its creation if none)")
                                 .Register(state);
    auto& schedule_interval = prometheus::BuildGauge()
                                  .Name("faultline_schedule_interval_seconds")
                                  .Help("Typical time between two slots of a schedule")
                                  .Register(state);
    for (const auto& sch : snapshot->schedules) {
      schedule_success.Add({{"schedule", sch.name}}).Set(static_cast<double>(sch.last_success_ms) / 1000.0);
      auto cron = CronSchedule::Parse(sch.cron);
      if (cron.ok()) {
        schedule_interval.Add({{"schedule", sch.name}})
            .Set(static_cast<double>(cron->TypicalInterval().count()));
      }
    }

    auto& runs = prometheus::BuildGauge()
                     .Name("faultline_runs")
                     .Help("Runs by state")
                     .Register(state);
    for (const char* s : kRunStates) {
      auto it = snapshot->runs_by_state.find(s);
      runs.Add({{"state", s}}).Set(it == snapshot->runs_by_state.end() ? 0 : it->second);
    }
    auto& jobs = prometheus::BuildGauge().Name("faultline_jobs").Help("Jobs by state").Register(state);
    for (const char* s : kJobStates) {
      auto it = snapshot->jobs_by_state.find(s);
      jobs.Add({{"state", s}}).Set(it == snapshot->jobs_by_state.end() ? 0 : it->second);
    }

    auto& board_up = prometheus::BuildGauge()
                         .Name("faultline_board_up")
                         .Help("1 when the board's agent was heard from recently")
                         .Register(state);
    auto& board_busy = prometheus::BuildGauge()
                           .Name("faultline_board_busy")
                           .Help("1 when the board is running a run")
                           .Register(state);
    auto& agents = prometheus::BuildGauge()
                       .Name("faultline_agents")
                       .Help("Registered agents by state")
                       .Register(state);
    auto& board_health = prometheus::BuildGauge()
                             .Name("faultline_board_health")
                             .Help("1 for the board's current health: ok, switching (booting "
                                   "another kernel) or needs-check (no runs until checked)")
                             .Register(state);
    auto& board_switches = prometheus::BuildCounter()
                               .Name("faultline_board_kernel_switches_total")
                               .Help("Kernel switches ordered for the board")
                               .Register(state);
    auto& board_info = prometheus::BuildGauge()
                           .Name("faultline_board_info")
                           .Help(
                               "1 per board, with what it is: virt_accel (tcg = emulated CPU, "
                               "not hardware numbers; kvm; none) and the running kernel release")
                           .Register(state);
    int online = 0, offline = 0;
    for (const auto& b : *listed_boards) {
      prometheus::Labels labels = {{"board", b.summary.name}, {"arch", b.summary.arch}};
      {
        const auto facts = nlohmann::json::parse(b.facts_json, nullptr, false);
        auto text = [&](const char* key) {
          return facts.is_object() && facts.contains(key) && facts[key].is_string()
                     ? facts[key].get<std::string>()
                     : std::string();
        };
        prometheus::Labels info = labels;
        info["virt_accel"] = text("virt_accel").empty() ? "unknown" : text("virt_accel");
        info["kernel_release"] = text("running_kernel_release");
        board_info.Add(info).Set(1);
      }
      board_up.Add(labels).Set(b.online ? 1 : 0);
      board_busy.Add(labels).Set(b.current_run_id != 0 ? 1 : 0);
      board_switches.Add(labels).Increment(static_cast<double>(b.summary.kernel_switches));
      for (BoardHealth h : {BoardHealth::kOk, BoardHealth::kSwitching, BoardHealth::kNeedsCheck}) {
        prometheus::Labels with_health = labels;
        with_health["health"] = std::string(ToString(h));
        board_health.Add(with_health).Set(b.summary.health == h ? 1 : 0);
      }
      (b.online ? online : offline)++;
    }
    agents.Add({{"state", "online"}}).Set(online);
    agents.Add({{"state", "offline"}}).Set(offline);
  }

  if (http != nullptr) {
    auto& connections = prometheus::BuildGauge()
                            .Name("faultline_http_connections")
                            .Help("Open connections of the HTTP endpoint by state")
                            .Register(state);
    connections.Add({{"state", "idle"}}).Set(http->idle);
    connections.Add({{"state", "reading"}}).Set(http->reading);
    connections.Add({{"state", "handling"}}).Set(http->handling);
    connections.Add({{"state", "writing"}}).Set(http->writing);
    auto& ended = prometheus::BuildCounter()
                      .Name("faultline_http_connections_ended_total")
                      .Help("HTTP connections the server ended early, by reason")
                      .Register(state);
    ended.Add({{"reason", "timeout"}}).Increment(static_cast<double>(http->timed_out));
    ended.Add({{"reason", "dropped_at_cap"}})
        .Increment(static_cast<double>(http->dropped_for_newcomer));
    ended.Add({{"reason", "refused_at_cap"}}).Increment(static_cast<double>(http->refused_at_cap));
    auto& refused = prometheus::BuildCounter()
                        .Name("faultline_http_requests_refused_total")
                        .Help("HTTP requests refused before their handler, by status")
                        .Register(state);
    refused.Add({{"code", "400"}}).Increment(static_cast<double>(http->bad_requests));
    refused.Add({{"code", "413"}}).Increment(static_cast<double>(http->body_too_large));
    refused.Add({{"code", "431"}}).Increment(static_cast<double>(http->header_too_large));
  }

  std::ostringstream out;
  prometheus::TextSerializer serializer;
  serializer.Serialize(out, state.Collect());
  serializer.Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace faultline::controller
