#pragma once
// Finished jobs summarized once for /metrics: their comparisons and their phases. A scrape reads
// the stored summaries (MetricsSource::Snapshot) instead of building every recent job's report on
// each scrape: with 1,000 boards a report holds ~1,000 comparisons, and comparing every counter of
// every run costs seconds. The summarizer runs on its own thread, beside the dispatcher, on the
// controller holding the duty lease.
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "services/controller/core/report.h"
#include "services/controller/orchestration/periodic_duty.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// What /metrics exports of a report: every comparison, and under each the counters that
// changed significantly by more than the study's min_effect (a steady counter is
// "significant" at x0.9999).
JobComparisons SummarizeReport(const JobRecord& job, const JobReport& report, int64_t finished_ms);

// Summarizes up to `limit` pending jobs (newest first); returns how many were stored.
// A job whose report cannot be built for a reason other than the database is stored
// without comparisons (logged), so it is not retried forever.
absl::StatusOr<int> SummarizeComparisons(MetricsSource* source, JobStore* jobs, int limit);

// Where finished jobs' time went (core/phases.h): up to `limit` jobs' phases computed from
// their timelines and recorded; `observe` gets those this call recorded (each job once,
// whichever controller records it). Returns how many.
using PhaseObserver = std::function<void(const std::vector<ArchPhases>&)>;
absl::StatusOr<int> RecordPhases(MetricsSource* source, int limit, const PhaseObserver& observe);

class ComparisonSummarizer {
 public:
  // `may_run`: false while another controller holds the duty lease. `observe_phases`
  // (may be empty): each finished job's phases as they are recorded.
  ComparisonSummarizer(MetricsSource* source, JobStore* jobs, std::function<bool()> may_run,
                       PhaseObserver observe_phases = {})
      : source_(source),
        jobs_(jobs),
        observe_phases_(std::move(observe_phases)),
        duty_([this] { return Pass(); }, kEvery, std::move(may_run)) {}

  void Start() { duty_.Start(); }
  void Stop() { duty_.Stop(); }

  static constexpr std::chrono::seconds kEvery{1};
  static constexpr int kJobsPerPass = 4;

 private:
  // One pass; true when it was full (the next one at once).
  bool Pass();

  MetricsSource* source_;
  JobStore* jobs_;
  PhaseObserver observe_phases_;
  PeriodicDuty duty_;  // last: stopped (joined) before the members its pass uses go
};

}  // namespace faultline::controller
