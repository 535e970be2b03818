// Kernel switches on the agent: the commands each boot method would run (checked, never
// executed), the on-disk switch state, and the verification of the boot that follows.
#include "agent/kernel_switch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/config.h"

namespace faultline::agent {
namespace {

using Argv = std::vector<std::string>;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/faultline-switch-test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

AgentConfig ParseOrDie(const std::string& yaml) {
  auto c = ParseAgentConfig(yaml, "6.1.0-18-amd64");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : AgentConfig{};
}

TEST(BootCommands, KexecLoadsTheEntryAndLetsSystemdJump) {
  AgentConfig c = ParseOrDie(R"(
board: b
kernels:
  - {label: vanilla, release: running}
  - {label: patched, release: 6.9.0-rc1+, boot: kexec, kernel: /boot/vmlinuz-6.9.0-rc1+,
     initrd: /boot/initrd.img-6.9.0-rc1+}
  - {label: debug, release: 6.9.0-dbg, boot: kexec, kernel: /boot/vmlinuz-dbg,
     cmdline: "root=/dev/sda1 ro debug"}
)");
  auto patched =
      BootCommands(*FindKernel(c, "patched"), "BOOT_IMAGE=/vmlinuz root=UUID=1 ro quiet\n");
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ(*patched,
            (std::vector<Argv>{{"kexec", "--load", "/boot/vmlinuz-6.9.0-rc1+",
                                "--initrd=/boot/initrd.img-6.9.0-rc1+",
                                "--command-line=BOOT_IMAGE=/vmlinuz root=UUID=1 ro quiet"},
                               {"systemctl", "kexec"}}));
  auto debug = BootCommands(*FindKernel(c, "debug"), "ignored");
  ASSERT_TRUE(debug.ok());
  EXPECT_EQ(*debug, (std::vector<Argv>{{"kexec", "--load", "/boot/vmlinuz-dbg",
                                        "--command-line=root=/dev/sda1 ro debug"},
                                       {"systemctl", "kexec"}}));
}

TEST(BootCommands, KexecWithoutSystemdSyncsAndJumpsDirectly) {
  AgentConfig c = ParseOrDie(R"(
board: b
kernels:
  - {label: vanilla, release: running}
  - {label: patched, release: 6.12.0, boot: kexec, kernel: /lab/vmlinuz, cmdline: "console=ttyS0"}
  - {label: forced, release: 6.12.0, boot: kexec, kernel: /lab/vmlinuz, cmdline: "x",
     kexec_exec: direct, kexec_args: [-i]}
)");
  const Argv load = {"kexec", "--load", "/lab/vmlinuz", "--command-line=console=ttyS0"};
  auto guest = BootCommands(*FindKernel(c, "patched"), "", /*systemd_is_init=*/false);
  ASSERT_TRUE(guest.ok()) << guest.status();
  EXPECT_EQ(*guest, (std::vector<Argv>{load, {"sync"}, {"kexec", "-e"}}));
  auto with_systemd = BootCommands(*FindKernel(c, "patched"), "", /*systemd_is_init=*/true);
  EXPECT_EQ(with_systemd->back(), (Argv{"systemctl", "kexec"}));
  auto forced = BootCommands(*FindKernel(c, "forced"), "", /*systemd_is_init=*/true);
  EXPECT_EQ(forced->back(), (Argv{"kexec", "-e"}));
  EXPECT_EQ(forced->front(), (Argv{"kexec", "--load", "-i", "/lab/vmlinuz", "--command-line=x"}));
  auto bad = ParseAgentConfig(
      "board: b\nkernels: [{label: p, release: r, boot: kexec, kernel: /k, kexec_exec: now}]\n",
      "r");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kernels[0].kexec_exec"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("must be one of auto, systemctl, direct"),
            std::string::npos)
      << bad.status();
}

TEST(BootCommands, GrubRebootIsOneShotThenReboot) {
  AgentConfig c = ParseOrDie(R"(
board: b
kernels:
  - {label: patched, release: 6.9.0, boot: grub-reboot,
     grub_entry: "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.9.0"}
)");
  auto cmds = BootCommands(c.kernels[0], "");
  ASSERT_TRUE(cmds.ok());
  EXPECT_EQ(*cmds, (std::vector<Argv>{
                       {"grub-reboot",
                        "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.9.0"},
                       {"systemctl", "reboot"}}));
}

TEST(BootCommands, CommandRunsTheLabsScriptAndNoneCannotSwitch) {
  AgentConfig c = ParseOrDie(R"(
board: b
kernels:
  - {label: vanilla, release: running}
  - {label: lab, release: 6.2.0, boot: command, command: [/usr/local/bin/lab-boot, --board, b1]}
)");
  auto lab = BootCommands(*FindKernel(c, "lab"), "");
  ASSERT_TRUE(lab.ok());
  EXPECT_EQ(*lab, (std::vector<Argv>{{"/usr/local/bin/lab-boot", "--board", "b1"}}));
  auto none = BootCommands(*FindKernel(c, "vanilla"), "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(none.status().message()).find("boot: none"), std::string::npos);
}

TEST(AgentConfigSwitching, RefusesIncompleteBootEntriesNamingTheField) {
  struct Case {
    const char* yaml;
    const char* field;
  } cases[] = {
      {"board: b\nkernels: [{label: p, release: r, boot: kexec}]\n", "kernels[0].kernel"},
      {"board: b\nkernels: [{label: p, release: r, boot: kexec, kernel: vmlinuz}]\n",
       "kernels[0].kernel"},
      {"board: b\nkernels: [{label: p, release: r, boot: grub-reboot}]\n", "kernels[0].grub_entry"},
      {"board: b\nkernels: [{label: p, release: r, boot: command}]\n", "kernels[0].command"},
      {"board: b\nkernels: [{label: p, release: r, boot: command, command: [boot.sh]}]\n",
       "kernels[0].command"},
      {"board: b\nkernels: [{label: p, release: r, boot: command, command: /x}]\n",
       "kernels[0].command"},
      {"board: b\nstate_dir: var/faultline\nkernels: [{label: p, release: r}]\n", "state_dir"},
      {"board: b\nswitch_timeout: 5s\nkernels: [{label: p, release: r}]\n", "switch_timeout"},
      {"board: b\nswitch_timeout: 5h\nkernels: [{label: p, release: r}]\n", "switch_timeout"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseAgentConfig(c.yaml, "r");
    ASSERT_FALSE(parsed.ok()) << c.yaml;
    EXPECT_EQ(std::string(parsed.status().message()).rfind(c.field, 0), 0u)
        << c.yaml << " -> " << parsed.status();
  }
  auto ok = ParseAgentConfig(
      "board: b\nswitch_timeout: 2m\nstate_dir: /var/lib/x\nkernels: [{label: p, release: r}]\n",
      "r");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->switch_timeout_seconds, 120u);
  EXPECT_EQ(ok->state_dir, "/var/lib/x");
}

TEST(SwitchState, PendingSwitchSurvivesInAFileAndIsCleared) {
  TempDir dir;
  SwitchState state(dir.path() + "/state");  // created on first write
  auto none = state.LoadPending();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  PendingSwitch p{"patched", "6.9.0-rc1+", "boot-1", 1764460800};
  ASSERT_TRUE(state.SavePending(p).ok());
  // A new SwitchState (the next agent life) reads what the previous one wrote.
  SwitchState next_life(dir.path() + "/state");
  auto loaded = next_life.LoadPending();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->label, "patched");
  EXPECT_EQ((*loaded)->release, "6.9.0-rc1+");
  EXPECT_EQ((*loaded)->boot_id_before, "boot-1");
  EXPECT_EQ((*loaded)->requested_at_unix, 1764460800);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/state/kernel-switch.pending.tmp"));
  ASSERT_TRUE(next_life.ClearPending().ok());
  EXPECT_FALSE(next_life.LoadPending()->has_value());
  EXPECT_TRUE(next_life.ClearPending().ok());  // idempotent
}

TEST(SwitchState, NeedsCheckIsRecordedUntilCleared) {
  TempDir dir;
  SwitchState state(dir.path());
  EXPECT_FALSE(state.NeedsCheck().has_value());
  ASSERT_TRUE(state.MarkNeedsCheck("grub fell back\nto the default").ok());
  ASSERT_TRUE(state.NeedsCheck().has_value());
  EXPECT_EQ(*state.NeedsCheck(), "grub fell back to the default");
  ASSERT_TRUE(state.ClearNeedsCheck().ok());
  EXPECT_FALSE(state.NeedsCheck().has_value());
}

TEST(SettleSwitchOnStart, ANewBootOnTheExpectedReleaseIsVerified) {
  TempDir dir;
  SwitchState state(dir.path());
  ASSERT_TRUE(state.SavePending({"patched", "6.9.0-rc1+", "boot-1", 1}).ok());
  std::string switched_to;
  auto needs = SettleSwitchOnStart(state, {"6.9.0-rc1+", "boot-2"}, &switched_to);
  ASSERT_TRUE(needs.ok());
  EXPECT_FALSE(needs->has_value());
  EXPECT_EQ(switched_to, "patched");
  EXPECT_FALSE(state.LoadPending()->has_value());
}

TEST(SettleSwitchOnStart, TheSameBootOrAnotherReleaseNeedsACheck) {
  TempDir dir;
  SwitchState state(dir.path());
  ASSERT_TRUE(state.SavePending({"patched", "6.9.0-rc1+", "boot-1", 1}).ok());
  std::string switched_to;
  auto same_boot = SettleSwitchOnStart(state, {"6.1.0", "boot-1"}, &switched_to);
  ASSERT_TRUE(same_boot.ok());
  ASSERT_TRUE(same_boot->has_value());
  EXPECT_NE((*same_boot)->find("did not reboot"), std::string::npos) << **same_boot;
  EXPECT_EQ(switched_to, "");
  EXPECT_FALSE(state.LoadPending()->has_value());
  // Still needs a check on the next start, with no switch pending any more.
  auto again = SettleSwitchOnStart(state, {"6.1.0", "boot-9"}, &switched_to);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->has_value());

