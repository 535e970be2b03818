// Change points over series histories held by the in-memory history store.
#include "services/controller/orchestration/history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeHistoryStore;
using ::testing::IsEmpty;

// One series: nightly medians of jobs first_job, first_job + 1, ...
SeriesHistory Series(const std::vector<double>& medians, int64_t first_job = 101,
                     const std::string& kernel = "vanilla") {
  SeriesHistory h;
  h.key.study = "nightly";
  h.key.benchmark = "filemap-thrash";
  h.key.cell = {{"threads", "8"}};
  h.key.arch = "x86_64";
  h.key.board = "b1";
  h.key.kernel = kernel;
  h.medians = medians;
  for (size_t i = 0; i < medians.size(); ++i)
    h.job_ids.push_back(first_job + static_cast<int64_t>(i));
  return h;
}

const std::vector<double> kStep = {100, 101, 99, 100, 102, 98, 50, 51, 49, 50, 52, 48};

TEST(DetectHistoryChangePoints, AClearStepIsOneChangePointAtTheFirstJobAfterIt) {
  FakeHistoryStore store;
  store.AddSeries(Series(kStep));
  auto found = DetectHistoryChangePoints(&store);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, 1);
  auto points = store.ListChangePoints(false);
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 1u);
  const ChangePointRecord& cp = points->front();
  EXPECT_EQ(cp.job_id, 107);           // the first job at 50
  EXPECT_EQ(cp.previous_job_id, 106);  // the last one before it
  EXPECT_EQ(cp.study, "nightly");
  EXPECT_EQ(cp.benchmark, "filemap-thrash");
  EXPECT_EQ(cp.config, "threads=8");
  EXPECT_EQ(cp.arch, "x86_64");
  EXPECT_EQ(cp.board, "b1");
  EXPECT_EQ(cp.kernel, "vanilla");
  EXPECT_DOUBLE_EQ(cp.mean_before, 100);
  EXPECT_DOUBLE_EQ(cp.mean_after, 50);
  EXPECT_DOUBLE_EQ(cp.relative_change, -0.5);
  EXPECT_LE(cp.p_value, 0.001);
  EXPECT_EQ(cp.state, ChangePointState::kOpen);
}

TEST(DetectHistoryChangePoints, AKnownChangePointIsNotRecordedTwice) {
  FakeHistoryStore store;
  store.AddSeries(Series(kStep));
  ASSERT_EQ(*DetectHistoryChangePoints(&store), 1);
  auto again = DetectHistoryChangePoints(&store);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  EXPECT_EQ(store.ListChangePoints(true)->size(), 1u);
}

TEST(DetectHistoryChangePoints, AFlatSeriesHasNone) {
  FakeHistoryStore store;
  store.AddSeries(Series({100, 101, 99, 100, 102, 98, 100, 101, 99, 100, 102, 98}));
  store.AddSeries(Series(std::vector<double>(12, 100.0), 201, "patched"));
  auto found = DetectHistoryChangePoints(&store);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, 0);
  EXPECT_THAT(*store.ListChangePoints(true), IsEmpty());
}

TEST(DetectHistoryChangePoints, EachSeriesIsScannedOnItsOwn) {
  FakeHistoryStore store;
  store.AddSeries(Series(std::vector<double>(12, 100.0), 101, "patched"));
  store.AddSeries(Series(kStep, 301));
  ASSERT_EQ(*DetectHistoryChangePoints(&store), 1);
  auto points = store.ListChangePoints(false);
  ASSERT_EQ(points->size(), 1u);
  EXPECT_EQ(points->front().kernel, "vanilla");
  EXPECT_EQ(points->front().job_id, 307);
}

TEST(DetectHistoryChangePoints, ShortHistoriesAreNotAnalysed) {
  FakeHistoryStore store;
  store.AddSeries(Series({100, 50, 50}));  // fewer than 2 x min_segment (2) points
  auto found = DetectHistoryChangePoints(&store);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, 0);
  EXPECT_EQ(store.series_calls(), 1);
}

}  // namespace
}  // namespace faultline::controller
