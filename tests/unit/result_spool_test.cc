// The agent's result spool on a real filesystem.
#include "agent/rpc/result_spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace faultline::agent {
namespace {

v1::ReportResultRequest Result(int64_t run, const std::string& attempt, double throughput) {
  v1::ReportResultRequest r;
  r.set_board("b1");
  r.set_run_id(run);
  r.set_attempt_id(attempt);
  r.set_succeeded(true);
  r.mutable_result()->set_throughput_rounds_per_second(throughput);
  return r;
}

class ResultSpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-spool-test.XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(ResultSpoolTest, KeepsResultsUntilRemovedOldestRunFirst) {
  ResultSpool spool(root_ + "/spool");  // created on the first Put
  EXPECT_TRUE(spool.List()->empty());
  auto late = spool.Put(Result(12, "bbbb-2", 20));
  auto early = spool.Put(Result(9, "aaaa-1", 10));
  ASSERT_TRUE(late.ok() && early.ok()) << late.status() << early.status();
  // Another spool over the same directory (the next agent life) sees both, run 9 first.
  ResultSpool next_life(root_ + "/spool");
  auto names = next_life.List();
  ASSERT_TRUE(names.ok());
  ASSERT_EQ(names->size(), 2u);
  EXPECT_EQ((*names)[0], *early);
  auto loaded = next_life.Load((*names)[0]);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->run_id(), 9);
  EXPECT_EQ(loaded->attempt_id(), "aaaa-1");
  EXPECT_EQ(loaded->result().throughput_rounds_per_second(), 10);
  // The same attempt put again replaces its file.
  ASSERT_TRUE(next_life.Put(Result(9, "aaaa-1", 11)).ok());
  EXPECT_EQ(next_life.List()->size(), 2u);
  ASSERT_TRUE(next_life.Remove(*early).ok());
  ASSERT_TRUE(next_life.Remove(*late).ok());
  EXPECT_TRUE(next_life.List()->empty());
  EXPECT_TRUE(next_life.Remove(*late).ok());  // already gone: fine
}

TEST_F(ResultSpoolTest, RefusesResultsWithoutIdsAndSetsAsideGarbage) {
  ResultSpool spool(root_);
  EXPECT_FALSE(spool.Put(Result(0, "a", 1)).ok());
  EXPECT_FALSE(spool.Put(Result(5, "../../etc/passwd", 1)).ok());
  std::ofstream(root_ + "/run-00000000000000000007-x.result") << "not a protobuf \xff\xff";
  auto names = spool.List();
  ASSERT_EQ(names->size(), 1u);
  auto bad = spool.Load((*names)[0]);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(spool.List()->empty());
  EXPECT_TRUE(std::filesystem::exists(root_ + "/run-00000000000000000007-x.result.bad"));
}

}  // namespace
}  // namespace faultline::agent
