// /metrics over the in-memory stores: a finished job's comparisons are summarized once per
// job version (api/summaries.h) and exported from the summary, with the counters that changed
// significantly beside the throughput ratio.
#include "services/controller/http/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "nlohmann/json.hpp"
#include "services/controller/orchestration/submission.h"
#include "services/controller/orchestration/summaries.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.set_name("explain");
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("10s");
  spec.set_repetitions(8);
  spec.add_kernels("vanilla");
  spec.add_kernels("patched");
  spec.mutable_memcg()->set_memory_max("256M");
  return spec;
}

// Samples of `metric` in a /metrics body: the value by the value of label `key`.
std::map<std::string, double> Samples(const std::string& body, const std::string& metric,
                                      const std::string& key) {
  std::map<std::string, double> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    const size_t at = line.find(key + "=\"");
    const size_t end = line.find('"', at + key.size() + 2);
    const std::string label =
        at == std::string::npos ? "" : line.substr(at + key.size() + 2, end - at - key.size() - 2);
    out[label] = std::stod(line.substr(line.rfind(' ') + 1));
  }
  return out;
}

class MetricsTest : public ::testing::Test {
 protected:
  // Patched: 2x the rounds, the same faults per round, 40x fewer failed retries per round
  // (`retry_factor` 1: the same as vanilla).
  void FinishRuns(double retry_factor) {
    fake_.jobs.EditRuns(job_, [&](RunRecord& r) {
      const bool patched = r.kernel == "patched";
      const double rounds = (patched ? 2000 : 1000) + 7 * r.repetition;
      r.state = RunState::kSucceeded;
      r.has_result = true;
      r.board = "b1";
      r.duration_seconds = 10;
      r.rounds = static_cast<uint64_t>(rounds);
      r.throughput = rounds / 10;
      nlohmann::json counters = {
          {"vmstat.pgfault", rounds * 640 + 3 * r.repetition},
          {"vmstat.retry_io_miss", rounds * (patched ? 20 * retry_factor : 20) + r.repetition},
      };
      if (patched) counters["vmstat.new_debug"] = 4;
      r.counters_json = counters.dump();
    });
  }
  void SetUp() override {
    fake_.boards.AddBoard(fakes::VanillaBoard("b1", {"vanilla", "patched"}));
    auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "");
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    job_ = submitted->created.job_id;
    FinishRuns(0.5 / 20);
  }
  // The job finished (again) at finished_ms; returns how many jobs the summarizer stored.
  int Finish(int64_t finished_ms) {
    fake_.metrics.FinishJob(job_, finished_ms);
    return Summarize();
  }
  int Summarize() {
    auto stored = SummarizeComparisons(&fake_.metrics, &fake_.jobs, 4);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored.value_or(-1);
  }
  std::string Render() { return metrics_.Render(&fake_.metrics, &fake_.boards); }

  FakeStores fake_;
  ControllerMetrics metrics_;
  int64_t job_ = 0;
};

TEST_F(MetricsTest, SignificantCounterChangesBesideTheThroughputRatio) {
  ASSERT_EQ(Finish(1000), 1);
  const std::string body = Render();
  EXPECT_THAT(Samples(body, "faultline_comparison_ratio", "candidate"),
              ElementsAre(Pair("patched", DoubleNear(2.0, 0.05))));
  // pgfault per round changed by less than min_effect (significantly: the data are steady);
  // new_debug exists on one kernel only (no ratio).
  ASSERT_THAT(Samples(body, "faultline_comparison_counters_ratio", "counter"),
              ElementsAre(Pair("vmstat.retry_io_miss", DoubleNear(0.025, 0.002))));
  const auto low = Samples(body, "faultline_comparison_counters_ratio_ci_lower", "counter");
  const auto high = Samples(body, "faultline_comparison_counters_ratio_ci_upper", "counter");
  ASSERT_EQ(low.count("vmstat.retry_io_miss"), 1u);
  ASSERT_EQ(high.count("vmstat.retry_io_miss"), 1u);
  const double ratio =
      Samples(body, "faultline_comparison_counters_ratio", "counter").begin()->second;
  EXPECT_LE(low.at("vmstat.retry_io_miss"), ratio);
  EXPECT_GE(high.at("vmstat.retry_io_miss"), ratio);
  EXPECT_LT(high.at("vmstat.retry_io_miss"), 0.03);
  EXPECT_NE(body.find("unit=\"round\""), std::string::npos) << body;
  EXPECT_THAT(Samples(body, "faultline_comparison_counters_changed", "candidate"),
              ElementsAre(Pair("patched", 1.0)));
}

