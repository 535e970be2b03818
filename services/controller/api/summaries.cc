#include "services/controller/api/summaries.h"

#include <cmath>
#include <map>
#include <string>

#include "services/common/log.h"
#include "services/controller/api/report_builder.h"

namespace faultline::controller {

JobComparisons SummarizeReport(const v1::GetReportResponse& report, int64_t finished_ms) {
  JobComparisons out;
  out.job_id = report.job().id();
  out.finished_ms = finished_ms;
  out.benchmark = report.job().spec().benchmark();
  out.study = report.job().spec().name().empty() ? out.benchmark : report.job().spec().name();
  for (const auto& c : report.comparisons()) {
    ComparisonSummary s;
    s.cell = std::map<std::string, std::string>(c.cell().begin(), c.cell().end());
    s.board = c.board();
    s.baseline = c.baseline();
    s.candidate = c.candidate();
    s.ratio = c.ratio();
    s.ci_low = c.ci_low();
    s.ci_high = c.ci_high();
    s.p_value = c.p_value();
    s.q_value = c.q_value();
    s.verdict = c.verdict();
    s.n_baseline = c.n_baseline();
    s.n_candidate = c.n_candidate();
    for (const auto& k : c.counters()) {
      // A counter present on one side only has no finite ratio; the report names it.
      if (!k.significant() || !std::isfinite(k.ratio()) || k.ratio() <= 0 ||
          std::fabs(std::log(k.ratio())) < std::log1p(report.min_effect()))
        continue;
      s.counters.push_back({k.name(), k.unit(), k.ratio(), k.ci_low(), k.ci_high()});
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
    v1::GetReportResponse report;
    JobComparisons summary;
    if (absl::Status built = BuildReport(jobs, job.job_id, &report); built.ok()) {
      summary = SummarizeReport(report, job.finished_ms);
    } else if (absl::IsUnavailable(built)) {
      return built;  // the database is gone: the next pass tries again
    } else {
      log::error("event=comparisons_failed job={} error=\"{}\"", job.job_id,
                 std::string(built.message()));
      summary.job_id = job.job_id;
      summary.finished_ms = job.finished_ms;
    }
    auto kept = source->StoreComparisons(summary);
    if (!kept.ok()) return kept.status();
    if (*kept) ++stored;
  }
  return stored;
}

void ComparisonSummarizer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ComparisonSummarizer::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ComparisonSummarizer::Loop() {
  bool backlog = false;  // the last pass was full: go on at once
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, backlog ? std::chrono::seconds(0) : kEvery, [&] { return stopping_; }))
        return;
    }
    backlog = false;
    if (!may_run_()) continue;
    const auto start = std::chrono::steady_clock::now();
    auto stored = SummarizeComparisons(source_, jobs_, kJobsPerPass);
    if (!stored.ok()) {
      log::warn("event=comparisons_pass_failed error=\"{}\"",
                std::string(stored.status().message()));
    } else if (*stored > 0) {
      backlog = *stored == kJobsPerPass;
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      log::info("event=comparisons_summarized jobs={} ms={}", *stored, ms);
    }
  }
}

}  // namespace faultline::controller
