// The report a user reads (BuildReport over the in-memory job store): throughput statistics
// and, under each comparison, the counters that explain the change.
#include "services/controller/orchestration/report_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "nlohmann/json.hpp"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/submission.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("10s");
  spec.set_repetitions(8);
  spec.add_kernels("vanilla");
  spec.add_kernels("patched");
  spec.mutable_memcg()->set_memory_max("256M");
  return spec;
}

class ReportBuilderTest : public ::testing::Test {
 protected:
  int64_t SubmitAndFinish(const std::function<void(RunRecord&)>& result) {
    fake_.boards.AddBoard(fakes::VanillaBoard("b1", {"vanilla", "patched"}));
    auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(), "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    const int64_t job = submitted.ok() ? submitted->created.job_id : 0;
    fake_.jobs.EditRuns(job, [&](RunRecord& r) {
      r.state = RunState::kSucceeded;
      r.has_result = true;
      r.board = "b1";
      r.duration_seconds = 10;
      result(r);
    });
    return job;
  }
  FakeStores fake_;
};

TEST_F(ReportBuilderTest, CountersThatExplainTheChangeComeUnderTheComparison) {
  // Patched: 2x the rounds, the same faults per round, 40x fewer failed retries per round.
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    const bool patched = r.kernel == "patched";
    const double rounds = (patched ? 2000 : 1000) + 7 * r.repetition;
    r.rounds = static_cast<uint64_t>(rounds);
    r.throughput = rounds / 10;
    nlohmann::json counters = {
        {"vmstat.pgfault", rounds * 640 + 3 * r.repetition},
        {"vmstat.retry_io_miss", rounds * (patched ? 0.5 : 20) + r.repetition},
        {"memcg.peak_bytes", 1e8},
        {"measured_elapsed_seconds", 10.0},
    };
    if (patched) counters["vmstat.new_debug"] = 4;
    r.counters_json = counters.dump();
  });
  // What GetReport answers: the built report converted at the API's edge.
  auto built = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(built.ok()) << built.status();
  v1::GetReportResponse report;
  ReportToProto(built->job, built->report, &report);
  ASSERT_EQ(report.comparisons_size(), 1);
  const v1::Comparison& c = report.comparisons(0);
  EXPECT_EQ(c.verdict(), "improvement");
  EXPECT_TRUE(c.paired()) << "8 alternating pairs: the paired analysis decides";
  ASSERT_EQ(c.counters_size(), 3) << "memcg.peak_bytes and the elapsed time are not counters";
  const v1::CounterComparison& first = c.counters(0);
  EXPECT_EQ(first.name(), "vmstat.retry_io_miss");
  EXPECT_TRUE(first.significant());
  EXPECT_TRUE(first.paired());
  EXPECT_NEAR(first.ratio(), 0.5 / 20, 0.002);
  EXPECT_LT(first.ci_high(), 0.03);
  EXPECT_NEAR(first.baseline_median(), 20, 0.01);
  // Median over repetitions 1..8: (20 × 1031.5 + 4.5) / 10 s.
  EXPECT_NEAR(first.baseline_per_second(), (20 * 1031.5 + 4.5) / 10, 0.01);
  EXPECT_EQ(c.counters(1).name(), "vmstat.pgfault");
  EXPECT_NEAR(c.counters(1).ratio(), 1.0, 0.01);
  EXPECT_EQ(c.counters(2).name(), "vmstat.new_debug");
  EXPECT_EQ(c.counters(2).only_on(), "candidate");
  EXPECT_FALSE(c.counters(2).significant());
}

}  // namespace
}  // namespace faultline::controller