TEST_F(MetricsTest, NothingIsExportedBeforeTheJobIsSummarized) {
  EXPECT_THAT(Samples(Render(), "faultline_comparison_ratio", "candidate"), IsEmpty());
  fake_.metrics.FinishJob(job_, 1000);
  EXPECT_THAT(Samples(Render(), "faultline_comparison_ratio", "candidate"), IsEmpty());
  ASSERT_EQ(Summarize(), 1);
  EXPECT_THAT(Samples(Render(), "faultline_comparison_ratio", "candidate"),
              ElementsAre(Pair("patched", DoubleNear(2.0, 0.05))));
}

TEST_F(MetricsTest, AFinishedJobIsSummarizedOncePerVersion) {
  ASSERT_EQ(Finish(1000), 1);
  ASSERT_EQ(Samples(Render(), "faultline_comparison_counters_changed", "candidate")["patched"],
            1.0);
  // The runs change under the same job version: nothing to summarize, the scrape shows the
  // summary made.
  FinishRuns(1.0);
  EXPECT_EQ(Summarize(), 0);
  EXPECT_EQ(Samples(Render(), "faultline_comparison_counters_changed", "candidate")["patched"],
            1.0);
  // The job finished again (a new version): summarized again, nothing changed any more.
  ASSERT_EQ(Finish(2000), 1);
  const std::string body = Render();
  EXPECT_EQ(Samples(body, "faultline_comparison_counters_changed", "candidate")["patched"], 0.0);
  EXPECT_THAT(Samples(body, "faultline_comparison_counters_ratio", "counter"), IsEmpty());
}

TEST_F(MetricsTest, ASummaryOfAVersionTheJobLeftIsDropped) {
  fake_.metrics.FinishJob(job_, 2000);
  JobComparisons stale;
  stale.job_id = job_;
  stale.finished_ms = 1000;
  auto stored = fake_.metrics.StoreComparisons(stale);
  ASSERT_TRUE(stored.ok());
  EXPECT_FALSE(*stored);
  EXPECT_EQ(Summarize(), 1);
}

// A schedule on a branch names each night's kernels "LABEL@<hash>+<slot>": the alerts'
// label set is the series, the same every night.
TEST_F(MetricsTest, ANightlyKernelOfABranchIsExportedByItsSeries) {
  fake_.metrics.FinishJob(job_, 1000);
  JobComparisons nightly;
  nightly.job_id = job_;
  nightly.finished_ms = 1000;
  nightly.study = "nightly";
  nightly.benchmark = "filemap-thrash";
  ComparisonSummary c;
  c.board = "b1";
  c.baseline = "vanilla@0123456789ab+20261203T0200";
  c.candidate = "patched@ba9876543210+20261203T0200";
  c.ratio = 0.9;
  nightly.comparisons.push_back(c);
  auto stored = fake_.metrics.StoreComparisons(nightly);
  ASSERT_TRUE(stored.ok() && *stored);
  const std::string body = Render();
  EXPECT_THAT(Samples(body, "faultline_comparison_ratio", "candidate"),
              ElementsAre(Pair("patched@ba9876543210", DoubleNear(0.9, 1e-12))));
  EXPECT_THAT(Samples(body, "faultline_comparison_ratio", "baseline"),
              ElementsAre(Pair("vanilla@0123456789ab", DoubleNear(0.9, 1e-12))));
}

TEST_F(MetricsTest, AJobWhoseReportCannotBeBuiltIsStoredEmptyNotRetried) {
  fake_.metrics.FinishJob(job_ + 1000, 5);  // no such job in the job store
  EXPECT_EQ(Summarize(), 1);
  EXPECT_EQ(Summarize(), 0);
  EXPECT_THAT(Samples(Render(), "faultline_comparison_ratio", "candidate"), IsEmpty());
}

TEST_F(MetricsTest, SeriesOfAnUnchangedVersionAreRenderedOnce) {
  auto snapshot_with = [](double median, int64_t version) {
    MetricsSnapshot snap;
    SeriesPoint p;
    p.study = "nightly";
    p.benchmark = "swap-in";
    p.arch = "x86_64";
    p.board = "b1";
    p.kernel = "vanilla";
    p.median = median;
    snap.series.push_back(p);
    snap.series_version = version;
    return snap;
  };
  const std::string metric = "faultline_throughput_rounds_per_second";
  fake_.metrics.SetSnapshot(snapshot_with(100, 5));
  EXPECT_THAT(Samples(Render(), metric, "board"), ElementsAre(Pair("b1", 100.0)));
  // Version 5 again: the store sends no series, the kept text is shown.
  fake_.metrics.SetSnapshot(snapshot_with(200, 5));
  EXPECT_THAT(Samples(Render(), metric, "board"), ElementsAre(Pair("b1", 100.0)));
  fake_.metrics.SetSnapshot(snapshot_with(300, 6));
  EXPECT_THAT(Samples(Render(), metric, "board"), ElementsAre(Pair("b1", 300.0)));
  // No version (jobs running): rendered on every scrape.
  fake_.metrics.SetSnapshot(snapshot_with(400, -1));
  EXPECT_THAT(Samples(Render(), metric, "board"), ElementsAre(Pair("b1", 400.0)));
  fake_.metrics.SetSnapshot(snapshot_with(500, -1));
  EXPECT_THAT(Samples(Render(), metric, "board"), ElementsAre(Pair("b1", 500.0)));
}

