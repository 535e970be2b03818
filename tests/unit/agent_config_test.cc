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
  - {label: patched, release: 6.9.0-rc1+, boot: kexec, kernel: /boot/vmlinuz-6.9.0-rc1+}
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

TEST(AgentConfig, ZramSwapIsOptionalAndASize) {
  auto off = ParseAgentConfig("board: b\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->zram_swap_bytes, 0u);
  auto on = ParseAgentConfig("board: b\nzram_swap: 1G\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->zram_swap_bytes, 1ull << 30);
  auto bad =
      ParseAgentConfig("board: b\nzram_swap: lots\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("zram_swap (line 2"), std::string::npos)
      << bad.status();
  auto tiny = ParseAgentConfig("board: b\nzram_swap: 1M\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(std::string(tiny.status().message()).find("at least 16M"), std::string::npos);
}

TEST(AgentConfig, TlsServerNameIsOptionalAndANonEmptyName) {
  auto off = ParseAgentConfig("board: b\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->tls_server_name, "");
  auto on = ParseAgentConfig(
      "board: b\ntls_server_name: controller.lab\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->tls_server_name, "controller.lab");
  auto empty =
      ParseAgentConfig("board: b\ntls_server_name: \"\"\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(std::string(empty.status().message()).find("tls_server_name (line 2"),
            std::string::npos)
      << empty.status();
}

TEST(AgentConfig, BuiltKernelsAndBuilder) {
  auto config = ParseAgentConfig(
      "board: b\nkernels: [{label: v, release: r}]\n"
      "built_kernels: {dir: /var/k, max_size: 1G, initrd: /boot/initrd, kexec_args: [-i],\n"
      "  kexec_exec: direct, url_ca: /proc/self/status}\n"
      "builder: {arches: [x86_64, riscv64], cache: /var/cache/kb, jobs: 2}\n",
      "r");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->built_kernels.enabled);
  EXPECT_EQ(config->built_kernels.max_bytes, 1ull << 30);
  EXPECT_EQ(config->built_kernels.url_ca, "/proc/self/status");
  EXPECT_EQ(config->builder.arches, (std::vector<std::string>{"x86_64", "riscv64"}));
  EXPECT_EQ(config->builder.jobs, 2);
  const KernelEntry e = BuiltKernelEntry(*config, "patched@abc", "6.12.0-fl1", "/var/k/x");
  EXPECT_EQ(e.boot, "kexec");
  EXPECT_EQ(e.kernel, "/var/k/x");
  EXPECT_EQ(e.initrd, "/boot/initrd");
  EXPECT_EQ(e.kexec_args, std::vector<std::string>{"-i"});
  EXPECT_EQ(e.kexec_exec, "direct");
  EXPECT_EQ(e.release, "6.12.0-fl1");
  // Off unless configured.
  auto plain = ParseAgentConfig("board: b\nkernels: [{label: v, release: r}]\n", "r");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->built_kernels.enabled);
  EXPECT_TRUE(plain->builder.arches.empty());
  for (const auto& [yaml, field] : std::vector<std::pair<std::string, std::string>>{
           {"builder: {arches: [mips]}", "builder.arches"},
           {"builder: {cache: /c}", "builder.arches"},
           {"built_kernels: {dir: relative}", "built_kernels.dir"},
           {"built_kernels: {max_size: 1M}", "built_kernels.max_size"},
           {"built_kernels: {boot: command}", "built_kernels.command"},
           {"built_kernels: {nope: 1}", "built_kernels.nope"},
           {"built_kernels: {url_ca: ca.pem}", "must be an absolute path"},
           {"built_kernels: {url_ca: /no/such/ca.pem}", "is not a readable file"}}) {
    auto bad = ParseAgentConfig("board: b\nkernels: [{label: v, release: r}]\n" + yaml + "\n", "r");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(std::string(bad.status().message()).find(field), std::string::npos)
        << yaml << ": " << bad.status();
  }
}

// builder's sandbox (docs/kernels.md#strangers-kernels-the-builders-sandbox): its mode by
// name, its uid, its limits with units; a bad value names its field.
TEST(AgentConfig, BuilderSandbox) {
  auto config = ParseAgentConfig(
      "board: b\nkernels: [{label: v, release: r}]\n"
      "builder: {arches: [x86_64], sandbox: required, sandbox_uid: 70000,\n"
      "  sandbox_pass_env: [HTTP_PROXY], sandbox_readonly: [/srv/extra],\n"
      "  sandbox_limits: {memory: 2G, pids: 512, cpus: 1.5, wall: 90m, step_wall: 5m,\n"
      "  log: 8M, image: 64M}}\n",
      "r");
  ASSERT_TRUE(config.ok()) << config.status();
  const BuilderConfig& b = config->builder;
  EXPECT_EQ(b.sandbox, "required");
  EXPECT_EQ(b.sandbox_uid, 70000u);
  EXPECT_EQ(b.sandbox_pass_env, std::vector<std::string>{"HTTP_PROXY"});
  EXPECT_EQ(b.sandbox_readonly, std::vector<std::string>{"/srv/extra"});
  EXPECT_EQ(b.limits.memory, 2ull << 30);
  EXPECT_EQ(b.limits.pids, 512u);
  EXPECT_DOUBLE_EQ(b.limits.cpus, 1.5);
  EXPECT_EQ(b.limits.wall_seconds, 90 * 60);
  EXPECT_EQ(b.limits.step_wall_seconds, 5 * 60);
  EXPECT_EQ(b.limits.log, 8ull << 20);
  EXPECT_EQ(b.limits.image, 64ull << 20);
  EXPECT_EQ(b.limits.file, 4ull << 30);  // the default
  auto plain = ParseAgentConfig(
      "board: b\nkernels: [{label: v, release: r}]\n"
      "builder: {arches: [x86_64]}\n",
      "r");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->builder.sandbox, "auto");
  for (const auto& [yaml, field] : std::vector<std::pair<std::string, std::string>>{
           {"sandbox: off", "must be auto, required or none-i-trust-every-series"},
           {"sandbox_uid: 0", "builder.sandbox_uid"},
           {"sandbox_readonly: [rel]", "builder.sandbox_readonly"},
           {"sandbox_limits: {memory: 1k}", "builder.sandbox_limits.memory"},
           {"sandbox_limits: {wall: 1s}", "builder.sandbox_limits.wall"},
           {"sandbox_limits: {pids: 3}", "builder.sandbox_limits.pids"},
           {"sandbox_limits: {swap: 1G}", "builder.sandbox_limits.swap"}}) {
    auto bad = ParseAgentConfig(
        "board: b\nkernels: [{label: v, release: r}]\nbuilder: {arches: [x86_64], " + yaml + "}\n",
        "r");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(std::string(bad.status().message()).find(field), std::string::npos)
        << yaml << ": " << bad.status();
  }
}

}  // namespace
}  // namespace faultline::agent
