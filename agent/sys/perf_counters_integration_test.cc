// Real perf_event_open: tracepoint and software counters over this process's threads. Needs
// root (or CAP_PERFMON and a mounted tracefs); skipped only where perf events are not
// available to this process at all.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <utility>
#include <vector>

#include "agent/sys/perf_counters.h"

namespace faultline::sys {
namespace {

class ScratchDir {
 public:
  ScratchDir() {
    char pattern[] = "/tmp/faultline-perf-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::string path_;
};

bool MountedUnder(const std::string& dir) {
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(" " + dir) != std::string::npos) return true;
  }
  return false;
}

// Skips where perf events are unavailable to this process (no perf support, or an
// unprivileged user under a strict perf_event_paranoid); root on a perf kernel never skips.
#define SKIP_WITHOUT_PERF_EVENTS()                                                       \
  do {                                                                                   \
    PerfEventsError probe_error;                                                         \
    if (!ResolvePerfEvents({"sw:task-clock"}, "", &probe_error)) {                       \
      if (::geteuid() != 0 || probe_error.message.find("ENOSYS") != std::string::npos || \
          probe_error.message.find("without perf events") != std::string::npos) {        \
        GTEST_SKIP() << "perf_event_open unavailable here: " << probe_error.message;     \
      }                                                                                  \
      FAIL() << "perf_event_open fails as root: " << probe_error.message;                \
    }                                                                                    \
  } while (0)

// Resolves the events (tracefs mounted under a scratch directory if it must be), checking
// that nothing of the mount is left behind.
ResolvedPerfEvents Resolve(const std::vector<std::string>& names) {
  ScratchDir scratch;
  PerfEventsError error;
  auto resolved = ResolvePerfEvents(names, scratch.path(), &error);
  EXPECT_TRUE(resolved) << error.message;
  EXPECT_TRUE(scratch.empty()) << "tracefs mount point left in " << scratch.path();
  EXPECT_FALSE(MountedUnder(scratch.path())) << "tracefs still mounted under " << scratch.path();
  return resolved ? *resolved : ResolvedPerfEvents{};
}

// Counts `events` while this thread writes one byte to each of `pages` fresh anonymous
// pages (no THP: one fault per page).
void CountWhileTouching(const std::vector<PerfEventName>& events, size_t pages,
                        std::vector<PerfCount>* counts) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* region =
      ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  ::madvise(region, pages * page, MADV_NOHUGEPAGE);
  std::string error;
  auto session = PerfCounterSession::Open(events, &error);
  ASSERT_TRUE(session) << error;
  ASSERT_TRUE(session->Enable(&error)) << error;
  auto* bytes = static_cast<volatile char*>(region);
  for (size_t i = 0; i < pages; ++i) bytes[i * page] = 1;
  ASSERT_TRUE(session->Disable(&error)) << error;
  ::munmap(region, pages * page);
  auto read = session->Read(&error);
  ASSERT_TRUE(read) << error;
  ASSERT_EQ(read->size(), events.size());
  *counts = std::move(*read);
}

// A thread that waits for `go`, maps and unmaps a page `pairs` times, reports `done` and
// waits for `release` (so its counters are read while it still exists).
class MmapChurnThread {
 public:
  explicit MmapChurnThread(int pairs)
      : thread_([this, pairs] {
          while (!go_.load()) std::this_thread::yield();
          const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
          for (int i = 0; i < pairs; ++i) {
            void* p = ::mmap(nullptr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) {
              failed_ = true;
              break;
            }
            ::munmap(p, page);
          }
          done_.store(true);
          while (!release_.load()) std::this_thread::yield();
        }) {}
  ~MmapChurnThread() {
    go_.store(true);
    release_.store(true);
    thread_.join();
  }
  void Go() { go_.store(true); }
  void WaitDone() {
    while (!done_.load()) std::this_thread::yield();
  }
  bool failed() const { return failed_; }

 private:
  std::atomic<bool> go_{false}, done_{false}, release_{false};
  bool failed_ = false;
  std::thread thread_;
};

