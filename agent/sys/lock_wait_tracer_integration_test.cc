// Real mmap_lock tracepoints sampled with perf_event_open: threads of this process take the
// lock for write only when one of them maps and unmaps (munmap churn); every acquisition is
// paired with its start, nothing is lost. Needs root and a kernel with mmap_lock
// tracepoints; skipped (exit 77) where either is missing.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>
#include <vector>

#include "agent/sys/lock_wait_tracer.h"
#include "agent/sys/perf_counters.h"

namespace faultline::sys {
namespace {

constexpr int kChurnCycles = 500;

struct Traced {
  LockWaitAggregator waits;
  int churn_cycles = 0;
};

// Two faulting threads (touch and MADV_DONTNEED an anonymous region) and, with `churn`, one
// that maps and unmaps a page kChurnCycles times; all traced from before their work starts.
Traced TraceThreads(bool churn) {
  Traced out;
  std::string error;
  auto tracefs = TracefsRoot::Find("/tmp", &error);
  if (!tracefs) {
    ADD_FAILURE() << error;
    return out;
  }
  constexpr size_t kRegion = 4 << 20;
  void* region =
      ::mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(region, MAP_FAILED);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<pid_t> tids(churn ? 3 : 2);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < tids.size(); ++i) {
    threads.emplace_back([&, i] {
      tids[i] = static_cast<pid_t>(::syscall(SYS_gettid));
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      if (i == 2) {  // munmap churn: two write acquisitions per cycle
        for (int c = 0; c < kChurnCycles; ++c) {
          void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (p != MAP_FAILED) ::munmap(p, 4096);
        }
        stop = true;
        return;
      }
      auto* bytes = static_cast<volatile char*>(region);
      const size_t half = kRegion / 2;
      for (int round = 0; round < 200 && !(churn && stop.load()); ++round) {
        for (size_t off = i * half; off < (i + 1) * half; off += 4096) bytes[off] = 1;
        ::madvise(static_cast<char*>(region) + i * half, half, MADV_DONTNEED);
      }
    });
  }
  while (ready.load() < static_cast<int>(tids.size())) std::this_thread::yield();
  auto tracer = LockWaitTracer::Open(tracefs->path(), tids, 64, &error);
  if (!tracer) {
    go = true;
    for (auto& t : threads) t.join();
    ADD_FAILURE() << error;
    return out;
  }
  EXPECT_TRUE(tracer->Enable(&error)) << error;
  go = true;
  for (auto& t : threads) {
    // Drain while they run, as the workload's reader does.
    while (t.joinable()) {
      tracer->Drain(out.waits);
      t.join();
    }
  }
  EXPECT_TRUE(tracer->Disable(&error)) << error;
  tracer->Drain(out.waits);
  ::munmap(region, kRegion);
  out.churn_cycles = churn ? kChurnCycles : 0;
  return out;
}

bool TracepointsHere(std::string* why) {
  auto tracefs = TracefsRoot::Find("/tmp", why);
  if (!tracefs) return false;
  std::string id_error;
  return TracepointId(tracefs->path(), "mmap_lock", "mmap_lock_start_locking", why).has_value();
}

TEST(LockWaitTracer, WriteAcquisitionsAppearOnlyWithMunmapChurnAndEveryOneIsPaired) {
  if (::geteuid() != 0) GTEST_SKIP() << "tracing mmap_lock needs root";
  std::string why;
  if (!TracepointsHere(&why)) GTEST_SKIP() << "no mmap_lock tracepoints: " << why;

  const Traced quiet = TraceThreads(false);
  // Nobody maps or unmaps: a few at most (threads exiting).
  EXPECT_LT(quiet.waits.write().acquisitions, 16u);
  EXPECT_EQ(quiet.waits.lost(), 0u);

  const Traced churn = TraceThreads(true);
  // mmap and munmap each take mmap_lock for write (the kernel may take it more often).
  EXPECT_GE(churn.waits.write().acquisitions, 2u * kChurnCycles);
  EXPECT_LT(churn.waits.write().acquisitions, 16u + 4u * kChurnCycles);
  EXPECT_EQ(churn.waits.lost(), 0u) << "64 pages per thread, drained while running";
  EXPECT_EQ(churn.waits.unpaired(), 0u);
  uint64_t in_decades = 0;
  for (uint64_t n : churn.waits.write().decades) in_decades += n;
  EXPECT_EQ(in_decades, churn.waits.write().acquisitions);
  const auto counters = churn.waits.Counters();
  for (const auto* t : {&quiet, &churn}) {
    for (const auto& [name, value] : t->waits.Counters()) {
      if (value != 0)
        std::cout << (t == &quiet ? "quiet " : "churn ") << name << " " << value << "\n";
    }
  }
  EXPECT_EQ(counters.at("mmap_lock_wait.write.count"),
            static_cast<double>(churn.waits.write().acquisitions));
  EXPECT_GT(counters.at("mmap_lock_wait.write.total_us"), 0.0);
}

}  // namespace
}  // namespace faultline::sys
