// The agent re-checks every assignment against its own board before running it.
#include "agent/assignment_check.h"

#include <gtest/gtest.h>

namespace faultline::agent {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
const BoardCapacity kBoard{8 * kGiB, 100 * kGiB};

AssignmentFacts Thrash(std::map<std::string, std::string> params) {
  return {"filemap-thrash", std::move(params), 10, 256ull << 20};
}

TEST(CheckAssignment, AcceptsWhatFitsTheBoard) {
  EXPECT_EQ(CheckAssignment(Thrash({{"threads", "16"}, {"file_size", "16M"}}), kBoard), "");
  EXPECT_EQ(CheckAssignment({"swap-in", {{"region_size", "1G"}}, 30, 2 * kGiB}, kBoard), "");
  EXPECT_EQ(
      CheckAssignment({"shmem-folio-fault", {{"preset", "finish-fault-shmem"}}, 10, 256ull << 20},
                      kBoard),
      "");
}

TEST(CheckAssignment, RefusesNamingTheFieldAndTheLimit) {
  EXPECT_EQ(CheckAssignment(Thrash({{"threads", "5000"}}), kBoard),
            "params.threads: must be between 1 and 4096, got 5000");
  EXPECT_EQ(CheckAssignment(Thrash({{"threds", "5"}}), kBoard).rfind("params.threds: ", 0), 0u);
  EXPECT_EQ(CheckAssignment({"fork-bomb", {}, 10, 268435456}, kBoard)
                .rfind("benchmark: unknown 'fork-bomb'", 0),
            0u);
  EXPECT_EQ(CheckAssignment({"filemap-thrash", {}, 5 * 3600, 268435456}, kBoard),
            "duration_seconds: must be between 1 and 14400, got 18000");
  EXPECT_EQ(
      CheckAssignment({"filemap-thrash", {}, 0, 268435456}, kBoard).rfind("duration_seconds", 0),
      0u);
  EXPECT_EQ(CheckAssignment({"filemap-thrash", {}, 10, 0}, kBoard),
            "memcg.memory_max: missing (a controller older than this agent sends the limits as "
            "text: upgrade the controller)");
  EXPECT_EQ(CheckAssignment({"filemap-thrash", {}, 10, 1 << 20}, kBoard),
            "memcg.memory_max: must be between 16M and the board's memory (8G), got 1M");
  EXPECT_EQ(
      CheckAssignment({"filemap-thrash", {}, 10, 16 * kGiB}, kBoard).rfind("memcg.memory_max", 0),
      0u);
  EXPECT_EQ(CheckAssignment({"swap-in", {{"region_size", "16G"}}, 10, 268435456}, kBoard),
            "params.region_size = 16G exceeds the board's memory (8G)");
  EXPECT_EQ(
      CheckAssignment(
          {"mmap-writer-pressure", {{"writers", "1024"}, {"writer_map_size", "1G"}}, 10, 268435456},
          kBoard),
      "params.writers x writer_map_size = 1T exceeds the board's memory (8G)");
  EXPECT_EQ(
      CheckAssignment(
          {"shmem-folio-fault", {{"threads", "64"}, {"shmem_size", "1G"}}, 10, 268435456}, kBoard),
      "params.threads x shmem_size = 64G exceeds the board's memory (8G)");
  // 4096 threads x 4G files = 16T of files on a 100G disk.
  EXPECT_EQ(
      CheckAssignment(Thrash({{"threads", "4096"}, {"file_size", "4G"}}), kBoard),
      "params.file_size x (threads + munmap_threads) = 16T exceeds the free space of the work "
      "directory (100G)");
}

TEST(CheckAssignment, EventsAreCheckedForSyntaxNotExistence) {
  AssignmentFacts a = Thrash({});
  a.events = {"mmap_lock:mmap_lock_start_locking", "no_such_system:event", "sw:page-faults"};
  EXPECT_EQ(CheckAssignment(a, kBoard), "");  // the workload finds out on this kernel
  a.events = {"sw:page-faults", "sw:pagefaults"};
  EXPECT_EQ(CheckAssignment(a, kBoard).rfind(
                "run_options.events[1]: 'sw:pagefaults': unknown software event", 0),
            0u)
      << CheckAssignment(a, kBoard);
  a.events = {"x:y", "x:y"};
  EXPECT_EQ(CheckAssignment(a, kBoard), "run_options.events[1]: 'x:y': listed twice");
  a.events.assign(17, "x:y");
  EXPECT_EQ(CheckAssignment(a, kBoard), "run_options.events: at most 16 events, got 17");
}

}  // namespace
}  // namespace faultline::agent
