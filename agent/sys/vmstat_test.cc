#include "agent/sys/vmstat.h"

#include <gtest/gtest.h>

#include "agent/sys/file_io.h"

namespace faultline::sys {
namespace {

TEST(ParseVmstat, ReadsCounters) {
  auto counters = ParseVmstat("nr_free_pages 123\npgfault 2680949\npgmajfault 1020\nbogus\n");
  EXPECT_EQ(counters["pgfault"], 2680949u);
  EXPECT_EQ(counters["pgmajfault"], 1020u);
  EXPECT_EQ(counters.count("bogus"), 0u);
}

TEST(ReadVmstat, ReadsTheRealFile) {
  std::string error;
  auto counters = ReadVmstat(&error);
  ASSERT_TRUE(counters) << error;
  EXPECT_GT(counters->count("pgfault"), 0u);
}

TEST(ParseProcSwaps, ParsesDevicesInBytesAndDecodesEscapes) {
  const char* text =
      "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
      "/dev/zram0                              partition\t524284\t\t1024\t\t100\n"
      "/swap\\040file                          file\t\t2097148\t\t0\t\t-2\n";
  auto devices = ParseProcSwaps(text);
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].path, "/dev/zram0");
  EXPECT_EQ(devices[0].type, "partition");
  EXPECT_EQ(devices[0].size_bytes, 524284u * 1024);
  EXPECT_EQ(devices[0].used_bytes, 1024u * 1024);
  EXPECT_EQ(devices[0].priority, 100);
  EXPECT_EQ(devices[1].path, "/swap file");
  EXPECT_EQ(devices[1].priority, -2);
}

TEST(ParseProcSwaps, HeaderOnlyMeansNoSwap) {
  EXPECT_TRUE(ParseProcSwaps("Filename\tType\tSize\tUsed\tPriority\n").empty());
}

TEST(HasSwap, FalseForMissingFile) {
  EXPECT_FALSE(HasSwap("/nonexistent/swaps"));
}

TEST(ParseMemoryPressure, ReadsTotals) {
  auto psi = ParseMemoryPressure(
      "some avg10=0.00 avg60=0.00 avg300=0.00 total=1234\n"
      "full avg10=0.00 avg60=0.00 avg300=0.00 total=56\n");
  ASSERT_TRUE(psi);
  EXPECT_EQ(psi->some_total_us, 1234u);
  EXPECT_EQ(psi->full_total_us, 56u);
  EXPECT_FALSE(ParseMemoryPressure(""));
}

TEST(ParseKeyValueLines, IgnoresMalformedLines) {
  auto kv = ParseKeyValueLines("a 1\n b 2\nc x\nd 4");
  EXPECT_EQ(kv.size(), 2u);
  EXPECT_EQ(kv["a"], 1u);
  EXPECT_EQ(kv["d"], 4u);
}

}  // namespace
}  // namespace faultline::sys