TEST(PerfCounters, MmapLockStartLockingCountsEveryMmapAndMunmap) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"mmap_lock:mmap_lock_start_locking"});
  ASSERT_EQ(resolved.events.size(), 1u);
  EXPECT_GT(resolved.events[0].config, 0u);  // the tracepoint id

  MmapChurnThread churn(1000);
  std::string error;
  auto session = PerfCounterSession::Open(resolved.events, &error);
  ASSERT_TRUE(session) << error;
  EXPECT_GE(session->threads(), 2u);  // this thread and the churn thread
  ASSERT_TRUE(session->Enable(&error)) << error;
  churn.Go();
  churn.WaitDone();
  ASSERT_TRUE(session->Disable(&error)) << error;
  auto counts = session->Read(&error);
  ASSERT_TRUE(counts) << error;
  ASSERT_EQ(counts->size(), 1u);
  const PerfCount& c = counts->front();
  EXPECT_FALSE(churn.failed());
  std::cout << "mmap_lock_start_locking over 1,000 mmap+munmap pairs: " << c.value << " ("
            << c.threads << " threads)\n";
  EXPECT_EQ(c.event, "mmap_lock:mmap_lock_start_locking");
  // mmap and munmap each take mmap_lock for write at least once.
  EXPECT_GE(c.value, 2000) << "threads=" << c.threads;
  EXPECT_LT(c.value, 20000);  // not the whole machine's
  EXPECT_FALSE(c.scaled);
}

TEST(PerfCounters, CountsEveryThreadOfTheProcess) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"mmap_lock:mmap_lock_start_locking", "sw:context-switches"});
  ASSERT_EQ(resolved.events.size(), 2u);
  MmapChurnThread a(300), b(300), c(300);
  std::string error;
  auto session = PerfCounterSession::Open(resolved.events, &error);
  ASSERT_TRUE(session) << error;
  EXPECT_GE(session->threads(), 4u);
  ASSERT_TRUE(session->Enable(&error)) << error;
  a.Go();
  b.Go();
  c.Go();
  a.WaitDone();
  b.WaitDone();
  c.WaitDone();
  ASSERT_TRUE(session->Disable(&error)) << error;
  auto counts = session->Read(&error);
  ASSERT_TRUE(counts) << error;
  EXPECT_GE((*counts)[0].value, 3 * 2 * 300);
  EXPECT_EQ((*counts)[1].event, "sw:context-switches");
}

TEST(PerfCounters, PageFaultsCountTouchedPages) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"sw:page-faults", "sw:minor-faults"});
  ASSERT_EQ(resolved.events.size(), 2u);
  constexpr size_t kPages = 2048;
  std::vector<PerfCount> counts;
  ASSERT_NO_FATAL_FAILURE(CountWhileTouching(resolved.events, kPages, &counts));
  EXPECT_GE(counts[0].value, kPages);
  EXPECT_LT(counts[0].value, 4 * kPages);
  EXPECT_GE(counts[1].value, kPages);
}

// calls:FUNC needs the kprobe PMU (CONFIG_KPROBE_EVENTS) and a kernel that lets root place
// kprobes (not locked down): elsewhere the event is unsupported, never an error.
TEST(PerfCounters, CallsOfHandleMmFaultCountTouchedPages) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"calls:handle_mm_fault", "sw:page-faults"});
  ASSERT_FALSE(resolved.events.empty());
  EXPECT_EQ(resolved.events.back().text, "sw:page-faults");
  if (resolved.events.size() == 1) {
    ASSERT_EQ(resolved.unsupported.count("calls:handle_mm_fault"), 1u);
    const std::string why = resolved.unsupported["calls:handle_mm_fault"];
    EXPECT_TRUE(why.find("kprobe") != std::string::npos) << why;
    GTEST_SKIP() << "no kprobes on this kernel: " << why;
  }
  constexpr size_t kPages = 1024;
  std::vector<PerfCount> counts;
  ASSERT_NO_FATAL_FAILURE(CountWhileTouching(resolved.events, kPages, &counts));
  // Every user fault goes through handle_mm_fault once (twice when it retries).
  EXPECT_GE(counts[0].value, kPages);
  EXPECT_GE(counts[0].value, counts[1].value);
  EXPECT_LT(counts[0].value, 4 * kPages);
}

