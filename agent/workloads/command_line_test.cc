#include "agent/workloads/command_line.h"

#include <gtest/gtest.h>

namespace faultline::workloads {
namespace {

std::optional<WorkloadCommand> Parse(std::vector<std::string> args, std::string* error) {
  return ParseWorkloadCommand(args, error);
}

TEST(ParseWorkloadCommand, AcceptsDashAndUnderscoreKnobsAndFillsDefaults) {
  std::string error;
  auto command = Parse({"filemap-thrash", "--file-size", "4M", "--munmap_threads=2",
                        "--threads", "2", "--duration", "3s", "--dir", "/var/tmp"},
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
  auto command = Parse({"swap-in", "--duration", "1s", "--memory-max", "256M", "--swap_max", "0"},
                       &error);
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

}  // namespace
}  // namespace faultline::workloads
