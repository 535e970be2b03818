// The profile's counters and folded text from a run's folded stacks (profile_sampling.h).
#include "agent/workloads/profile_sampling.h"
#include "agent/workloads/periodic_drain.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace faultline::workloads {
namespace {

// A run's folded stacks as counters: per kernel frame (once per stack, recursion or not),
// the leaf as self, user-only samples apart; frames under 0.1% left out.
TEST(ProfileCounters, FramesTotalAndSelfFromTheFoldedStacks) {
  std::map<std::string, uint64_t> folded = {
      {"[user]", 1200},
      {"[user];asm_exc_page_fault;handle_mm_fault;filemap_fault", 60},
      {"[user];asm_exc_page_fault;handle_mm_fault", 30},
      {"entry_SYSCALL_64;f;g;f", 9},
      {"entry_SYSCALL_64;uncommon", 2},
      {"entry_SYSCALL_64;rare", 1}};
  std::map<std::string, double> c;
  ProfileCounters(folded, 4, &c);
  EXPECT_EQ(c["profile.samples"], 1302);
  EXPECT_EQ(c["profile.lost"], 4);
  EXPECT_EQ(c["profile.user"], 1200);
  EXPECT_EQ(c["profile.total.handle_mm_fault"], 90);
  EXPECT_EQ(c["profile.self.handle_mm_fault"], 30);
  EXPECT_EQ(c["profile.self.filemap_fault"], 60);
  EXPECT_EQ(c["profile.total.f"], 9) << "once per stack";
  EXPECT_EQ(c["profile.self.f"], 9);
  EXPECT_EQ(c["profile.total.uncommon"], 2) << "0.15% of the samples: kept";
  EXPECT_EQ(c.count("profile.total.rare"), 0u) << "0.1% of 1,302 samples is 1.3: under it";
  EXPECT_EQ(c.count("profile.self.asm_exc_page_fault"), 0u) << "never a leaf";
  EXPECT_EQ(FoldedText(folded, 1 << 20)
                .rfind("[user] 1200\n[user];asm_exc_page_fault;handle_mm_fault;filemap_fault 60\n"
                       "[user];asm_exc_page_fault;handle_mm_fault 30\n",
                       0),
            0u)
      << "most samples first";
  EXPECT_EQ(FoldedText(folded, 20), "[user] 1200\n") << "whole lines within the bound";
}

// The user leaf named (sys/user_symbols.h): a frame like the kernel's, its samples without
// a kernel part still counted as user-mode samples.
TEST(ProfileCounters, NamedUserLeavesAreFrames) {
  std::map<std::string, uint64_t> folded = {
      {"faultline-workload:Touch", 500},
      {"faultline-workload:Touch;asm_exc_page_fault;handle_mm_fault", 40},
      {"libc.so.6:__munmap;entry_SYSCALL_64;__x64_sys_munmap", 20},
      {"[user]", 100},
      {"[user];asm_exc_page_fault;handle_mm_fault", 10}};
  std::map<std::string, double> c;
  ProfileCounters(folded, 0, &c);
  EXPECT_EQ(c["profile.samples"], 670);
  EXPECT_EQ(c["profile.user"], 600) << "named or not, a user frame alone";
  EXPECT_EQ(c["profile.total.faultline-workload:Touch"], 540);
  EXPECT_EQ(c["profile.self.faultline-workload:Touch"], 500);
  EXPECT_EQ(c["profile.total.libc.so.6:__munmap"], 20);
  EXPECT_EQ(c.count("profile.self.libc.so.6:__munmap"), 0u) << "never a leaf";
  EXPECT_EQ(c["profile.total.handle_mm_fault"], 50);
  EXPECT_EQ(c.count("profile.total.[user]"), 0u) << "an unnamed user part is no frame";
}

}  // namespace
}  // namespace faultline::workloads

namespace faultline::workloads {
namespace {

// The drain runs at once, then every period; Stop() does not wait out the period.
TEST(PeriodicDrain, DrainsAtOnceAndStopsWithoutWaitingThePeriod) {
  std::atomic<int> drains{0};
  PeriodicDrain reader;
  reader.Start(std::chrono::hours(1), [&] { ++drains; });
  while (drains.load() == 0) std::this_thread::yield();
  reader.Stop();  // a wait of the period would time the test out
  const int after_stop = drains.load();
  EXPECT_EQ(after_stop, 1);
  reader.Stop();  // again: nothing
  reader.Start(std::chrono::milliseconds(0), [&] { ++drains; });
  while (drains.load() < after_stop + 3) std::this_thread::yield();
  reader.Stop();
  EXPECT_GE(drains.load(), after_stop + 3);
}

}  // namespace
}  // namespace faultline::workloads
