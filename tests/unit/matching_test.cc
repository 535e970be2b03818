// MatchParkedBoards: NextWork's rule applied to many parked boards in one pass.
#include "services/controller/core/matching.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace faultline::controller {
namespace {

FreeBoard Board(std::string name, std::vector<std::string> running,
                std::vector<std::string> bootable = {}, std::string arch = "x86_64",
                uint64_t memory = 8ull << 30) {
  return FreeBoard{.name = std::move(name),
                   .arch = std::move(arch),
                   .memory_bytes = memory,
                   .running_kernels = std::move(running),
                   .bootable_kernels = std::move(bootable)};
}

QueuedRun Queued(int64_t id, std::string kernel, std::vector<std::string> boards = {},
                 std::vector<std::string> arches = {}, uint64_t memory = 1ull << 30) {
  return QueuedRun{.id = id,
                   .job_id = 1,
                   .kernel = std::move(kernel),
                   .arches = std::move(arches),
                   .boards = std::move(boards),
                   .memory_max = memory};
}

TEST(MatchParkedBoards, BoardsTakeRunsInQueueOrderInTheOrderTheyAsked) {
  const std::vector<FreeBoard> boards = {Board("a", {"v"}), Board("b", {"v"}), Board("c", {"v"})};
  const std::vector<QueuedRun> runs = {Queued(1, "v"), Queued(2, "v")};
  const auto steps = MatchParkedBoards(boards, runs);
  ASSERT_EQ(steps.size(), 2u);  // the third board gets nothing
  EXPECT_EQ(steps[0].board, 0u);
  EXPECT_EQ(steps[0].run, 0u);
  EXPECT_EQ(steps[1].board, 1u);
  EXPECT_EQ(steps[1].run, 1u);
  EXPECT_FALSE(steps[0].switch_kernel || steps[1].switch_kernel);
}

TEST(MatchParkedBoards, FiltersDecideWhoMayServe) {
  const std::vector<FreeBoard> boards = {Board("small", {"v"}, {}, "x86_64", 1ull << 30),
                                         Board("arm", {"v"}, {}, "aarch64"), Board("pinned", {"v"}),
                                         Board("other", {"patched"})};
  const std::vector<QueuedRun> runs = {
      Queued(1, "v", {"pinned"}),           // only the board it names
      Queued(2, "v", {}, {"aarch64"}),      // only aarch64
      Queued(3, "v", {}, {}, 2ull << 30),   // needs 2 GiB
      Queued(4, "v", {}, {}, 1ull << 30)};  // anyone running v with 1 GiB
  const auto steps = MatchParkedBoards(boards, runs);
  std::map<std::string, int64_t> got;
  for (const auto& s : steps) {
    EXPECT_FALSE(s.switch_kernel);
    got[boards[s.board].name] = runs[s.run].id;
  }
  EXPECT_EQ(got, (std::map<std::string, int64_t>{{"small", 4}, {"arm", 2}, {"pinned", 1}}));
}

TEST(MatchParkedBoards, TheHeadNeedingAnotherKernelOrdersASwitchAndStaysQueued) {
  // Board a runs v and can boot p; the head is a p run, so a switches (as NextWork does,
  // even though a v run follows). Board b runs p and claims that same run.
  const std::vector<FreeBoard> boards = {Board("a", {"v"}, {"p"}), Board("b", {"p"}),
                                         Board("c", {"v"})};
  const std::vector<QueuedRun> runs = {Queued(1, "p"), Queued(2, "v")};
  const auto steps = MatchParkedBoards(boards, runs);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].board, 0u);
  EXPECT_TRUE(steps[0].switch_kernel);
  EXPECT_EQ(runs[steps[0].run].id, 1);
  EXPECT_EQ(steps[1].board, 1u);
  EXPECT_FALSE(steps[1].switch_kernel);
  EXPECT_EQ(runs[steps[1].run].id, 1);
  EXPECT_EQ(steps[2].board, 2u);
  EXPECT_EQ(runs[steps[2].run].id, 2);
}

TEST(MatchParkedBoards, NoRunIsClaimedTwiceAtScale) {
  std::vector<FreeBoard> boards;
  std::vector<QueuedRun> runs;
  for (int i = 0; i < 1000; ++i) {
    boards.push_back(Board("b" + std::to_string(i), {i % 2 ? "v" : "p"}, {}, i % 3 ? "x" : "y"));
  }
  for (int i = 0; i < 700; ++i) {
    runs.push_back(Queued(i, i % 2 ? "v" : "p", {},
                          i % 5 ? std::vector<std::string>{} : std::vector<std::string>{"y"}));
  }
  const auto steps = MatchParkedBoards(boards, runs);
  std::set<size_t> claimed;
  std::set<size_t> served;
  for (const auto& s : steps) {
    EXPECT_FALSE(s.switch_kernel);
    EXPECT_TRUE(MayServe(boards[s.board], runs[s.run]));
    EXPECT_TRUE(claimed.insert(s.run).second) << "run " << s.run << " claimed twice";
    EXPECT_TRUE(served.insert(s.board).second) << "board " << s.board << " served twice";
  }
  EXPECT_EQ(claimed.size(), runs.size());  // 1000 boards of both kernels take all 700
}

}  // namespace
}  // namespace faultline::controller
