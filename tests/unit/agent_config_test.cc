#include "agent/config.h"

#include <gtest/gtest.h>

namespace faultline::agent {
namespace {

TEST(AgentConfig, ParsesKernelsAndResolvesRunning) {
  auto c = ParseAgentConfig(R"(
board: lab-01
labels: {site: lab1}
kernels:
  - {label: vanilla, release: running}
  - {label: patched, release: 6.9.0-rc1+, boot: kexec}
)",
                            "6.1.0-18-amd64");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->board, "lab-01");
  EXPECT_EQ(c->labels.at("site"), "lab1");
  ASSERT_EQ(c->kernels.size(), 2u);
  EXPECT_EQ(c->kernels[0].release, "6.1.0-18-amd64");
  EXPECT_EQ(c->kernels[1].boot, "kexec");
  EXPECT_EQ(RunningKernelLabel(*c, "6.1.0-18-amd64"), "vanilla");
  EXPECT_EQ(RunningKernelLabel(*c, "5.10"), "");
  EXPECT_EQ(RunningKernelLabels(*c, "6.1.0-18-amd64"), std::vector<std::string>{"vanilla"});
}

TEST(AgentConfig, RefusesBadInputWithLineAndField) {
  auto unknown = ParseAgentConfig("board: b\nkernal: []\n", "r");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("kernal (line 2, column 1)"),
            std::string::npos)
      << unknown.status();

  auto no_kernels = ParseAgentConfig("board: b\n", "r");
  ASSERT_FALSE(no_kernels.ok());
  EXPECT_NE(std::string(no_kernels.status().message()).find("kernels"), std::string::npos);

  auto bad_boot = ParseAgentConfig("board: b\nkernels: [{label: v, release: r, boot: pxe}]\n", "r");
  ASSERT_FALSE(bad_boot.ok());
  EXPECT_NE(std::string(bad_boot.status().message()).find("kernels[0].boot"), std::string::npos);

  auto twice = ParseAgentConfig(
      "board: b\nkernels: [{label: v, release: r}, {label: v, release: s}]\n", "r");
  EXPECT_FALSE(twice.ok());

  auto malformed = ParseAgentConfig("board: [\n", "r");
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(std::string(malformed.status().message()).find("line "), std::string::npos);
}

}  // namespace
}  // namespace faultline::agent