TEST(PerfCounters, CallsOfAMissingFunctionAreUnsupportedNotFatal) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"calls:faultline_no_such_function", "sw:page-faults"});
  ASSERT_EQ(resolved.events.size(), 1u);
  EXPECT_EQ(resolved.events[0].text, "sw:page-faults");
  ASSERT_EQ(resolved.unsupported.count("calls:faultline_no_such_function"), 1u);
  const std::string why = resolved.unsupported["calls:faultline_no_such_function"];
  // Either the kernel has no kprobe PMU at all or it has no such function.
  EXPECT_TRUE(why.find("no kprobe PMU") != std::string::npos ||
              why.find("no kprobe on kernel function 'faultline_no_such_function'") !=
                  std::string::npos)
      << why;
}

TEST(PerfCounters, DisabledCountersCountNothing) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"mmap_lock:mmap_lock_start_locking"});
  ASSERT_EQ(resolved.events.size(), 1u);
  MmapChurnThread churn(500);
  std::string error;
  auto session = PerfCounterSession::Open(resolved.events, &error);
  ASSERT_TRUE(session) << error;
  churn.Go();  // never enabled
  churn.WaitDone();
  auto counts = session->Read(&error);
  ASSERT_TRUE(counts) << error;
  EXPECT_EQ(counts->front().value, 0);
}

TEST(PerfCounters, MissingTracepointIsRefusedWithTheReason) {
  SKIP_WITHOUT_PERF_EVENTS();
  ScratchDir scratch;
  PerfEventsError error;
  EXPECT_FALSE(
      ResolvePerfEvents({"sw:page-faults", "mmap_lock:no_such_event"}, scratch.path(), &error));
  EXPECT_TRUE(error.usage);
  EXPECT_NE(error.message.find("'mmap_lock:no_such_event': no tracepoint "
                               "mmap_lock:no_such_event on this kernel (mmap_lock has: "),
            std::string::npos)
      << error.message;
  EXPECT_FALSE(ResolvePerfEvents({"no_such_system:event"}, scratch.path(), &error));
  EXPECT_TRUE(error.usage);
  EXPECT_NE(error.message.find("no tracepoint system 'no_such_system' on this kernel"),
            std::string::npos)
      << error.message;
  EXPECT_FALSE(ResolvePerfEvents({"sw:faults"}, scratch.path(), &error));
  EXPECT_TRUE(error.usage);
  EXPECT_NE(error.message.find("'sw:faults': unknown software event"), std::string::npos);
  EXPECT_TRUE(scratch.empty());
}

TEST(PerfCounters, HardwareEventsWithoutAPmuAreUnsupportedNotFatal) {
  SKIP_WITHOUT_PERF_EVENTS();
  auto resolved = Resolve({"hw:cycles", "sw:page-faults"});
  // sw:page-faults always resolves; hw:cycles either counts (a PMU) or is reported.
  ASSERT_FALSE(resolved.events.empty());
  EXPECT_EQ(resolved.events.back().text, "sw:page-faults");
  if (resolved.events.size() == 1) {
    ASSERT_EQ(resolved.unsupported.count("hw:cycles"), 1u);
    EXPECT_NE(resolved.unsupported["hw:cycles"].find("no hardware PMU"), std::string::npos)
        << resolved.unsupported["hw:cycles"];
    std::cout << "hw:cycles unsupported here: " << resolved.unsupported["hw:cycles"] << "\n";
  } else {
    EXPECT_TRUE(resolved.unsupported.empty());
    std::string error;
    auto session = PerfCounterSession::Open(resolved.events, &error);
    ASSERT_TRUE(session) << error;
    ASSERT_TRUE(session->Enable(&error)) << error;
    volatile uint64_t spin = 0;
    for (int i = 0; i < 1000000; ++i) spin = spin + static_cast<uint64_t>(i);
    ASSERT_TRUE(session->Disable(&error)) << error;
    auto counts = session->Read(&error);
    ASSERT_TRUE(counts) << error;
    EXPECT_GT(counts->front().value, 0);
  }
}

}  // namespace
}  // namespace faultline::sys
