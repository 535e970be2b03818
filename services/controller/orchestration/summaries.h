#pragma once
// Comparisons of finished jobs, summarized once for /metrics. A scrape reads the stored
// summaries (MetricsSource::Snapshot) instead of building every recent job's report on each
// scrape: with 1,000 boards a report holds ~1,000 comparisons, and comparing every counter
// of every run costs seconds. The summarizer runs on its own thread, beside the dispatcher,
// on the controller holding the duty lease.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "services/controller/core/report.h"
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

class ComparisonSummarizer {
 public:
  // `may_run`: false while another controller holds the duty lease.
  ComparisonSummarizer(MetricsSource* source, JobStore* jobs, std::function<bool()> may_run)
      : source_(source), jobs_(jobs), may_run_(std::move(may_run)) {}
  ~ComparisonSummarizer() { Stop(); }

  void Start();
  void Stop();

  static constexpr std::chrono::seconds kEvery{1};
  static constexpr int kJobsPerPass = 4;

 private:
  void Loop();

  MetricsSource* source_;
  JobStore* jobs_;
  std::function<bool()> may_run_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace faultline::controller
