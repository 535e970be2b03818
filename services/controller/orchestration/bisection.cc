#include "services/controller/orchestration/bisection.h"

#include "common/kernel_label.h"
#include "services/controller/convert/bisection.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "faultline/v1/run_options.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"
#include "services/controller/core/lifecycle.h"
#include "services/controller/orchestration/submission.h"
#include "stats/statistics.h"

namespace faultline::controller {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

bool IsHex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

bool IsCounterName(const std::string& name) {
  return !name.empty() && name.size() <= 128 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.:-") == std::string::npos;
}

// A commit's kernel label in the step jobs: good, bad, or c<12 hex>; the reverted bad end
// is "revert".
std::string LabelOf(const v1::BisectRequest& request, int index, bool reverted = false) {
  const int n = request.commits_size();
  if (reverted) return "revert";
  if (index == 0) return "good";
  if (index == n - 1) return "bad";
  return "c" + request.commits(index).sha().substr(0, 12);
}

v1::KernelSource SourceOf(const v1::BisectRequest& request, int index) {
  v1::KernelSource source;
  source.set_tree(request.tree());
  source.set_ref(request.commits(index).sha());
  source.set_config_base(request.config_base().empty() ? "tinyconfig" : request.config_base());
  *source.mutable_fragments() = request.fragments();
  return source;
}

// The job measuring `r`: the request's study on its board, one cell, the engine's kernels.
v1::JobSpec StepSpec(const Bisection& b, const bisect::Request& r) {
  const v1::BisectRequest& request = b.request;
  v1::JobSpec spec = request.spec();
  spec.clear_kernels();
  spec.clear_kernel_sources();
  spec.clear_kernel_overrides();
  spec.clear_matrix();
  spec.clear_arches();
  spec.clear_boards();
  spec.add_boards(request.board());
  for (const auto& [k, v] : request.cell()) (*spec.mutable_params())[k] = v;
  spec.set_each_board(false);
  spec.set_max_repetitions(0);
  spec.set_repetitions(static_cast<uint32_t>(r.pairs));
  const bool reverted = r.role == bisect::Role::kRevert;
  const int n = request.commits_size();
  const std::string ref = LabelOf(request, r.reference);
  const std::string cand = LabelOf(request, r.candidate, reverted);
  spec.add_kernels(ref);
  spec.add_kernels(cand);
  spec.set_baseline(ref);
  (*spec.mutable_kernel_sources())[ref] = SourceOf(request, r.reference);
  v1::KernelSource cand_source = SourceOf(request, r.candidate);
  if (reverted) cand_source.add_revert(request.commits(b.engine.result.culprit).sha());
  (*spec.mutable_kernel_sources())[cand] = cand_source;
  if (r.with_bad && cand != "bad") {
    spec.add_kernels("bad");
    (*spec.mutable_kernel_sources())["bad"] = SourceOf(request, n - 1);
  }
  spec.set_name(absl::StrCat("bisect ", b.id, " ", std::string(bisect::ToString(r.role)), " ",
                             reverted ? "revert " : "",
                             request.commits(r.candidate).sha().substr(0, 12)));
  return spec;
}

std::string LabelBase(const std::string& label) {
  return KernelLabel::Parse(label).name;
}

struct Folded {
  std::vector<bisect::Pair> pairs;
  std::string candidate_failure;        // every candidate run failed: the first reason
  bool candidate_build_failed = false;  // ... and its kernel's build failed them
  std::string reference_failure;        // every reference (or bad end) run failed
  int runs = 0;
  double seconds = 0;
  int without_metric = 0;      // succeeded runs that did not carry the metric
  bool decided_early = false;  // the candidate failed while the others still ran
};

// The job's measurements for the open step.
Folded Fold(const v1::BisectRequest& request, const bisect::Step& step,
            const std::vector<RunRecord>& runs) {
  const bool reverted = step.role == bisect::Role::kRevert;
  const std::string ref = LabelOf(request, step.reference);
  const std::string cand = LabelOf(request, step.candidate, reverted);
  Folded out;
  std::map<int, std::map<std::string, double>> by_rep;
  std::map<std::string, int> ok, failed, open;
  std::map<std::string, std::string> reason;
  std::set<std::string> build_failed;  // labels whose runs a failed build failed
  for (const auto& run : runs) {
    const std::string label = LabelBase(run.kernel);
    if (run.has_result) {
      ++out.runs;
      out.seconds += run.duration_seconds;
    }
    if (run.state == RunState::kSucceeded && run.has_result) {
      ++ok[label];
      const double value =
          MetricValue(request.metric(), run.throughput, run.rounds, run.counters_json);
      if (std::isfinite(value)) {
        by_rep[run.repetition][label] = value;
      } else {
        ++out.without_metric;
      }
    } else if (run.state == RunState::kFailed || run.state == RunState::kCancelled) {
      ++failed[label];
      if (reason[label].empty()) reason[label] = run.failure_reason;
      if (run.failed_build != 0) build_failed.insert(label);
    } else {
      ++open[label];
    }
  }
  if (ok[cand] == 0 && failed[cand] > 0 && open[cand] == 0) {
    out.candidate_failure = reason[cand].empty() ? "its runs failed" : reason[cand];
    out.candidate_build_failed = build_failed.count(cand) > 0;
    out.decided_early = open[ref] > 0 || (step.with_bad && open["bad"] > 0);
  }
  for (const std::string& label : {ref, std::string(step.with_bad ? "bad" : "")}) {
    if (label.empty() || label == cand) continue;
    if (ok[label] == 0 && failed[label] > 0 && open[label] == 0) {
      out.reference_failure =
          absl::StrCat(label, ": ", reason[label].empty() ? "its runs failed" : reason[label]);
    }
  }
  for (const auto& [rep, values] : by_rep) {
    auto r = values.find(ref);
    auto c = values.find(cand);
    if (r == values.end() || c == values.end()) continue;
    bisect::Pair p{.reference = r->second, .candidate = c->second};
    if (step.with_bad) {
      auto b = values.find("bad");
      if (b == values.end()) continue;
      p.bad = b->second;
    }
    out.pairs.push_back(p);
  }
  return out;
}

// The API's message with its display fields: the range left, the steps left and their
// ratios, the headline's estimate, the kernels built, the time left.
v1::Bisection Display(const Bisection& b) {
  v1::Bisection out = BisectionToProto(b);
  v1::Bisection* doc = &out;
  const bisect::State& state = b.engine;
  const bisect::Options options = OptionsOf(b.request);
  const bisect::Range range = bisect::RangeLeft(state);
  doc->set_range_good(range.good);
  doc->set_range_bad(range.bad);
  doc->set_untested(range.untested);
  doc->set_steps_left(bisect::StepsLeft(state, options));
  // The headline's d and its CI from one source: every ln(bad/good) measured so far (the
  // stored effect_low/high are the endpoints' CI when they decided, around their own mean).
  if (const bisect::EffectEstimate e = bisect::EstimateEffect(state); e.samples >= 2) {
    doc->set_effect(e.effect);
    doc->set_effect_low(e.effect_low);
    doc->set_effect_high(e.effect_high);
  }
  int finished = 0;
  std::set<std::string> built;
  for (const bisect::Step& step : state.steps) {
    if (step.pairs.empty() && step.outcome != bisect::Mark::kBroken) continue;
    built.insert(step.role == bisect::Role::kRevert ? "revert" : std::to_string(step.candidate));
    built.insert(std::to_string(step.reference));
    if (step.with_bad) built.insert(std::to_string(b.request.commits_size() - 1));
  }
  doc->set_kernels(static_cast<uint32_t>(built.size()));
  for (size_t i = 0; i < state.steps.size(); ++i) {
    const bisect::Step& step = state.steps[i];
    v1::BisectStep& shown = *doc->mutable_steps(static_cast<int>(i));
    std::vector<double> reference, candidate;
    for (const bisect::Pair& p : step.pairs) {
      reference.push_back(p.reference);
      candidate.push_back(p.candidate);
    }
    shown.set_n(static_cast<uint32_t>(reference.size()));
    if (step.outcome != bisect::Mark::kUntested && !reference.empty()) ++finished;
    if (reference.size() < 2) continue;
    stats::CompareOptions compare;
    compare.confidence = 0.95;
    const stats::CellComparison c = stats::ComparePaired(reference, candidate, compare);
    shown.set_ratio(c.ratio);
    shown.set_ci_low(c.ci_low);
    shown.set_ci_high(c.ci_high);
  }
  doc->set_seconds_left(finished > 0 && b.state == BisectionState::kRunning
                            ? b.wall_seconds / finished * doc->steps_left()
                            : 0);
  return out;
}

// Chooses the board every step runs on: the one named, or the first (by name) online,
// healthy board of the arch (any arch without one) that boots built kernels.
absl::StatusOr<std::string> PinBoard(BoardStore* boards, const v1::BisectRequest& request) {
  auto listed = boards->ListBoards();
  if (!listed.ok()) return listed.status();
  std::vector<std::string> names;
  for (const auto& b : *listed) {
    const auto& s = b.summary;
    if (!request.board().empty() && s.name != request.board()) continue;
    if (!request.arch().empty() && s.arch != request.arch()) continue;
    if (!s.boots_built_kernels) {
      if (!request.board().empty()) {
        return Invalid("board", absl::StrCat(s.name,
                                             " does not boot built kernels (agent.yaml "
                                             "built_kernels)"));
      }
      continue;
    }
    if (request.board().empty() && (!b.online || s.health != BoardHealth::kOk)) continue;
    names.push_back(s.name);
  }
  if (names.empty()) {
    return Invalid(
        request.board().empty() ? "arch" : "board",
        absl::StrCat("no registered board ",
                     request.board().empty() ? "" : absl::StrCat("named ", request.board(), " "),
                     request.arch().empty() ? "" : absl::StrCat("of arch ", request.arch(), " "),
                     "that boots built kernels", request.board().empty() ? " is online" : ""));
  }
  std::sort(names.begin(), names.end());
  return names.front();
}

absl::Status CheckRequest(const v1::BisectRequest& r) {
  if (r.tree().empty() || r.tree().front() != '/' || r.tree().size() > 1024) {
    return Invalid("tree", "an absolute path of a git repository on the builders");
  }
  if (r.commits_size() < 2) {
    return Invalid("commits",
                   "a good and a bad commit at least (the CLI lists them from the tree)");
  }
  if (r.commits_size() > kMaxBisectCommits) {
    return Invalid("commits", absl::StrCat(r.commits_size() - 1,
                                           " commits after good, over the "
                                           "limit of ",
                                           kMaxBisectCommits - 1, ": narrow the range"));
  }
  std::set<std::string> seen;
  for (int i = 0; i < r.commits_size(); ++i) {
    const auto& c = r.commits(i);
    if (!IsHex(c.sha()) || (c.sha().size() != 40 && c.sha().size() != 64)) {
      return Invalid(absl::StrCat("commits[", i, "].sha"), "a full commit id (40 or 64 hex)");
    }
    if (!seen.insert(c.sha()).second) {
      return Invalid(absl::StrCat("commits[", i, "].sha"), "listed twice");
    }
    if (c.subject().size() > 1024 || c.author().size() > 512) {
      return Invalid(absl::StrCat("commits[", i, "]"),
                     "subject over 1024 or author over 512 chars");
    }
  }
  if (!r.config_base().empty() && !absl::EndsWith(r.config_base(), "config")) {
    return Invalid("config_base", "a config make target (tinyconfig, defconfig, ...)");
  }
  const std::string& m = r.metric();
  if (!m.empty() && m != "throughput") {
    if (!absl::StartsWith(m, "counter:") || !IsCounterName(m.substr(8))) {
      return Invalid("metric", "throughput or counter:NAME (e.g. counter:vmstat.pgfault)");
    }
    const std::string name = m.substr(8);
    if (absl::StartsWith(name, "perf.")) {
      const std::string event = name.substr(5);
      const v1::RunOptions options = v1::RunOptionsOf(r.spec());
      const auto& events = options.events();
      if (std::find(events.begin(), events.end(), event) == events.end()) {
        return Invalid("metric", absl::StrCat("the spec does not count ", event,
                                              " (add it to its run_options.events)"));
      }
    } else if (absl::StartsWith(name, "mmap_lock_wait.") ||
               absl::StartsWith(name, "mmap_lock_contention.")) {
      if (!v1::RunOptionsOf(r.spec()).mmap_lock_waits()) {
        return Invalid("metric",
                       absl::StrCat(name, " needs run_options.mmap_lock_waits: true in the spec"));
      }
    } else if (!absl::StartsWith(name, "vmstat.") && !absl::StartsWith(name, "memcg.")) {
      return Invalid(
          "metric", absl::StrCat("the spec does not produce counter ", name,
                                 ": vmstat.*, memcg.*, perf.<an event of the spec>, "
                                 "mmap_lock_wait.* / mmap_lock_contention.* with mmap_lock_waits"));
    }
  }
  // One cell: every swept knob needs a value of its list; no other knob.
  for (const auto& [k, values] : r.spec().matrix()) {
    auto it = r.cell().find(k);
    std::vector<std::string> allowed(values.values().begin(), values.values().end());
    if (it == r.cell().end()) {
      if (allowed.size() == 1) continue;
      return Invalid("cell", absl::StrCat("the spec sweeps ", k, ": say which (--cell ", k, "=",
                                          allowed.empty() ? "" : allowed.front(), "; one of ",
                                          absl::StrJoin(allowed, ", "), ")"));
    }
    if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) {
      return Invalid(absl::StrCat("cell.", k),
                     absl::StrCat("'", it->second, "' is not in the spec's ", k, " (",
                                  absl::StrJoin(allowed, ", "), ")"));
    }
  }
  for (const auto& [k, v] : r.cell()) {
    if (!r.spec().matrix().contains(k)) {
      return Invalid(absl::StrCat("cell.", k), "the spec does not sweep this knob");
    }
  }
  if (r.block() > 64) return Invalid("block", "at most 64 repetitions per job");
  if (r.max_pairs() > 4096) return Invalid("max_pairs", "at most 4096 repetitions per step");
  if (r.error() < 0 || r.error() > 0.1) return Invalid("error", "between 0 and 0.1");
  return absl::OkStatus();
}