TEST_F(MetricsTest, AJobsComparisonsAreLoadedOncePerVersion) {
  ASSERT_EQ(Finish(1000), 1);
  Render();
  Render();
  EXPECT_EQ(fake_.metrics.loads(), 1);
  ASSERT_EQ(Finish(2000), 1);
  Render();
  EXPECT_EQ(fake_.metrics.loads(), 2);
}

TEST_F(MetricsTest, LabelValuesAreEscapedAndNonFiniteValuesSpelledOut) {
  MetricsSnapshot snap;
  SeriesPoint p;
  p.study = "a \"quoted\" \\ study\nline";
  p.benchmark = "swap-in";
  p.board = "b1";
  p.median = std::numeric_limits<double>::quiet_NaN();
  snap.series.push_back(p);
  p.board = "b2";
  p.median = std::numeric_limits<double>::infinity();
  snap.series.push_back(p);
  fake_.metrics.SetSnapshot(snap);
  const std::string body = Render();
  // Labels sorted by name (as prometheus-cpp wrote them; e2e scripts grep whole lines).
  EXPECT_NE(
      body.find(
          R"(faultline_throughput_rounds_per_second{arch="",benchmark="swap-in",board="b1",config="default",kernel="",study="a \"quoted\" \\ study\nline"} NaN)"),
      std::string::npos)
      << body;
  EXPECT_NE(
      body.find(
          R"(board="b2",config="default",kernel="",study="a \"quoted\" \\ study\nline"} +Inf)"),
      std::string::npos)
      << body;
  EXPECT_NE(body.find(R"(faultline_board_health{arch="x86_64",board="b1",health="ok"} 1)"),
            std::string::npos)
      << body;
}

TEST_F(MetricsTest, ASummaryKeepsNonFiniteFigures) {
  JobRecord job;
  job.id = 7;
  job.benchmark = "swap-in";
  JobReport report;
  ReportComparison c;
  c.row.board = "b1";
  c.row.baseline = "vanilla";
  c.row.candidate = "patched";
  c.row.stats.ratio = std::numeric_limits<double>::quiet_NaN();
  c.row.stats.verdict = stats::Verdict::kInconclusive;
  report.comparisons.push_back(c);
  const JobComparisons summary = SummarizeReport(job, report, 42);
  EXPECT_EQ(summary.study, "swap-in");  // no name: the benchmark
  EXPECT_EQ(summary.job_id, 7);
  EXPECT_EQ(summary.finished_ms, 42);
  ASSERT_EQ(summary.comparisons.size(), 1u);
  EXPECT_TRUE(std::isnan(summary.comparisons[0].ratio));
  EXPECT_EQ(summary.comparisons[0].verdict, "inconclusive");
}

// A finished job's phases are recorded once, whichever controller's pass gets there, and
// observed into the histograms by that pass only.
TEST_F(MetricsTest, AFinishedJobsPhasesAreRecordedAndObservedOnce) {
  JobTimeline t;
  t.job_id = 42;
  t.created_ms = 1'000'000;
  t.finished_ms = 1'400'000;
  t.builds = {{"x86_64", 1'010'000, 1'100'000}};
  t.switches = {{"x86_64", "b1", 1'100'000, 1'130'000}};
  t.runs = {{"x86_64", "b1", 1'130'000, 1'400'000}};
  fake_.metrics.FinishTimeline(t);
  int observed = 0;
  auto observe = [&](const std::vector<ArchPhases>& phases) {
    ++observed;
    metrics_.ObservePhases(phases);
  };
  auto first = RecordPhases(&fake_.metrics, 8, observe);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*RecordPhases(&fake_.metrics, 8, observe), 0) << "recorded: not again";
  EXPECT_EQ(observed, 1);
  auto stored = fake_.metrics.phases(42);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_DOUBLE_EQ((*stored)[0].of(Phase::kBuilding), 90);

  const std::string body = Render();
  EXPECT_THAT(
      Samples(body, "faultline_job_phase_seconds_sum", "phase"),
      ElementsAre(Pair("board_wait", 0.0), Pair("build_queue", 10.0), Pair("building", 90.0),
                  Pair("measuring", 270.0), Pair("switching", 30.0)));
  EXPECT_THAT(Samples(body, "faultline_job_seconds_count", "arch"),
              ElementsAre(Pair("x86_64", 1.0)));
  EXPECT_THAT(Samples(body, "faultline_job_seconds_sum", "arch"),
              ElementsAre(Pair("x86_64", 400.0)));
}

}  // namespace
}  // namespace faultline::controller
