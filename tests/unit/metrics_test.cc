// /metrics over the in-memory stores: the counters that changed significantly in a finished
// comparison are exported beside its throughput ratio, compared once per job version.
#include "services/controller/api/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "nlohmann/json.hpp"
#include "services/controller/api/submission.h"
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
  void Export(int64_t finished_ms) {
    MetricsSnapshot snapshot;
    snapshot.comparison_jobs.push_back({job_, finished_ms});
    fake_.metrics.SetSnapshot(snapshot);
  }
  std::string Render() { return metrics_.Render(&fake_.metrics, &fake_.boards, &fake_.jobs); }

  FakeStores fake_;
  ControllerMetrics metrics_;
  int64_t job_ = 0;
};

TEST_F(MetricsTest, SignificantCounterChangesBesideTheThroughputRatio) {
  Export(1000);
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

TEST_F(MetricsTest, AFinishedJobIsComparedOncePerVersion) {
  Export(1000);
  ASSERT_EQ(Samples(Render(), "faultline_comparison_counters_changed", "candidate")["patched"],
            1.0);
  // The runs change under the same job version: the scrape reuses the comparison it made.
  FinishRuns(1.0);
  EXPECT_EQ(Samples(Render(), "faultline_comparison_counters_changed", "candidate")["patched"],
            1.0);
  // The job finished again (a new version): compared again, nothing changed any more.
  Export(2000);
  const std::string body = Render();
  EXPECT_EQ(Samples(body, "faultline_comparison_counters_changed", "candidate")["patched"], 0.0);
  EXPECT_THAT(Samples(body, "faultline_comparison_counters_ratio", "counter"), IsEmpty());
}

TEST_F(MetricsTest, AJobNoLongerExportedLeavesNoCounterSeries) {
  Export(1000);
  ASSERT_FALSE(Samples(Render(), "faultline_comparison_counters_ratio", "counter").empty());
  fake_.metrics.SetSnapshot(MetricsSnapshot{});
  const std::string body = Render();
  EXPECT_THAT(Samples(body, "faultline_comparison_counters_ratio", "counter"), IsEmpty());
  EXPECT_THAT(Samples(body, "faultline_comparison_counters_changed", "candidate"), IsEmpty());
}

}  // namespace
}  // namespace faultline::controller