// The open step's job finished (or its candidate failed): the engine takes what it measured.
void TakeMeasurements(Bisection* b, const bisect::Options& options, const JobRecord& job,
                      const std::vector<RunRecord>& runs) {
  bisect::State* state = &b->engine;
  bisect::Step& step = state->steps.back();
  Folded f = Fold(b->request, step, runs);
  b->runs += static_cast<uint32_t>(f.runs);
  b->board_seconds += f.seconds;
  if (job.finished_at_ms > job.created_at_ms) {
    b->wall_seconds += static_cast<double>(job.finished_at_ms - job.created_at_ms) / 1000.0;
  }
  if (!f.candidate_failure.empty()) {
    bisect::MarkBroken(state, options, f.candidate_failure, f.candidate_build_failed);
    return;
  }
  if (!f.reference_failure.empty()) {
    state->phase = bisect::Phase::kFailed;
    state->failure = absl::StrCat("job ", job.id, ": ", f.reference_failure);
    return;
  }
  if (f.pairs.empty()) {
    state->phase = bisect::Phase::kFailed;
    state->failure = f.without_metric > 0
                         ? absl::StrCat("job ", job.id, ": ", f.without_metric,
                                        " runs did not count ", b->request.metric())
                         : absl::StrCat("job ", job.id, " (", std::string(ToString(job.state)),
                                        ") measured no whole repetition");
    return;
  }
  bisect::AddPairs(state, options, f.pairs);
}

