#include "agent/sys/perf_counters.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace faultline::sys {
namespace {

std::string ParseError(const std::string& text) {
  std::string error;
  EXPECT_FALSE(ParseEventName(text, &error)) << text;
  return error;
}

TEST(ParseEventName, Tracepoint) {
  std::string error;
  auto event = ParseEventName("mmap_lock:mmap_lock_start_locking", &error);
  ASSERT_TRUE(event) << error;
  EXPECT_EQ(event->kind, PerfEventKind::kTracepoint);
  EXPECT_EQ(event->type, static_cast<uint32_t>(PERF_TYPE_TRACEPOINT));
  EXPECT_EQ(event->system, "mmap_lock");
  EXPECT_EQ(event->name, "mmap_lock_start_locking");
  EXPECT_EQ(event->text, "mmap_lock:mmap_lock_start_locking");
}

TEST(ParseEventName, SoftwareAndHardware) {
  std::string error;
  auto faults = ParseEventName("sw:page-faults", &error);
  ASSERT_TRUE(faults) << error;
  EXPECT_EQ(faults->kind, PerfEventKind::kSoftware);
  EXPECT_EQ(faults->type, static_cast<uint32_t>(PERF_TYPE_SOFTWARE));
  EXPECT_EQ(faults->config, static_cast<uint64_t>(PERF_COUNT_SW_PAGE_FAULTS));
  auto clock = ParseEventName("sw:task-clock", &error);
  ASSERT_TRUE(clock) << error;
  EXPECT_EQ(clock->config, static_cast<uint64_t>(PERF_COUNT_SW_TASK_CLOCK));
  auto cycles = ParseEventName("hw:cycles", &error);
  ASSERT_TRUE(cycles) << error;
  EXPECT_EQ(cycles->kind, PerfEventKind::kHardware);
  EXPECT_EQ(cycles->type, static_cast<uint32_t>(PERF_TYPE_HARDWARE));
  EXPECT_EQ(cycles->config, static_cast<uint64_t>(PERF_COUNT_HW_CPU_CYCLES));
}

TEST(ParseEventName, CallsOfAKernelFunction) {
  std::string error;
  auto calls = ParseEventName("calls:lock_vma_under_rcu", &error);
  ASSERT_TRUE(calls) << error;
  EXPECT_EQ(calls->kind, PerfEventKind::kCalls);
  EXPECT_EQ(calls->system, "calls");
  EXPECT_EQ(calls->name, "lock_vma_under_rcu");
  EXPECT_EQ(calls->type, 0u) << "the kprobe PMU's type is only known on the board";
  for (const char* name : {"calls:folio_add_lru.part.0", "calls:__x64_sys_munmap", "calls:A1"}) {
    EXPECT_TRUE(ParseEventName(name, &error)) << name << ": " << error;
  }
  for (const char* bad : {"calls:", "calls:1st", "calls:.part", "calls:a-b", "calls:a b",
                          "calls:a:b", "calls:a+0x10"}) {
    EXPECT_NE(ParseError(bad).find("malformed kernel function name (want calls:FUNCTION"),
              std::string::npos)
        << bad << ": " << ParseError(bad);
  }
}

TEST(ParseEventName, EveryKnownNameHasAPerfConfig) {
  for (const auto& name : SoftwarePerfEventNames()) {
    std::string error;
    EXPECT_TRUE(ParseEventName("sw:" + name, &error)) << error;
  }
  for (const auto& name : HardwarePerfEventNames()) {
    std::string error;
    EXPECT_TRUE(ParseEventName("hw:" + name, &error)) << error;
  }
}

TEST(ParseEventName, ErrorsNameTheEventAndTheReason) {
  EXPECT_EQ(ParseError("sw:page_faults"),
            "'sw:page_faults': unknown software event 'page_faults' (sw: one of page-faults, "
            "minor-faults, major-faults, context-switches, cpu-migrations, task-clock)");
  EXPECT_EQ(ParseError("hw:stalls"),
            "'hw:stalls': unknown hardware event 'stalls' (hw: one of cycles, instructions, "
            "cache-misses, branch-misses)");
  EXPECT_EQ(ParseError("page-faults"),
            "'page-faults': malformed event name (want SYSTEM:NAME for a tracepoint, sw:NAME, "
            "hw:NAME or calls:FUNCTION)");
  for (const char* bad : {"mmap_lock:", ":x", "MMAP_LOCK:start", "a:b:c", "a b:c", "a:b-c"}) {
    EXPECT_NE(ParseError(bad).find("malformed tracepoint name (want SYSTEM:NAME, both "
                                   "[a-z0-9_]+"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(ParseError("").find("empty event name"), std::string::npos);
  EXPECT_NE(ParseError(std::string(200, 'a') + ":b").find("longer than 128 characters"),
            std::string::npos);
  // A long name is cut in the message.
  EXPECT_EQ(ParseError(std::string(200, 'a') + ":b").substr(0, 71),
            "'" + std::string(64, 'a') + "...': ");
}

TEST(CheckPerfEventList, LimitsDuplicatesAndIndex) {
  size_t index = 99;
  std::string why;
  EXPECT_TRUE(CheckPerfEventList({}, &index, &why));
  EXPECT_TRUE(CheckPerfEventList({"sw:page-faults", "exceptions:page_fault_user"}, &index, &why));
  EXPECT_TRUE(CheckPerfEventList({"calls:handle_mm_fault", "sw:page-faults"}, &index, &why)) << why;
  EXPECT_FALSE(
      CheckPerfEventList({"calls:handle_mm_fault", "calls:handle_mm_fault"}, &index, &why));
  EXPECT_EQ(index, 1u);
  EXPECT_FALSE(CheckPerfEventList({"sw:page-faults", "x", "sw:page-faults"}, &index, &why));
  EXPECT_EQ(index, 1u);
  EXPECT_FALSE(CheckPerfEventList({"sw:page-faults", "a:b", "sw:page-faults"}, &index, &why));
  EXPECT_EQ(index, 2u);
  EXPECT_EQ(why, "'sw:page-faults': listed twice");
  std::vector<std::string> many;
  for (int i = 0; i < 17; ++i) many.push_back("sys:event_" + std::to_string(i));
  EXPECT_FALSE(CheckPerfEventList(many, &index, &why));
  EXPECT_EQ(index, 17u);
  EXPECT_EQ(why, "at most 16 events, got 17");
  many.pop_back();
  EXPECT_TRUE(CheckPerfEventList(many, &index, &why)) << why;
}

class FakeTracefs : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/faultline-tracefs-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
    AddEvent("mmap_lock", "mmap_lock_start_locking", "412\n");
    AddEvent("mmap_lock", "mmap_lock_released", "413\n");
    AddEvent("exceptions", "page_fault_user", "77\n");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void AddEvent(const std::string& system, const std::string& name, const std::string& id) {
    std::filesystem::create_directories(root_ + "/events/" + system + "/" + name);
    std::ofstream(root_ + "/events/" + system + "/" + name + "/id") << id;
  }
  std::string root_;
};

TEST_F(FakeTracefs, ReadsTheId) {
  std::string error;
  EXPECT_EQ(TracepointId(root_, "mmap_lock", "mmap_lock_start_locking", &error), 412u) << error;
  EXPECT_EQ(TracepointId(root_, "exceptions", "page_fault_user", &error), 77u) << error;
}

TEST_F(FakeTracefs, MissingSystemOrEventSaysWhatExists) {
  std::string error;
  EXPECT_FALSE(TracepointId(root_, "pagemap", "mm_lru_insertion", &error));
  EXPECT_EQ(error,
            "no tracepoint system 'pagemap' on this kernel (no " + root_ + "/events/pagemap)");
  EXPECT_FALSE(TracepointId(root_, "mmap_lock", "mmap_lock_acquire", &error));
  EXPECT_EQ(error,
            "no tracepoint mmap_lock:mmap_lock_acquire on this kernel (mmap_lock has: "
            "mmap_lock_released, mmap_lock_start_locking)");
}

TEST_F(FakeTracefs, BadIdFile) {
  AddEvent("bad", "event", "not a number\n");
  std::string error;
  EXPECT_FALSE(TracepointId(root_, "bad", "event", &error));
  EXPECT_NE(error.find("not a tracepoint id"), std::string::npos) << error;
}

TEST_F(FakeTracefs, FindTakesTheFirstMountedCandidate) {
  std::string error;
  auto found = TracefsRoot::Find({root_ + "/nothing", root_}, "", &error);
  ASSERT_TRUE(found) << error;
  EXPECT_EQ(found->path(), root_);
  EXPECT_FALSE(found->mounted_here());
  EXPECT_FALSE(TracefsRoot::Find({root_ + "/events/mmap_lock"}, "", &error));
  EXPECT_EQ(error, "tracefs is not mounted (looked at " + root_ + "/events/mmap_lock)");
}

TEST(SumReadings, SumsThreadsAndScalesMultiplexedOnes) {
  auto plain = SumReadings("sw:page-faults", {{100, 50, 50}, {20, 50, 50}});
  EXPECT_DOUBLE_EQ(plain.value, 120);
  EXPECT_FALSE(plain.scaled);
  EXPECT_FALSE(plain.never_counted);
  EXPECT_EQ(plain.threads, 2u);
  // On the PMU half of the time: counted 100 -> about 200.
  auto scaled = SumReadings("hw:cycles", {{100, 1000, 500}, {30, 10, 10}});
  EXPECT_DOUBLE_EQ(scaled.value, 230);
  EXPECT_TRUE(scaled.scaled);
  auto never = SumReadings("hw:cycles", {{0, 1000, 0}});
  EXPECT_TRUE(never.never_counted);
  EXPECT_DOUBLE_EQ(never.value, 0);
  auto idle = SumReadings("sw:page-faults", {{0, 0, 0}});  // never enabled: simply zero
  EXPECT_FALSE(idle.never_counted);
  EXPECT_FALSE(idle.scaled);
}

}  // namespace
}  // namespace faultline::sys