  ASSERT_TRUE(state.ClearNeedsCheck().ok());
  ASSERT_TRUE(state.SavePending({"patched", "6.9.0-rc1+", "boot-1", 1}).ok());
  auto fell_back = SettleSwitchOnStart(state, {"6.1.0", "boot-2"}, &switched_to);
  ASSERT_TRUE(fell_back.ok());
  ASSERT_TRUE(fell_back->has_value());
  EXPECT_EQ(**fell_back, "switch to 'patched' came back running 6.1.0, expected 6.9.0-rc1+");
}

TEST(SettleSwitchOnStart, AnUnreadableRecordNeedsACheck) {
  TempDir dir;
  WriteFile(dir.path() + "/kernel-switch.pending", "label=patched\n");  // torn by hand
  SwitchState state(dir.path());
  auto needs = SettleSwitchOnStart(state, {"6.1.0", "boot-2"}, nullptr);
  ASSERT_TRUE(needs.ok());
  ASSERT_TRUE(needs->has_value());
  EXPECT_NE((*needs)->find("unreadable kernel switch record"), std::string::npos);
}

TEST(BootIdentity, SimulatedBoardsReadTheirFiles) {
  TempDir dir;
  WriteFile(dir.path() + "/release", "6.9.0-sim\n");
  WriteFile(dir.path() + "/boot_id", "1234-abcd\n");
  AgentConfig c;
  c.release_file = dir.path() + "/release";
  c.boot_id_file = dir.path() + "/boot_id";
  auto id = ReadBootIdentity(c);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->release, "6.9.0-sim");
  EXPECT_EQ(id->boot_id, "1234-abcd");
  auto real = ReadBootIdentity(AgentConfig{});
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->boot_id.size(), 36u);  // a UUID
  c.boot_id_file = dir.path() + "/missing";
  EXPECT_FALSE(ReadBootIdentity(c).ok());
}

TEST(RunBootCommand, PassesTheSwitchEnvironmentAndReportsTheExitStatus) {
  std::string error;
  int rc = RunBootCommand(
      {"/bin/sh", "-c", "test \"$FAULTLINE_KERNEL_LABEL\" = patched && exit 7; exit 1"},
      {{"FAULTLINE_KERNEL_LABEL", "patched"}}, &error);
  EXPECT_EQ(rc, 7) << error;
  EXPECT_EQ(RunBootCommand({"/bin/sh", "-c", "kill -TERM $$"}, {}, &error), 128 + SIGTERM);
  EXPECT_EQ(RunBootCommand({"/nonexistent/boot-script"}, {}, &error), -1);
  EXPECT_NE(error.find("/nonexistent/boot-script"), std::string::npos);
}

}  // namespace
}  // namespace faultline::agent
