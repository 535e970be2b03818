#include "services/controller/orchestration/summaries.h"

#include <cmath>
#include <map>
#include <string>

#include "common/log.h"
#include "services/controller/orchestration/report_builder.h"

namespace faultline::controller {

JobComparisons SummarizeReport(const JobRecord& job, const JobReport& report, int64_t finished_ms) {
  JobComparisons out;
  out.job_id = job.id;
  out.finished_ms = finished_ms;
  out.benchmark = job.benchmark;
  out.study = job.name.empty() ? job.benchmark : job.name;
  for (const ReportComparison& comparison : report.comparisons) {
    const ComparisonRow& c = comparison.row;
    ComparisonSummary s;
    s.cell = std::map<std::string, std::string>(c.cell.begin(), c.cell.end());
    s.board = c.board;
    s.baseline = c.baseline;
    s.candidate = c.candidate;
    s.ratio = c.stats.ratio;
    s.ci_low = c.stats.ci_low;
    s.ci_high = c.stats.ci_high;
    s.p_value = c.stats.p_value;
    s.q_value = c.stats.q_value;
    s.verdict = std::string(stats::ToString(c.stats.verdict));
    s.n_baseline = static_cast<uint32_t>(c.stats.n_a);
    s.n_candidate = static_cast<uint32_t>(c.stats.n_b);
    for (const CounterComparison& k : comparison.counters) {
      // A counter present on one side only has no finite ratio; the report names it.
      if (!k.significant || !std::isfinite(k.ratio) || k.ratio <= 0 ||
          std::fabs(std::log(k.ratio)) < std::log1p(report.min_effect))
        continue;
      s.counters.push_back({k.name, k.unit, k.ratio, k.ci_low, k.ci_high});
    }
    out.comparisons.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<int> SummarizeComparisons(MetricsSource* source, JobStore* jobs, int limit) {
  auto pending = source->PendingComparisons(limit);
  if (!pending.ok()) return pending.status();
  int stored = 0;
  for (const JobVersion& job : *pending) {
    JobComparisons summary;
    if (auto built = BuildReport(jobs, job.job_id); built.ok()) {
      summary = SummarizeReport(built->job, built->report, job.finished_ms);
    } else if (absl::IsUnavailable(built.status())) {
      return built.status();  // the database is gone: the next pass tries again
    } else {
      log::error("event=comparisons_failed job={} error=\"{}\"", job.job_id,
                 std::string(built.status().message()));
      summary.job_id = job.job_id;
      summary.finished_ms = job.finished_ms;
    }
    auto kept = source->StoreComparisons(summary);
    if (!kept.ok()) return kept.status();
    if (*kept) ++stored;
  }
  return stored;
}

absl::StatusOr<int> RecordPhases(MetricsSource* source, int limit, const PhaseObserver& observe) {
  auto pending = source->PendingPhases(limit);
  if (!pending.ok()) return pending.status();
  int recorded = 0;
  for (const JobTimeline& t : *pending) {
    const std::vector<ArchPhases> phases = PhasesOf(t, t.finished_ms);
    auto kept = source->StorePhases(t.job_id, phases);
    if (!kept.ok()) return kept.status();
    if (!*kept) continue;
    ++recorded;
    if (observe) observe(phases);
  }
  return recorded;
}

bool ComparisonSummarizer::Pass() {
  auto phases = RecordPhases(source_, kJobsPerPass * 8, observe_phases_);
  if (!phases.ok()) {
    log::warn("event=phases_pass_failed error=\"{}\"", std::string(phases.status().message()));
  }
  const auto start = std::chrono::steady_clock::now();
  auto stored = SummarizeComparisons(source_, jobs_, kJobsPerPass);
  if (!stored.ok()) {
    log::warn("event=comparisons_pass_failed error=\"{}\"", std::string(stored.status().message()));
    return false;
  }
  if (*stored > 0) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    log::info("event=comparisons_summarized jobs={} ms={}", *stored, ms);
  }
  return *stored == kJobsPerPass || (phases.ok() && *phases == kJobsPerPass * 8);
}

}  // namespace faultline::controller
