// A comparison's call stacks per side (core/profiles.h): a run's folded text per round, and
// the side's stacks averaged over its runs.
#include "services/controller/core/profiles.h"

#include <gtest/gtest.h>

namespace faultline::controller {
namespace {

TEST(FoldedPerRound, EachStackPerRoundAndMalformedLinesSkipped) {
  const auto stacks = FoldedPerRound(
      "[user];exc_page_fault;handle_mm_fault 30\n"
      "[user] 10\n"
      "no count\n"
      "a;b -4\n"
      "a;b 5x\n"
      " 7\n"
      "[user] 10\n",
      10);
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_DOUBLE_EQ(stacks.at("[user];exc_page_fault;handle_mm_fault"), 3.0);
  EXPECT_DOUBLE_EQ(stacks.at("[user]"), 2.0) << "a stack twice adds up";
  EXPECT_TRUE(FoldedPerRound("a 1\n", 0).empty());
}

TEST(MergeStacks, AveragedOverTheRunsMostSampledFirstAndCut) {
  const std::vector<std::map<std::string, double>> runs = {{{"a;b", 4.0}, {"a;c", 1.0}},
                                                           {{"a;b", 2.0}, {"a;d", 6.0}}};
  const auto merged = MergeStacks(runs);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].stack, "a;b");
  EXPECT_DOUBLE_EQ(merged[0].per_round, 3.0);
  EXPECT_EQ(merged[1].stack, "a;d");
  EXPECT_DOUBLE_EQ(merged[1].per_round, 3.0) << "a run without it counts 0";
  EXPECT_DOUBLE_EQ(merged[2].per_round, 0.5);
  EXPECT_EQ(MergeStacks(runs, 1).size(), 1u);
  EXPECT_TRUE(MergeStacks({}).empty());
}

}  // namespace
}  // namespace faultline::controller
