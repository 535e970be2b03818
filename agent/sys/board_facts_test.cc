#include "agent/sys/board_facts.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace faultline::sys {
namespace {

TEST(ParseCpuModel, X86ModelName) {
  EXPECT_EQ(ParseCpuModel("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n", "x86_64"),
            "Intel(R) Xeon(R) Processor");
}

TEST(ParseCpuModel, Aarch64ImplementerAndPart) {
  const char* cpuinfo =
      "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
      "CPU variant\t: 0x3\nCPU part\t: 0xd0c\n";
  EXPECT_EQ(ParseCpuModel(cpuinfo, "aarch64"), "ARM part 0xd0c");
}

TEST(ParseCpuModel, Riscv64UarchThenIsa) {
  EXPECT_EQ(ParseCpuModel("hart\t: 0\nisa\t: rv64imafdc\nuarch\t: sifive,u74-mc\n", "riscv64"),
            "sifive,u74-mc");
  EXPECT_EQ(ParseCpuModel("hart\t: 0\nisa\t: rv64imafdc\n", "riscv64"), "rv64imafdc");
}

TEST(ParseCpuModel, FallsBackToArch) {
  EXPECT_EQ(ParseCpuModel("", "riscv64"), "riscv64");
}

TEST(ParseMemTotalBytes, ConvertsKib) {
  EXPECT_EQ(ParseMemTotalBytes("MemTotal:       24615012 kB\nMemFree: 1 kB\n"), 24615012ull * 1024);
  EXPECT_EQ(ParseMemTotalBytes("MemFree: 1 kB\n"), 0u);
}

TEST(CollectBoardFacts, ReadsFakeProcTree) {
  char pattern[] = "/tmp/faultline-facts-test-XXXXXX";
  std::string root = ::mkdtemp(pattern);
  std::ofstream(root + "/cpuinfo") << "model name\t: Fake CPU\n";
  std::ofstream(root + "/meminfo") << "MemTotal: 1024 kB\n";
  std::ofstream(root + "/swaps")
      << "Filename Type Size Used Priority\n/dev/zram0 partition 8 0 5\n";
  std::ofstream(root + "/version") << "Linux version 6.1.0-fake (gcc) #1\n";
  BoardFactsSources sources;
  sources.proc_root = root;
  sources.cgroup_root = root + "/no-cgroups";
  BoardFacts facts = CollectBoardFacts(sources);
  std::filesystem::remove_all(root);

  EXPECT_EQ(facts.cpu_model, "Fake CPU");
  EXPECT_EQ(facts.memory_bytes, 1024u * 1024);
  ASSERT_EQ(facts.swap_devices.size(), 1u);
  EXPECT_EQ(facts.swap_devices[0].size_bytes, 8u * 1024);
  EXPECT_EQ(facts.proc_version, "Linux version 6.1.0-fake (gcc) #1");
  EXPECT_EQ(facts.cgroup_version, "");
  EXPECT_EQ(facts.page_size, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  EXPECT_GT(facts.cpu_count, 0u);
  EXPECT_FALSE(facts.arch.empty());
  EXPECT_FALSE(facts.kernel_release.empty());
}

TEST(CollectBoardFacts, RealHostHasBasics) {
  BoardFacts facts = CollectBoardFacts();
  EXPECT_GT(facts.memory_bytes, 0u);
  EXPECT_FALSE(facts.cpu_model.empty());
  EXPECT_NE(facts.proc_version.find("Linux"), std::string::npos);
}

}  // namespace
}  // namespace faultline::sys
