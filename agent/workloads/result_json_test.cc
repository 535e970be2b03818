#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "agent/workloads/result.h"

namespace faultline::workloads {
namespace {

// The hand-written JSON writer this replaced turned invalid UTF-8 into U+FFFD per maximal
// invalid subsequence; nlohmann's replace handler does the same (checked case by case).
std::string EnvironmentValueAsWritten(const std::string& value) {
  WorkloadResultData data;
  data.environment = {{"k", value}};
  const std::string text = FormatWorkloadResultJson(data);
  const size_t at = text.find("\"k\":");
  const size_t end = text.find('}', at);
  return text.substr(at + 4, end - at - 4);
}

TEST(FormatWorkloadResultJson, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(EnvironmentValueAsWritten("plain"), "\"plain\"");
  EXPECT_EQ(EnvironmentValueAsWritten("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(EnvironmentValueAsWritten("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(EnvironmentValueAsWritten(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(EnvironmentValueAsWritten(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
}

TEST(FormatWorkloadResultJson, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(EnvironmentValueAsWritten("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  EXPECT_EQ(EnvironmentValueAsWritten("\xFF"), "\"\xEF\xBF\xBD\"");
  EXPECT_EQ(EnvironmentValueAsWritten("\xC3"), "\"\xEF\xBF\xBD\"");                  // truncated
  EXPECT_EQ(EnvironmentValueAsWritten("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong
  EXPECT_EQ(EnvironmentValueAsWritten("\xED\xA0\x80"),
            "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
}

TEST(FormatWorkloadResultJson, NonFiniteNumbersAreZero) {
  WorkloadResultData data;
  data.counters = {{"inf", 1.0 / 0.0}, {"nan", std::nan("")}, {"half", 0.5}};
  auto parsed = nlohmann::json::parse(FormatWorkloadResultJson(data));
  EXPECT_EQ(parsed["counters"]["inf"], 0);
  EXPECT_EQ(parsed["counters"]["nan"], 0);
  EXPECT_EQ(parsed["counters"]["half"], 0.5);
}

TEST(FormatWorkloadResultJson, ParsesBackWithProtoFieldNames) {
  WorkloadResultData data;
  data.benchmark = "filemap-thrash";
  data.throughput_rounds_per_second = 37.5;
  data.rounds = 75;
  data.duration_seconds = 2;
  data.samples = {{1, 40}, {2, 35}};
  data.params = {{"threads", "2"}, {"file_size", "4M"}};
  data.counters = {{"pgfault", 12345}};
  data.environment = {{"odd \"key\"", "line\nbreak \xFF"}};
  auto parsed = nlohmann::json::parse(FormatWorkloadResultJson(data));
  EXPECT_EQ(parsed["benchmark"], "filemap-thrash");
  EXPECT_EQ(parsed["throughput_rounds_per_second"], 37.5);
  EXPECT_EQ(parsed["rounds"], 75);
  EXPECT_EQ(parsed["warmup_seconds"], 0);
  ASSERT_EQ(parsed["samples"].size(), 2u);
  EXPECT_EQ(parsed["samples"][1]["second"], 2);
  EXPECT_EQ(parsed["samples"][1]["rounds"], 35);
  EXPECT_EQ(parsed["params"]["file_size"], "4M");
  EXPECT_EQ(parsed["counters"]["pgfault"], 12345);
  EXPECT_EQ(parsed["environment"]["odd \"key\""], "line\nbreak \xEF\xBF\xBD");
  EXPECT_FALSE(parsed.contains("folded_stacks")) << "none when not profiled";
  data.folded_stacks = "main;do_page_fault;handle_mm_fault 7\nmain 2";
  parsed = nlohmann::json::parse(FormatWorkloadResultJson(data));
  EXPECT_EQ(parsed["folded_stacks"], "main;do_page_fault;handle_mm_fault 7\nmain 2");
  EXPECT_FALSE(parsed["environment"].contains("profile.folded"));
}

}  // namespace
}  // namespace faultline::workloads

namespace faultline::workloads {
namespace {

CounterSnapshot Snapshot(sys::VmstatCounters vmstat,
                         std::map<std::string, uint64_t> memcg_stat = {},
                         std::map<std::string, uint64_t> memcg_events = {}) {
  CounterSnapshot s;
  s.vmstat = std::move(vmstat);
  s.memcg_stat = std::move(memcg_stat);
  s.memcg_events = std::move(memcg_events);
  return s;
}

TEST(ComputeCounterDeltas, EveryCounterThatMovedByNameAndNoLevels) {
  // retry_mmap_drop: a debug counter only a patched kernel has; it is kept by name.
  auto start = Snapshot(
      {{"pgfault", 100},
       {"pgmajfault", 5},
       {"pswpin", 7},
       {"retry_mmap_drop", 10},
       {"nr_free_pages", 5000},
       {"nr_dirtied", 1},
       {"workingset_nodes", 3}},
      {{"anon", 4096}, {"pgfault", 50}, {"workingset_refault_file", 0}, {"total_pgmajfault", 1}},
      {{"max", 2}, {"oom_kill", 0}});
  auto end = Snapshot(
      {{"pgfault", 250},
       {"pgmajfault", 5},
       {"pswpin", 9},
       {"retry_mmap_drop", 30},
       {"nr_free_pages", 100},
       {"nr_dirtied", 4},
       {"workingset_nodes", 9}},
      {{"anon", 8192}, {"pgfault", 80}, {"workingset_refault_file", 6}, {"total_pgmajfault", 3}},
      {{"max", 5}, {"oom_kill", 0}});
  CounterDeltas d = ComputeCounterDeltas(start, end);
  EXPECT_EQ(d.values.at("vmstat.pgfault"), 150);
  EXPECT_EQ(d.values.at("vmstat.pswpin"), 2);
  EXPECT_EQ(d.values.at("vmstat.retry_mmap_drop"), 20);
  EXPECT_EQ(d.values.at("vmstat.nr_dirtied"), 3);  // nr_dirtied counts events
  EXPECT_EQ(d.values.count("vmstat.pgmajfault"), 0u) << "zero deltas are not stored";
  EXPECT_EQ(d.values.count("vmstat.nr_free_pages"), 0u) << "a level, not a counter";
  EXPECT_EQ(d.values.count("vmstat.workingset_nodes"), 0u) << "a level, not a counter";
  EXPECT_EQ(d.values.at("memcg.pgfault"), 30);
  EXPECT_EQ(d.values.at("memcg.workingset_refault_file"), 6);
  EXPECT_EQ(d.values.at("memcg.total_pgmajfault"), 2);
  EXPECT_EQ(d.values.count("memcg.anon"), 0u) << "a size, not a counter";
  EXPECT_EQ(d.values.at("memcg.events.max"), 3);
  EXPECT_EQ(d.values.count("memcg.events.oom_kill"), 0u);
  EXPECT_TRUE(d.one_sided.empty());
  EXPECT_TRUE(d.resets.empty());
  EXPECT_TRUE(d.values.count("rusage.minflt"));
  EXPECT_EQ(d.values.count("psi.memory_some_us"), 0u) << "no PSI in either snapshot";
}

TEST(ComputeCounterDeltas, KeysOnOneSideAndResetsAreNamedNotGuessed) {
  auto start = Snapshot({{"pgfault", 100}, {"gone_counter", 4}, {"pswpout", 900}});
  auto end = Snapshot({{"pgfault", 120}, {"new_counter", 8}, {"pswpout", 12}});
  CounterDeltas d = ComputeCounterDeltas(start, end);
  EXPECT_EQ(d.values.at("vmstat.pgfault"), 20);
  EXPECT_EQ(d.one_sided, (std::vector<std::string>{"vmstat.gone_counter", "vmstat.new_counter"}));
  EXPECT_EQ(d.resets, (std::vector<std::string>{"vmstat.pswpout"}));
  EXPECT_EQ(d.values.count("vmstat.pswpout"), 0u);
  EXPECT_EQ(d.values.count("vmstat.new_counter"), 0u);
}

TEST(ComputeCounterDeltas, PressureIsKeptEvenWhenItDidNotMove) {
  auto start = Snapshot({});
  auto end = Snapshot({});
  start.memory_pressure = sys::MemoryPressure{10, 4};
  end.memory_pressure = sys::MemoryPressure{10, 9};
  CounterDeltas d = ComputeCounterDeltas(start, end);
  EXPECT_EQ(d.values.at("psi.memory_some_us"), 0);
  EXPECT_EQ(d.values.at("psi.memory_full_us"), 5);
}

}  // namespace
}  // namespace faultline::workloads