// Advances one bisection; true when it submitted a job.
absl::StatusOr<bool> Advance(const Stores& stores, const BisectionRecord& record) {
  auto loaded = BisectionFromRecord(record);
  if (!loaded.ok()) return loaded.status();
  Bisection b = *std::move(loaded);
  bisect::State& state = b.engine;
  const bisect::Options options = OptionsOf(b.request);
  int64_t current = record.current_job;
  if (current != 0) {
    auto job = stores.jobs->GetJob(current);
    if (!job.ok()) return job.status();
    auto runs = stores.jobs->ListRuns(current);
    if (!runs.ok()) return runs.status();
    if (!IsFinal(job->state)) {
      // A candidate that did not build or boot fails its runs; the rest need not run.
      if (state.steps.empty()) return false;
      Folded f = Fold(b.request, state.steps.back(), *runs);
      if (f.candidate_failure.empty() || !f.decided_early) return false;
      if (auto cancelled = stores.jobs->CancelJob(current); !cancelled.ok()) {
        return cancelled.status();
      }
      log::info("event=bisect_job_cut bisection={} job={} why=\"candidate failed\"", b.id, current);
    }
    TakeMeasurements(&b, options, *job, *runs);
    current = 0;
  }
  std::optional<bisect::Request> next = bisect::Next(state, options);
  bool submitted = false;
  if (next) {
    const int step_index = static_cast<int>(state.steps.size()) - 1;
    const int measured = static_cast<int>(state.steps.back().pairs.size());
    auto job = SubmitSpec(stores.boards, stores.jobs, StepSpec(b, *next),
                          absl::StrCat("bisect-", b.id, "-", step_index, "-", measured));
    if (!job.ok()) {
      if (job.status().code() != absl::StatusCode::kInvalidArgument) return job.status();
      state.phase = bisect::Phase::kFailed;
      state.failure = absl::StrCat("the next job was refused: ", job.status().message());
    } else {
      current = job->created.job_id;
      auto& jobs = state.steps.back().jobs;
      if (std::find(jobs.begin(), jobs.end(), current) == jobs.end()) jobs.push_back(current);
      submitted = job->created.created;
      log::info("event=bisect_job bisection={} step={} role={} commit={} job={} pairs={}", b.id,
                step_index, bisect::ToString(next->role),
                b.request.commits(next->candidate).sha().substr(0, 12), current, next->pairs);
    }
  }
  BisectionState status = BisectionState::kRunning;
  if (state.phase == bisect::Phase::kDone) status = BisectionState::kDone;
  if (state.phase == bisect::Phase::kFailed) status = BisectionState::kFailed;
  if (status != BisectionState::kRunning) {
    log::info("event=bisect_finished bisection={} state={} culprit={} failure=\"{}\"", b.id,
              ToString(status), state.result.culprit, state.failure);
  }
  auto json = BisectionToJson(b);
  if (!json.ok()) return json.status();
  auto updated = stores.bisections->UpdateBisection(b.id, status, *json, current);
  if (!updated.ok()) return updated.status();
  if (!*updated && current != 0) {
    // Cancelled meanwhile: the job just submitted goes too.
    stores.jobs->CancelJob(current).IgnoreError();
  }
  return submitted;
}

}  // namespace

