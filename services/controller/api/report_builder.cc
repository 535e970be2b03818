#include "services/controller/api/report_builder.h"

#include <algorithm>
#include <map>

#include "nlohmann/json.hpp"
#include "services/controller/api/convert.h"
#include "services/controller/core/counters.h"
#include "services/controller/core/report.h"

namespace faultline::controller {

absl::Status BuildReport(JobStore* store, int64_t job_id, v1::GetReportResponse* resp,
                         const ReportOptions& report_options) {
  auto job = store->GetJob(job_id);
  if (!job.ok()) return job.status();
  auto runs = store->ListRuns(job_id);
  if (!runs.ok()) return runs.status();
  JobToProto(*job, resp->mutable_job());
  for (const auto& k : job->matrix_keys) resp->add_matrix_keys(k);
  std::vector<RunOutcome> outcomes;
  for (const auto& r : *runs) {
    RunOutcome o;
    for (const auto& k : job->matrix_keys) {
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
  // Unplaced runs should not form their own rows once their cell has a board: merge them.
  std::vector<SummaryRow> rows = Summarize(outcomes);
  for (const auto& row : rows) {
    bool placed_twin =
        row.board.empty() && std::any_of(rows.begin(), rows.end(), [&](const SummaryRow& other) {
          return !other.board.empty() && other.cell == row.cell && other.kernel == row.kernel;
        });
    if (placed_twin) continue;
    auto* out = resp->add_rows();
    for (const auto& [k, v] : row.cell) (*out->mutable_cell())[k] = v;
    out->set_kernel(row.kernel);
    out->set_board(row.board);
    out->set_n(row.n);
    out->set_median(row.median);
    out->set_min(row.min);
    out->set_max(row.max);
    out->set_mean(row.mean);
    out->set_failed(row.failed);
    out->set_too_coarse(row.too_coarse);
    out->set_median_pages_per_second(row.median_pages_per_second);
  }

  // Every result's environment, parsed once: for the caveats and the differences.
  std::vector<RunEnvironment> environments;
  for (const auto& r : *runs) {
    if (!r.has_result) continue;
    RunEnvironment e{r.board, r.kernel, {}};
    const auto parsed = nlohmann::json::parse(r.environment_json, nullptr, false);
    if (parsed.is_object()) {
      for (const auto& [k, v] : parsed.items()) {
        e.facts[k] = v.is_string() ? v.get<std::string>() : v.dump();
      }
    }
    environments.push_back(std::move(e));
  }

  // Emulated boards: their numbers are the emulator's, never to be read as hardware's.
  std::map<std::string, std::string> accel_of_board;
  for (const auto& e : environments) {
    auto it = e.facts.find("virt.accel");
    if (it != e.facts.end() && it->second != "none") accel_of_board[e.board] = it->second;
  }
  for (const auto& [board, accel] : accel_of_board) {
    if (accel == "tcg") {
      resp->add_caveats(
          "board " + board +
          " is emulated (virt.accel=tcg): its throughputs are qemu's software "
          "emulation, not hardware numbers; compare its kernels only with each other");
    } else {
      resp->add_caveats("board " + board + " is a virtual machine (virt.accel=" + accel + ")");
    }
  }

  // A/B: every other kernel against the baseline, per board and cell.
  const v1::JobSpec& spec = resp->job().spec();
  std::vector<std::string> kernels(spec.kernels().begin(), spec.kernels().end());
  std::string baseline = !job->baseline.empty() ? job->baseline
                         : kernels.empty()      ? std::string()
                                                : kernels.front();
  CompareOptions options;
  options.alpha = job->alpha;
  options.min_effect = job->min_effect;
  resp->set_alpha(options.alpha);
  resp->set_min_effect(options.min_effect);
  // Each run's counters, parsed once, by (cell, board, kernel).
  std::map<std::tuple<Cell, std::string, std::string>, std::vector<RunCounters>> counters_of;
  const bool need_counters = kernels.size() > 1 && report_options.compare_counters;
  if (need_counters || !report_options.run_counters.empty()) {
    for (size_t i = 0; i < runs->size(); ++i) {
      const RunRecord& r = (*runs)[i];
      if (!outcomes[i].succeeded) continue;
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
      if (!report_options.run_counters.empty()) {
        auto* row = resp->add_run_results();
        for (const auto& [k, v] : r.cell) (*row->mutable_cell())[k] = v;
        row->set_kernel(r.kernel);
        row->set_board(r.board);
        row->set_repetition(static_cast<uint32_t>(r.repetition));
        row->set_rounds(r.rounds);
        row->set_throughput(r.throughput);
        for (const auto& name : report_options.run_counters) {
          auto it = rc.values.find(name);
          // A zero delta is not stored: a counter the run lacks is 0 (or absent on its kernel).
          (*row->mutable_counters())[name] = it == rc.values.end() ? 0.0 : it->second;
        }
      }
      if (need_counters)
        counters_of[{outcomes[i].cell, r.board, r.kernel}].push_back(std::move(rc));
    }
  }
  if (kernels.size() > 1) {
    for (const auto& c : CompareKernels(outcomes, baseline, kernels, options)) {
      auto* out = resp->add_comparisons();
      for (const auto& [k, v] : c.cell) (*out->mutable_cell())[k] = v;
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
      out->set_verdict(std::string(ToString(c.stats.verdict)));
      const auto& a = counters_of[{c.cell, c.board, c.baseline}];
      const auto& b = counters_of[{c.cell, c.board, c.candidate}];
      for (const CounterComparison& k : need_counters
                                            ? CompareCounters(a, b, c.stats.paired, options)
                                            : std::vector<CounterComparison>{}) {
        auto* kc = out->add_counters();
        kc->set_name(k.name);
        kc->set_unit(k.unit);
        kc->set_baseline_median(k.median_a);
        kc->set_candidate_median(k.median_b);
        kc->set_baseline_per_second(k.median_a_per_second);
        kc->set_candidate_per_second(k.median_b_per_second);
        kc->set_ratio(k.ratio);
        kc->set_ci_low(k.ci_low);
        kc->set_ci_high(k.ci_high);
        kc->set_p_value(k.p_value);
        kc->set_q_value(k.q_value);
        kc->set_significant(k.significant);
        kc->set_paired(k.paired);
        kc->set_only_on(k.only_on);
      }
    }
    for (const auto& [k, v] : EnvironmentDifferences(environments)) {
      (*resp->mutable_environment_differences())[k] = v;
    }
  }
  return absl::OkStatus();
}

}  // namespace faultline::controller
