#include "services/controller/orchestration/report_builder.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "common/strings.h"
#include "faultline/v1/run_options.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "services/controller/core/counters.h"
#include "services/controller/core/report.h"

namespace faultline::controller {
namespace {

// Each run as the summaries and comparisons see it, in the job's matrix-key order.
std::vector<RunOutcome> OutcomesOf(const std::vector<RunRecord>& runs,
                                   const std::vector<std::string>& matrix_keys) {
  std::vector<RunOutcome> outcomes;
  outcomes.reserve(runs.size());
  for (const auto& r : runs) {
    RunOutcome o;
    for (const auto& k : matrix_keys) {
      auto it = r.cell.find(k);
      o.cell.emplace_back(k, it == r.cell.end() ? "" : it->second);
    }
    o.kernel = r.kernel;
    // Runs not yet placed are reported with their cell; a board appears once one ran there.
    o.board = r.has_result || r.state == RunState::kFailed ? r.board : "";
    o.succeeded = r.state == RunState::kSucceeded && r.has_result;
    o.failed = r.state == RunState::kFailed;
    o.throughput = r.throughput;
    o.repetition = r.repetition;
    o.too_coarse = r.too_coarse;
    o.pages_per_second = r.pages_per_second;
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

// The summary rows; unplaced runs do not form their own rows once their cell has a board.
std::vector<SummaryRow> RowsOf(const std::vector<RunOutcome>& outcomes) {
  const std::vector<SummaryRow> all = Summarize(outcomes);
  std::vector<SummaryRow> rows;
  for (const auto& row : all) {
    const bool placed_twin =
        row.board.empty() && std::any_of(all.begin(), all.end(), [&](const SummaryRow& other) {
          return !other.board.empty() && other.cell == row.cell && other.kernel == row.kernel;
        });
    if (!placed_twin) rows.push_back(row);
  }
  return rows;
}

// Every result's environment, parsed once: for the caveats and the differences.
std::vector<RunEnvironment> EnvironmentsOf(const std::vector<RunRecord>& runs) {
  std::vector<RunEnvironment> environments;
  for (const auto& r : runs) {
    if (!r.has_result) continue;
    RunEnvironment e{r.board, r.kernel, {}};
    const auto parsed = nlohmann::json::parse(r.environment_json, nullptr, false);
    if (parsed.is_object()) {
      for (const auto& [k, v] : parsed.items()) {
        e.facts[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
    }
    // Results of older agents: the release also as "kernel_release" (shown twice), and the
    // hypervisor's CPUID signature raw ("bhyve bhyve ").
    if (e.facts.count("kernel.release")) e.facts.erase("kernel_release");
    if (auto it = e.facts.find("virt.accel"); it != e.facts.end() && it->second != "none") {
      it->second = HypervisorName(it->second);
    }
    environments.push_back(std::move(e));
  }
  return environments;
}

// Emulated boards: their numbers are the emulator's, never to be read as hardware's.
std::vector<std::string> CaveatsOf(const std::vector<RunEnvironment>& environments) {
  std::map<std::string, std::string> accel_of_board;
  for (const auto& e : environments) {
    auto it = e.facts.find("virt.accel");
    if (it != e.facts.end() && it->second != "none") accel_of_board[e.board] = it->second;
  }
  std::vector<std::string> caveats;
  for (const auto& [board, accel] : accel_of_board) {
    if (accel == "tcg") {
      caveats.push_back("board " + board +
                        " is emulated (virt.accel=tcg): its throughputs are qemu's software "
                        "emulation, not hardware numbers; compare its kernels only with each "
                        "other");
    } else {
      caveats.push_back("board " + board + " is a virtual machine (virt.accel=" + accel + ")");
    }
  }
  return caveats;
}

// One run's counters as stored, per measured second where the run says how long it measured.
RunCounters CountersOf(const RunRecord& r) {
  RunCounters rc;
  rc.repetition = r.repetition;
  rc.rounds = static_cast<double>(r.rounds);
  rc.seconds = r.duration_seconds;
  const auto parsed = nlohmann::json::parse(r.counters_json, nullptr, false);
  if (parsed.is_object()) {
    for (const auto& [k, v] : parsed.items()) {
      if (v.is_number()) rc.values[k] = v.get<double>();
    }
  }
  if (auto it = rc.values.find("measured_elapsed_seconds");
      it != rc.values.end() && it->second > 0) {
    rc.seconds = it->second;
  }
  return rc;
}

ReportRunResult RunResultOf(const RunRecord& r, const RunCounters& rc,
                            const std::vector<std::string>& names) {
  ReportRunResult row{r.cell, r.kernel, r.board, r.repetition, r.rounds, r.throughput, {}};
  for (const auto& name : names) {
    auto it = rc.values.find(name);
    // A zero delta is not stored: a counter the run lacks is 0 (or absent on its kernel).
    row.counters[name] = it == rc.values.end() ? 0.0 : it->second;
  }
  return row;
}

// Runs that traced mmap_lock waits but lost records (their tables undercount) or could not
// trace them at all (the kernel or the board said why), per board and kernel: the report
// says so rather than showing a short count as a measurement.
std::vector<std::string> LockWaitCaveatsOf(const std::vector<RunRecord>& runs,
                                           const std::vector<RunOutcome>& outcomes,
                                           const std::vector<RunCounters>& counters,
                                           const std::vector<RunEnvironment>& environments) {
  using BoardKernel = std::pair<std::string, std::string>;
  std::map<BoardKernel, std::pair<int, double>> lost;  // runs, records
  for (size_t i = 0; i < runs.size(); ++i) {
    const double records = CounterValue(counters[i], "mmap_lock_wait.lost_records");
    if (!outcomes[i].succeeded || !(records > 0)) continue;
    auto& [n, sum] = lost[{runs[i].board, runs[i].kernel}];
    ++n;
    sum += records;
  }
  std::map<BoardKernel, std::string> unsupported, no_contention;
  for (const RunEnvironment& e : environments) {
    if (auto it = e.facts.find("mmap_lock_wait.unsupported"); it != e.facts.end()) {
      unsupported[{e.board, e.kernel}] = it->second;
    }
    if (auto it = e.facts.find("mmap_lock_contention.unsupported"); it != e.facts.end()) {
      no_contention[{e.board, e.kernel}] = it->second;
    }
  }
  std::vector<std::string> caveats;
  for (const auto& [key, why] : unsupported) {
    caveats.push_back("board " + key.first + ", kernel " + key.second +
                      ": mmap_lock waits were not traced: " + why);
  }
  for (const auto& [key, why] : no_contention) {
    caveats.push_back("board " + key.first + ", kernel " + key.second +
                      ": true mmap_lock contention was not traced: " + why);
  }
  for (const auto& [key, n] : lost) {
    caveats.push_back("board " + key.first + ", kernel " + key.second + ": " +
                      std::to_string(n.first) + " run(s) lost " +
                      std::to_string(static_cast<uint64_t>(n.second)) +
                      " mmap_lock trace record(s) (ring buffer full): their wait tables "
                      "undercount");
  }
  return caveats;
}

// (cell, board, kernel)
using RunGroupKey = std::tuple<Cell, std::string, std::string>;
using CountersByRunGroup = std::map<RunGroupKey, std::vector<RunCounters>>;

// A profiled run's folded stacks per round; empty otherwise.
std::map<std::string, double> StacksOf(const RunRecord& r, double rounds) {
  if (r.folded_stacks.empty()) return {};
  return FoldedPerRound(r.folded_stacks, rounds);
}

// The job's spec as stored (proto JSON) asks for mmap_lock waits.
bool SpecTracesLockWaits(const std::string& spec_json) {
  v1::JobSpec spec;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(spec_json, &spec, parse).ok()) return false;
  return v1::RunOptionsOf(spec).mmap_lock_waits();
}

}  // namespace

std::vector<std::string> SpecKernels(const std::string& spec_json) {
  std::vector<std::string> kernels;
  const auto spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (!spec.is_object()) return kernels;
  auto it = spec.find("kernels");
  if (it == spec.end() || !it->is_array()) return kernels;
  for (const auto& k : *it) {
    if (k.is_string()) kernels.push_back(k.get<std::string>());
  }
  return kernels;
}

absl::StatusOr<BuiltReport> BuildReport(JobStore* store, int64_t job_id,
                                        const ReportOptions& report_options) {
  auto job = store->GetJob(job_id);
  if (!job.ok()) return job.status();
  auto runs = store->ListRuns(job_id);
  if (!runs.ok()) return runs.status();
  BuiltReport built{*job, {}};
  JobReport& report = built.report;
  report.matrix_keys = job->matrix_keys;
  const std::vector<RunOutcome> outcomes = OutcomesOf(*runs, job->matrix_keys);
  report.rows = RowsOf(outcomes);
  const std::vector<RunEnvironment> environments = EnvironmentsOf(*runs);
  report.caveats = CaveatsOf(environments);
  report.board_facts = BoardFactsOf(environments);

  // A/B: every other kernel against the baseline, per board and cell.
  const std::vector<std::string> kernels = SpecKernels(job->spec_json);
  const std::string baseline = !job->baseline.empty() ? job->baseline
                               : kernels.empty()      ? std::string()
                                                      : kernels.front();
  stats::CompareOptions options;
  options.alpha = job->alpha;
  options.min_effect = job->min_effect;
  report.alpha = options.alpha;
  report.min_effect = options.min_effect;

  // Each succeeded run's counters, parsed once, by (cell, board, kernel).
  CountersByRunGroup counters_of;
  std::map<RunGroupKey, std::vector<std::map<std::string, double>>> stacks_of;
  const bool need_counters = kernels.size() > 1 && report_options.compare_counters;
  const bool need_stacks = kernels.size() > 1 && report_options.profiles;
  const bool lock_waits = SpecTracesLockWaits(job->spec_json);
  const bool run_rows = report_options.runs || !report_options.run_counters.empty();
  if (need_counters || run_rows || lock_waits || need_stacks) {
    std::vector<RunCounters> parsed(runs->size());
    std::vector<std::pair<int64_t, int64_t>> finished;  // (finished_ms, id) of each row
    for (size_t i = 0; i < runs->size(); ++i) {
      if (!outcomes[i].succeeded) continue;
      const RunRecord& r = (*runs)[i];
      parsed[i] = CountersOf(r);
      if (run_rows) {
        report.run_results.push_back(RunResultOf(r, parsed[i], report_options.run_counters));
        finished.emplace_back(r.finished_ms, r.id);
      }
      if (need_counters) counters_of[{outcomes[i].cell, r.board, r.kernel}].push_back(parsed[i]);
      if (need_stacks) {
        std::map<std::string, double> stacks = StacksOf(r, parsed[i].rounds);
        if (!stacks.empty()) {
          stacks_of[{outcomes[i].cell, r.board, r.kernel}].push_back(std::move(stacks));
        }
      }
    }
    // Each row's place in the order the runs finished (ties: the run created first).
    std::vector<size_t> by_finish(finished.size());
    std::iota(by_finish.begin(), by_finish.end(), size_t{0});
    std::sort(by_finish.begin(), by_finish.end(),
              [&](size_t a, size_t b) { return finished[a] < finished[b]; });
    for (size_t k = 0; k < by_finish.size(); ++k) {
      report.run_results[by_finish[k]].order = static_cast<uint32_t>(k + 1);
    }
    if (report_options.samples && !finished.empty()) {
      auto samples = store->RunSamples(job_id);
      if (!samples.ok()) return samples.status();
      for (size_t k = 0; k < finished.size(); ++k) {
        auto it = samples->find(finished[k].second);
        if (it != samples->end()) report.run_results[k].samples = std::move(it->second);
      }
    }
    if (lock_waits) {
      for (std::string& c : LockWaitCaveatsOf(*runs, outcomes, parsed, environments)) {
        report.caveats.push_back(std::move(c));
      }
    }
  }
  if (kernels.size() < 2) return built;
  for (auto& c : CompareKernels(outcomes, baseline, kernels, options)) {
    ReportComparison out{std::move(c), {}, {}};
    if (need_counters) {
      const auto& a = counters_of[{out.row.cell, out.row.board, out.row.baseline}];
      const auto& b = counters_of[{out.row.cell, out.row.board, out.row.candidate}];
      out.counters = CompareCounters(a, b, out.row.stats.paired, options);
      out.tables = LockWaitTables(a, b, out.row.stats.paired, options);
    }
    if (need_stacks) {
      out.baseline_stacks = MergeStacks(stacks_of[{out.row.cell, out.row.board, out.row.baseline}]);
      out.candidate_stacks =
          MergeStacks(stacks_of[{out.row.cell, out.row.board, out.row.candidate}]);
    }
    report.comparisons.push_back(std::move(out));
  }
  report.environment_differences = EnvironmentDifferences(environments);
  return built;
}

}  // namespace faultline::controller