double MetricValue(const std::string& metric, double throughput, uint64_t rounds,
                   const std::string& counters_json) {
  if (metric.empty() || metric == "throughput") return throughput;
  const std::string name = metric.substr(metric.find(':') + 1);
  auto parsed = nlohmann::json::parse(counters_json, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains(name) ||
      !parsed[name].is_number()) {
    return std::nan("");  // the run did not count it: not a whole repetition
  }
  const double value = parsed[name].get<double>();
  return rounds > 0 ? value / static_cast<double>(rounds) : value;
}

absl::StatusOr<v1::Bisection> StartBisection(const Stores& stores, v1::BisectRequest request,
                                             const std::string& request_id) {
  if (stores.bisections == nullptr) return absl::UnimplementedError("no bisection store");
  if (auto s = CheckRequest(request); !s.ok()) return s;
  auto board = PinBoard(stores.boards, request);
  if (!board.ok()) return board.status();
  request.set_board(*board);
  Bisection b;
  b.request = request;
  b.engine = bisect::Start(request.commits_size());
  // The endpoints' job must be one the controller accepts (spec, cell, board, builders).
  auto first = bisect::Next(b.engine, OptionsOf(request));
  if (first) {
    auto prepared = PrepareSpec(stores.boards, StepSpec(b, *first), "");
    if (!prepared.ok()) {
      return absl::Status(prepared.status().code(),
                          absl::StrCat("spec (as a step's job): ", prepared.status().message()));
    }
  }
  auto json = BisectionToJson(b);
  if (!json.ok()) return json.status();
  auto created = stores.bisections->CreateBisection(request_id, *json);
  if (!created.ok()) return created.status();
  if (created->created) {
    log::info("event=bisect_started bisection={} commits={} board={} metric={}", created->record.id,
              request.commits_size(), *board,
              request.metric().empty() ? "throughput" : request.metric());
  }
  return LoadBisection(stores, created->record.id);
}

