#include "agent/workloads/command_line.h"

#include <gtest/gtest.h>

namespace faultline::workloads {
namespace {

std::optional<WorkloadCommand> Parse(std::vector<std::string> args, std::string* error) {
  return ParseWorkloadCommand(args, error);
}

TEST(ParseWorkloadCommand, AcceptsDashAndUnderscoreKnobsAndFillsDefaults) {
  std::string error;
  auto command = Parse({"filemap-thrash", "--file-size", "4M", "--munmap_threads=2", "--threads",
                        "2", "--duration", "3s", "--dir", "/var/tmp"},
                       &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->benchmark, "filemap-thrash");
  EXPECT_EQ(command->knobs.at("file_size").number, 4u << 20);
  EXPECT_EQ(command->knobs.at("file_size").text, "4M");
  EXPECT_EQ(command->knobs.at("munmap_threads").number, 2u);
  EXPECT_EQ(command->knobs.at("file_fill").text, "sparse");  // default
  EXPECT_EQ(command->knobs.at("warmup").text, "0s");
  EXPECT_EQ(command->duration_seconds, 3u);
  EXPECT_EQ(command->work_dir, "/var/tmp");
  EXPECT_FALSE(command->own_cgroup);
}

TEST(ParseWorkloadCommand, BadValueNamesKnobAndLimit) {
  std::string error;
  EXPECT_FALSE(Parse({"filemap-thrash", "--threads", "0", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("--threads"), std::string::npos) << error;
  EXPECT_NE(error.find("between 1 and 4096"), std::string::npos) << error;

  EXPECT_FALSE(Parse({"filemap-thrash", "--file-size", "1K", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("--file_size"), std::string::npos) << error;
  EXPECT_NE(error.find("4K"), std::string::npos) << error;
}

TEST(ParseWorkloadCommand, RejectsUnknownKnobsAndBenchmarks) {
  std::string error;
  EXPECT_FALSE(Parse({"swap-in", "--writers", "2", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("--writers"), std::string::npos) << error;
  EXPECT_NE(error.find("unknown knob"), std::string::npos) << error;
  EXPECT_FALSE(Parse({"nope", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("filemap-thrash"), std::string::npos) << error;
  EXPECT_FALSE(Parse({"--duration", "1s"}, &error));
  EXPECT_NE(error.find("missing BENCHMARK"), std::string::npos) << error;
}

TEST(ParseWorkloadCommand, DurationIsRequiredAndWholeSeconds) {
  std::string error;
  EXPECT_FALSE(Parse({"swap-in"}, &error));
  EXPECT_NE(error.find("--duration"), std::string::npos);
  EXPECT_FALSE(Parse({"swap-in", "--duration", "1500ms"}, &error));
  EXPECT_NE(error.find("whole seconds"), std::string::npos) << error;
  EXPECT_FALSE(Parse({"swap-in", "--duration", "0s"}, &error));
  auto command = Parse({"swap-in", "--duration", "2m"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->duration_seconds, 120u);
}

TEST(ParseWorkloadCommand, MemoryLimitsMeanOwnCgroup) {
  std::string error;
  auto command =
      Parse({"swap-in", "--duration", "1s", "--memory-max", "256M", "--swap_max", "0"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_TRUE(command->own_cgroup);
  EXPECT_EQ(command->limits.memory_max, 256u << 20);
  EXPECT_EQ(command->limits.swap_max, 0u);
  EXPECT_FALSE(command->limits.memory_high);
  EXPECT_FALSE(Parse({"swap-in", "--duration", "1s", "--memory-high", "lots"}, &error));
  EXPECT_NE(error.find("--memory-high"), std::string::npos) << error;
}

TEST(ParseWorkloadCommand, MissingValueAndHelp) {
  std::string error;
  EXPECT_FALSE(Parse({"swap-in", "--duration"}, &error));
  EXPECT_NE(error.find("needs a value"), std::string::npos);
  auto help = Parse({"--help"}, &error);
  ASSERT_TRUE(help);
  EXPECT_TRUE(help->help);
  EXPECT_NE(WorkloadUsage().find("--writer_map_size"), std::string::npos);
}

// What the parser (CLI11) decides before the catalogue sees a value.
TEST(ParseWorkloadCommand, UnknownFlagNamesItAndTheBenchmarksKnobs) {
  std::string error;
  EXPECT_FALSE(Parse({"swap-in", "--bogus", "3", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("--bogus: unknown flag"), std::string::npos) << error;
  EXPECT_NE(error.find("swap-in knobs: region_size, readers"), std::string::npos) << error;
  // Its value is not taken for the BENCHMARK: the unknown flag is the error.
  EXPECT_FALSE(Parse({"--bogus", "3", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("--bogus: unknown flag"), std::string::npos) << error;
  EXPECT_FALSE(Parse({"swap-in", "--duration", "1s", "--bogus=3"}, &error));
  EXPECT_NE(error.find("--bogus: unknown flag"), std::string::npos) << error;
  EXPECT_FALSE(Parse({"swap-in", "-x", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("-x: unknown flag"), std::string::npos) << error;
}

TEST(ParseWorkloadCommand, MissingValueNamesTheFlagAsGiven) {
  std::string error;
  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--file_size"}, &error));
  EXPECT_EQ(error, "--file_size needs a value");
  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--memory-max"}, &error));
  EXPECT_EQ(error, "--memory-max needs a value");
  // A flag's value is the next argument, whatever it looks like (as before CLI11).
  auto command = Parse({"filemap-thrash", "--dir", "--odd", "--duration", "1s"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->work_dir, "--odd");
  EXPECT_FALSE(Parse({"filemap-thrash", "--threads", "-1", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("--threads: must be a whole number between 1 and 4096"), std::string::npos)
      << error;
}

TEST(ParseWorkloadCommand, EachFlagOnceInEitherSpelling) {
  std::string error;
  EXPECT_FALSE(Parse({"swap-in", "--duration", "1s", "--duration", "2s"}, &error));
  EXPECT_EQ(error, "--duration given 2 times (give each flag once)");
  EXPECT_FALSE(
      Parse({"filemap-thrash", "--file-size", "4M", "--file_size=8M", "--duration", "1s"}, &error));
  EXPECT_EQ(error, "--file-size given 2 times (give each flag once)");
  EXPECT_FALSE(
      Parse({"swap-in", "--duration", "1s", "--swap-max", "0", "--swap_max", "0"}, &error));
  EXPECT_NE(error.find("--swap-max given 2 times"), std::string::npos) << error;
  // A second positional is not a second benchmark.
  EXPECT_FALSE(Parse({"swap-in", "filemap-thrash", "--duration", "1s"}, &error));
  EXPECT_NE(error.find("unexpected argument 'filemap-thrash' (benchmark already given: swap-in)"),
            std::string::npos)
      << error;
}

TEST(ParseWorkloadCommand, FixedFlagsTakeBothSpellingsAndEquals) {
  std::string error;
  auto command = Parse({"--duration=2s", "--progress_fd=3", "--cgroup-root", "/cg",
                        "--inherit_cgroup", "--", "swap-in"},
                       &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->benchmark, "swap-in");
  EXPECT_EQ(command->duration_seconds, 2u);
  EXPECT_EQ(command->progress_fd, 3);
  EXPECT_EQ(command->cgroup.cgroup_root, "/cg");
  EXPECT_FALSE(Parse({"swap-in", "--duration", "1s", "--inherit-cgroup=maybe"}, &error));
  EXPECT_NE(error.find("--inherit-cgroup"), std::string::npos) << error;
}

TEST(ParseWorkloadCommand, HelpAndListPresetsStopWhereTheyStand) {
  std::string error;
  auto help = Parse({"swap-in", "-h", "--bogus", "--duration"}, &error);
  ASSERT_TRUE(help) << error;
  EXPECT_TRUE(help->help);
  auto list = Parse({"--list-presets", "--duration", "--duration"}, &error);
  ASSERT_TRUE(list) << error;
  EXPECT_TRUE(list->list_presets);
  // Taken as a value, --help is no flag (as before CLI11).
  EXPECT_FALSE(Parse({"swap-in", "--duration", "--help"}, &error));
  EXPECT_NE(error.find("--duration"), std::string::npos) << error;
}

TEST(ParseWorkloadCommand, MmapLockWaitsIsAFlag) {
  std::string error;
  auto on = Parse({"filemap-thrash", "--duration", "1s", "--mmap-lock-waits"}, &error);
  ASSERT_TRUE(on) << error;
  EXPECT_TRUE(on->mmap_lock_waits);
  auto off = Parse({"filemap-thrash", "--duration", "1s"}, &error);
  ASSERT_TRUE(off) << error;
  EXPECT_FALSE(off->mmap_lock_waits);
}

TEST(ParseWorkloadCommand, EventsAreACommaSeparatedCheckedList) {
  std::string error;
  auto command = Parse({"filemap-thrash", "--duration", "1s", "--events",
                        "mmap_lock:mmap_lock_start_locking, sw:page-faults,hw:cycles"},
                       &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->events, (std::vector<std::string>{"mmap_lock:mmap_lock_start_locking",
                                                       "sw:page-faults", "hw:cycles"}));
  auto none = Parse({"filemap-thrash", "--duration", "1s"}, &error);
  ASSERT_TRUE(none) << error;
  EXPECT_TRUE(none->events.empty());

  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--events", "sw:faults"}, &error));
  EXPECT_EQ(error.rfind("--events: 'sw:faults': unknown software event 'faults' (", 0), 0u)
      << error;
  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--events=a:b,,c:d"}, &error));
  EXPECT_EQ(error.rfind("--events: empty entry in 'a:b,,c:d'", 0), 0u) << error;
  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--events", "Mmap:x"}, &error));
  EXPECT_NE(error.find("--events: 'Mmap:x': malformed tracepoint name"), std::string::npos)
      << error;
  EXPECT_FALSE(Parse(
      {"filemap-thrash", "--duration", "1s", "--events", "sw:page-faults,sw:page-faults"}, &error));
  EXPECT_EQ(error, "--events: 'sw:page-faults': listed twice");
  std::string many;
  for (int i = 0; i < 17; ++i) many += (i ? ",t:e" : "t:e") + std::to_string(i);
  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--events", many}, &error));
  EXPECT_EQ(error, "--events: at most 16 events, got 17");
  EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--events", "sw:page-faults",
                      "--events", "sw:major-faults"},
                     &error));
  EXPECT_NE(error.find("--events given 2 times"), std::string::npos) << error;
  EXPECT_NE(WorkloadUsage().find("sw: page-faults, minor-faults"), std::string::npos);
}

}  // namespace
}  // namespace faultline::workloads

namespace faultline::workloads {
namespace {

TEST(ParseWorkloadCommand, ProfileHzIsBoundedAndPmuOptional) {
  std::string error;
  auto command =
      Parse({"filemap-thrash", "--duration", "1s", "--profile-hz", "999", "--profile-pmu"}, &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->profile_hz, 999u);
  EXPECT_TRUE(command->profile_pmu);
  auto off = Parse({"filemap-thrash", "--duration", "1s"}, &error);
  ASSERT_TRUE(off) << error;
  EXPECT_EQ(off->profile_hz, 0u);
  for (const char* bad : {"0", "10001", "fast"}) {
    EXPECT_FALSE(Parse({"filemap-thrash", "--duration", "1s", "--profile-hz", bad}, &error));
    EXPECT_EQ(error, std::string("--profile-hz: samples per second per thread, 1 to 10000, got '") +
                         bad + "'");
  }
}

// --run-options: the job's RunOptions whole, as the agent gives them (hostile JSON included).
TEST(ParseWorkloadCommand, RunOptionsComeWholeAsJson) {
  std::string error;
  auto command = Parse({"swap-in", "--duration", "1s", "--run-options",
                        R"({"events":["sw:page-faults","mmap_lock:mmap_lock_start_locking"],)"
                        R"("mmap_lock_waits":true,"profile":{"frequency_hz":499,"pmu":true}})"},
                       &error);
  ASSERT_TRUE(command) << error;
  EXPECT_EQ(command->events,
            (std::vector<std::string>{"sw:page-faults", "mmap_lock:mmap_lock_start_locking"}));
  EXPECT_TRUE(command->mmap_lock_waits);
  EXPECT_EQ(command->profile_hz, 499u);
  EXPECT_TRUE(command->profile_pmu);
  auto empty = Parse({"swap-in", "--duration", "1s", "--run-options", "{}"}, &error);
  ASSERT_TRUE(empty) << error;
  EXPECT_TRUE(empty->events.empty());
  EXPECT_EQ(empty->profile_hz, 0u);

  const std::pair<std::string, std::string> refused[] = {
      {"", "--run-options: not a JSON object (RunOptions)"},
      {"[1]", "--run-options: not a JSON object (RunOptions)"},
      {R"({"events":)", "--run-options: not a JSON object (RunOptions)"},
      {R"({"events":"sw:page-faults"})", "--run-options: events: a list of event names"},
      {R"({"events":[7]})", "--run-options: events: a list of event names"},
      {R"({"events":["sw:faults"]})",
       "--run-options: events[0]: 'sw:faults': unknown software event 'faults' (sw: one of "
       "page-faults, minor-faults, major-faults, context-switches, cpu-migrations, task-clock)"},
      {R"({"mmap_lock_waits":1})", "--run-options: mmap_lock_waits: true or false"},
      {R"({"profile":{}})",
       "--run-options: profile.frequency_hz: samples per second per thread, 1 to 10000, got 0"},
      {R"({"profile":{"frequency_hz":-5}})", "--run-options: profile.frequency_hz: a whole number"},
      {R"({"profile":{"frequency_hz":18446744073709551615}})",
       "--run-options: profile.frequency_hz: samples per second per thread, 1 to 10000, got "
       "18446744073709551615"},
      {R"({"profile":{"frequency_hz":99,"stack_depth":9}})",
       "--run-options: profile.stack_depth: unknown to this workload"},
      {R"({"page_table_walks":true})",
       "--run-options: page_table_walks: an option unknown to this workload"},
      {std::string(70000, ' ') + "{}", "--run-options: at most 65536 bytes, got 70002"},
  };
  for (const auto& [json, why] : refused) {
    EXPECT_FALSE(Parse({"swap-in", "--duration", "1s", "--run-options", json}, &error)) << json;
    EXPECT_EQ(error, why) << json.substr(0, 80);
  }
  // Whole or by hand, not both.
  EXPECT_FALSE(Parse({"swap-in", "--duration", "1s", "--mmap-lock-waits", "--run-options",
                      R"({"profile":{"frequency_hz":99}})"},
                     &error));
  EXPECT_EQ(error.rfind("--run-options: give the run options either whole or as --events", 0), 0u)
      << error;
}

}  // namespace
}  // namespace faultline::workloads
