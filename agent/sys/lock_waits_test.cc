// mmap_lock waits from tracepoint events: pairing per task, read vs write, the seed's decades.
#include "agent/sys/lock_waits.h"

#include <gtest/gtest.h>

namespace faultline::sys {
namespace {

LockEvent Start(uint32_t tid, uint64_t t, bool write = false) {
  return {LockEvent::Kind::kStartLocking, tid, t, write, true};
}
LockEvent Acquired(uint32_t tid, uint64_t t, bool write = false, bool success = true) {
  return {LockEvent::Kind::kAcquireReturned, tid, t, write, success};
}
constexpr uint64_t kMm = 0xffff888012340000;
constexpr uint64_t kMmapLock = kMm + 184;  // where this build of 6.18 has it
LockEvent StartIn(uint32_t tid, uint64_t t, bool write = false, uint64_t mm = kMm) {
  LockEvent e = Start(tid, t, write);
  e.mm = mm;
  return e;
}
LockEvent Begin(uint32_t tid, uint64_t t, uint64_t lock, uint32_t flags) {
  LockEvent e{LockEvent::Kind::kContentionBegin, tid, t};
  e.lock_addr = lock;
  e.flags = flags;
  return e;
}
LockEvent End(uint32_t tid, uint64_t t, uint64_t lock) {
  LockEvent e{LockEvent::Kind::kContentionEnd, tid, t};
  e.lock_addr = lock;
  return e;
}

TEST(LockWaits, DecadesAreTheSeedsRanges) {
  EXPECT_EQ(WaitDecade(0), 0u);
  EXPECT_EQ(WaitDecade(999), 0u);  // 0.999 us
  EXPECT_EQ(WaitDecade(1000), 1u);
  EXPECT_EQ(WaitDecade(9'999), 1u);
  EXPECT_EQ(WaitDecade(10'000), 2u);
  EXPECT_EQ(WaitDecade(999'999'999), 6u);    // 999,999 us
  EXPECT_EQ(WaitDecade(1'000'000'000), 7u);  // 1 s
  EXPECT_EQ(WaitDecade(UINT64_MAX), 7u);
  EXPECT_EQ(WaitDecadeLabel(0), "[0, 1)");
  EXPECT_EQ(WaitDecadeLabel(3), "[100, 1000)");
  EXPECT_EQ(WaitDecadeLabel(7), "[1000000, +)");
  EXPECT_EQ(WaitDecadeCounter(0), "us_0_1");
  EXPECT_EQ(WaitDecadeCounter(6), "us_100000_1000000");
  EXPECT_EQ(WaitDecadeCounter(7), "us_1000000_inf");
}

TEST(LockWaits, EachTasksStartIsPairedWithItsAcquisition) {
  LockWaitAggregator a;
  // Two tasks interleaved: 1 reads for 500 ns, 2 writes for 25 us, 1 reads again for 3 ms.
  a.Add(Start(1, 1'000));
  a.Add(Start(2, 1'200, true));
  a.Add(Acquired(1, 1'500));
  a.Add(Acquired(2, 26'200, true));
  a.Add(Start(1, 30'000));
  a.Add(Acquired(1, 3'030'000));
  EXPECT_EQ(a.read().acquisitions, 2u);
  EXPECT_EQ(a.read().wait_ns, 500u + 3'000'000u);
  EXPECT_EQ(a.read().decades[0], 1u);
  EXPECT_EQ(a.read().decades[4], 1u);  // [1000, 10000) us
  EXPECT_EQ(a.write().acquisitions, 1u);
  EXPECT_EQ(a.write().wait_ns, 25'000u);
  EXPECT_EQ(a.write().decades[2], 1u);  // [10, 100) us
  EXPECT_EQ(a.unpaired(), 0u);

  const auto c = a.Counters();
  EXPECT_EQ(c.at("mmap_lock_wait.read.count"), 2);
  EXPECT_DOUBLE_EQ(c.at("mmap_lock_wait.read.total_us"), 3000.5);
  EXPECT_EQ(c.at("mmap_lock_wait.read.us_1000_10000"), 1);
  EXPECT_EQ(c.at("mmap_lock_wait.write.us_10_100"), 1);
  EXPECT_EQ(c.at("mmap_lock_wait.write.us_1000000_inf"), 0);
  EXPECT_EQ(c.at("mmap_lock_wait.lost_records"), 0);
  EXPECT_EQ(c.size(), 2u * (4 + kWaitDecades) + 2);
}

TEST(LockWaits, FailedAcquisitionsAreCountedApartAndNothingPairsAcrossAGap) {
  LockWaitAggregator a;
  a.Add(Start(1, 0, true));
  a.Add(Acquired(1, 9'000, true, /*success=*/false));  // mmap_write_lock_killable interrupted
  EXPECT_EQ(a.write().failed, 1u);
  EXPECT_EQ(a.write().acquisitions, 0u);
  EXPECT_EQ(a.write().wait_ns, 0u);

  a.Add(Acquired(3, 10));                            // mmap_read_trylock: no start, no wait
  a.Add(Acquired(3, 20, false, /*success=*/false));  // a trylock that failed
  EXPECT_EQ(a.read().without_start, 2u);
  EXPECT_EQ(a.read().acquisitions, 1u);
  EXPECT_EQ(a.read().failed, 1u);
  EXPECT_EQ(a.read().decades[0], 1u);
  EXPECT_EQ(a.unpaired(), 0u);

  a.Add(Start(4, 20));
  a.Add(Acquired(4, 30, true));  // read start, write answer: not a pair
  EXPECT_EQ(a.unpaired(), 1u);

  a.Add(Start(5, 100));
  a.Lost(7);                // the ring buffer overran: 5's answer may be gone
  a.Add(Acquired(5, 900));  // ...so this is not paired with the start before the gap
  EXPECT_EQ(a.lost(), 7u);
  EXPECT_EQ(a.read().wait_ns, 0u);
  EXPECT_EQ(a.unpaired(), 2u);

  a.Add(Start(6, 1'000));  // still waiting at the end
  EXPECT_EQ(a.unpaired(), 3u);
  EXPECT_EQ(a.Counters().at("mmap_lock_wait.lost_records"), 7);
}

TEST(LockWaits, TrueContentionIsTheRwsemSlowPathOfTheMmapLockBeingTaken) {
  LockWaitAggregator a;
  a.TraceContention();
  // 1 reads: spins on the rwsem's wait_lock (SPIN: not counted), then sleeps 40 us on the
  // mmap_lock itself.
  a.Add(StartIn(1, 1'000));
  a.Add(Begin(1, 1'100, kMmapLock + 8, kLockFlagSpin));
  a.Add(End(1, 1'200, kMmapLock + 8));
  a.Add(Begin(1, 2'000, kMmapLock, kLockFlagRead));
  a.Add(End(1, 42'000, kMmapLock));
  a.Add(Acquired(1, 42'500));
  // 2 writes: contended for 3 ms.
  a.Add(StartIn(2, 5'000, true));
  a.Add(Begin(2, 6'000, kMmapLock, kLockFlagWrite));
  a.Add(End(2, 3'006'000, kMmapLock));
  a.Add(Acquired(2, 3'006'100, true));
  // 3 reads without contention; outside any wait its other locks are not counted, nor is a
  // rwsem of another mm.
  a.Add(Begin(3, 10, 0x1234, kLockFlagRead));
  a.Add(End(3, 20, 0x1234));
  a.Add(StartIn(3, 100));
  a.Add(Begin(3, 200, kMm + 2 * kMmStructSpan, kLockFlagRead));
  a.Add(End(3, 300, kMm + 2 * kMmStructSpan));
  a.Add(Acquired(3, 400));

  EXPECT_EQ(a.read().acquisitions, 2u);
  EXPECT_EQ(a.read().contention.contended, 1u);
  EXPECT_EQ(a.read().contention.wait_ns, 40'000u);
  EXPECT_EQ(a.write().contention.contended, 1u);
  EXPECT_EQ(a.write().contention.max_wait_ns, 3'000'000u);
  const auto c = a.Counters();
  EXPECT_EQ(c.at("mmap_lock_contention.read.count"), 1);
  EXPECT_DOUBLE_EQ(c.at("mmap_lock_contention.read.total_us"), 40);
  EXPECT_DOUBLE_EQ(c.at("mmap_lock_contention.write.max_us"), 3000);
  EXPECT_EQ(c.size(), 2u * (4 + kWaitDecades) + 2 + 6);
}

TEST(LockWaits, NoContentionCountersUnlessTraced) {
  LockWaitAggregator a;
  a.Add(StartIn(1, 0));
  a.Add(Begin(1, 10, kMmapLock, kLockFlagRead));
  a.Add(End(1, 20, kMmapLock));
  a.Add(Acquired(1, 30));
  EXPECT_EQ(a.Counters().count("mmap_lock_contention.read.count"), 0u);
}

}  // namespace
}  // namespace faultline::sys