absl::StatusOr<v1::Bisection> LoadBisection(const Stores& stores, int64_t id) {
  if (stores.bisections == nullptr) return absl::UnimplementedError("no bisection store");
  auto record = stores.bisections->GetBisection(id);
  if (!record.ok()) return record.status();
  auto b = BisectionFromRecord(*record);
  if (!b.ok()) return b.status();
  return Display(*b);
}

absl::StatusOr<v1::Bisection> CancelBisection(const Stores& stores, int64_t id) {
  if (stores.bisections == nullptr) return absl::UnimplementedError("no bisection store");
  auto record = stores.bisections->CancelBisection(id);
  if (!record.ok()) return record.status();
  if (record->state == BisectionState::kCancelled && record->current_job != 0) {
    auto cancelled = stores.jobs->CancelJob(record->current_job);
    if (!cancelled.ok()) return cancelled.status();
    log::info("event=bisect_cancelled bisection={} job={}", id, record->current_job);
  }
  return LoadBisection(stores, id);
}

absl::StatusOr<int> AdvanceBisections(const Stores& stores) {
  if (stores.bisections == nullptr) return 0;
  auto running = stores.bisections->ListBisections(1000, /*running_only=*/true);
  if (!running.ok()) return running.status();
  int submitted = 0;
  for (const auto& record : *running) {
    auto advanced = Advance(stores, record);
    if (!advanced.ok()) {
      log::warn("event=bisect_pass_failed bisection={} error=\"{}\"", record.id,
                std::string(advanced.status().message()));
      continue;
    }
    submitted += *advanced ? 1 : 0;
  }
  return submitted;
}

}  // namespace faultline::controller
