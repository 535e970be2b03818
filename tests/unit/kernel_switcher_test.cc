// The agent's kernel-switch flow on fakes: the switch is on disk before a boot command
// runs, the next agent life verifies it (boot id, release), and every way a switch can fail
// ends in needs-check with nothing left pending. Boot commands are recorded, never run;
// nothing sleeps.
#include <gtest/gtest.h>

#include "agent/config.h"
#include "agent/kernel_switch.h"
#include "tests/unit/agent_fakes.h"

namespace faultline::agent {
namespace {

using testing::FakeClock;
using testing::FakeCommandRunner;
using testing::TempDir;
using Argv = std::vector<std::string>;

class KernelSwitcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto parsed = ParseAgentConfig(R"(
board: sim-board
state_dir: )" + dir_.path() + R"(
switch_timeout: 90s
kernels:
  - {label: vanilla, release: 6.1.0-sim-vanilla, boot: command, command: [/lab/boot, vanilla]}
  - {label: patched, release: 6.1.0-sim-patched, boot: command, command: [/lab/boot, patched]}
  - {label: fast, release: 6.1.0-sim-fast, boot: kexec, kernel: /boot/vmlinuz-fast,
     kexec_exec: direct}
  - {label: manual, release: 6.1.0-sim-manual, boot: none}
)",
                                   "6.1.0-sim-vanilla");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    config_ = *parsed;
  }

  // A switcher for an agent life on `release` in boot `boot_id`.
  std::unique_ptr<KernelSwitcher> Life(const std::string& release, const std::string& boot_id) {
    SwitchContext context;
    context.identity = {release, boot_id};
    context.running_cmdline = "console=ttyS0 root=/dev/vda";
    context.systemd_is_init = false;
    context.agent_pid = 4242;
    return std::make_unique<KernelSwitcher>(config_, context, commands_, clock_);
  }

  // What a reboot looks like to the switcher: the agent is told to stop while the boot
  // command runs (or right after it returned).
  void RebootOnLastCommand(size_t commands) {
    commands_.on_run = [this, commands](const Argv&, const FakeCommandRunner::Env&, std::string*) {
      if (commands_.commands.size() == commands) stopping_ = true;
      return 0;
    };
  }

  TempDir dir_;
  AgentConfig config_;
  FakeCommandRunner commands_;
  FakeClock clock_;
  std::atomic<bool> stopping_{false};
};

TEST_F(KernelSwitcherTest, RecordsTheSwitchDurablyBeforeTheBootCommandRuns) {
  std::optional<PendingSwitch> on_disk_when_run;
  commands_.on_run = [&](const Argv&, const FakeCommandRunner::Env&, std::string*) {
    auto pending = SwitchState(dir_.path()).LoadPending();  // as a fresh life would read it
    EXPECT_TRUE(pending.ok()) << pending.status();
    if (pending.ok()) on_disk_when_run = *pending;
    stopping_ = true;  // the board goes down
    return 0;
  };
  auto life = Life("6.1.0-sim-vanilla", "boot-1");
  EXPECT_EQ(life->Switch("patched", stopping_), "") << "a switch under way reports nothing";

  ASSERT_TRUE(on_disk_when_run.has_value()) << "the boot command ran before the record existed";
  EXPECT_EQ(on_disk_when_run->label, "patched");
  EXPECT_EQ(on_disk_when_run->release, "6.1.0-sim-patched");
  EXPECT_EQ(on_disk_when_run->boot_id_before, "boot-1");
  EXPECT_EQ(on_disk_when_run->requested_at_unix, FakeClock::kEpoch);
  EXPECT_EQ(commands_.commands, (std::vector<Argv>{{"/lab/boot", "patched"}}));
  EXPECT_EQ(commands_.envs[0],
            (FakeCommandRunner::Env{{"FAULTLINE_BOARD", "sim-board"},
                                    {"FAULTLINE_KERNEL_LABEL", "patched"},
                                    {"FAULTLINE_KERNEL_RELEASE", "6.1.0-sim-patched"},
                                    {"FAULTLINE_AGENT_PID", "4242"}}));
  EXPECT_EQ(life->Health(), "");
  auto still = SwitchState(dir_.path()).LoadPending();
  ASSERT_TRUE(still.ok());
  EXPECT_TRUE(still->has_value()) << "the record stays for the next life";
}

TEST_F(KernelSwitcherTest, RunsEveryCommandOfTheBootMethodInOrder) {
  RebootOnLastCommand(3);
  EXPECT_EQ(Life("6.1.0-sim-vanilla", "boot-1")->Switch("fast", stopping_), "");
  EXPECT_EQ(commands_.commands, (std::vector<Argv>{{"kexec", "--load", "/boot/vmlinuz-fast",
                                                    "--command-line=console=ttyS0 root=/dev/vda"},
                                                   {"sync"},
                                                   {"kexec", "-e"}}));
}

TEST_F(KernelSwitcherTest, NextLifeOnTheExpectedReleaseVerifiesTheSwitch) {
  RebootOnLastCommand(1);
  ASSERT_EQ(Life("6.1.0-sim-vanilla", "boot-1")->Switch("patched", stopping_), "");

  auto next = Life("6.1.0-sim-patched", "boot-2");
  std::string switched_to;
  auto needs_check = next->Settle(&switched_to);
  ASSERT_TRUE(needs_check.ok()) << needs_check.status();
  EXPECT_FALSE(needs_check->has_value()) << **needs_check;
  EXPECT_EQ(switched_to, "patched");
  EXPECT_EQ(next->Health(), "");
  auto pending = SwitchState(dir_.path()).LoadPending();
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value()) << "a verified switch is no longer pending";

  // A later life (a plain reboot) has nothing to verify.
  switched_to.clear();
  auto later = Life("6.1.0-sim-patched", "boot-3")->Settle(&switched_to);
  ASSERT_TRUE(later.ok());
  EXPECT_FALSE(later->has_value());
  EXPECT_EQ(switched_to, "");
}

TEST_F(KernelSwitcherTest, NextLifeOnAnotherReleaseNeedsCheck) {
  RebootOnLastCommand(1);
  ASSERT_EQ(Life("6.1.0-sim-vanilla", "boot-1")->Switch("patched", stopping_), "");

  // grub fell back to the default entry: a new boot, but the old kernel.
  auto next = Life("6.1.0-sim-vanilla", "boot-2");
  std::string switched_to;
  auto needs_check = next->Settle(&switched_to);
  ASSERT_TRUE(needs_check.ok()) << needs_check.status();
  ASSERT_TRUE(needs_check->has_value());
  EXPECT_EQ(**needs_check,
            "switch to 'patched' came back running 6.1.0-sim-vanilla, expected 6.1.0-sim-patched");
  EXPECT_EQ(switched_to, "");
  EXPECT_EQ(next->Health(), **needs_check);
  // It stays so in every later life until an operator clears it.
  EXPECT_EQ(Life("6.1.0-sim-vanilla", "boot-3")->Health(), **needs_check);
}

TEST_F(KernelSwitcherTest, NextLifeInTheSameBootNeedsCheck) {
  RebootOnLastCommand(1);
  ASSERT_EQ(Life("6.1.0-sim-vanilla", "boot-1")->Switch("patched", stopping_), "");
  // The agent was restarted, the board never rebooted.
  auto next = Life("6.1.0-sim-vanilla", "boot-1");
  auto needs_check = next->Settle(nullptr);
  ASSERT_TRUE(needs_check.ok());
  ASSERT_TRUE(needs_check->has_value());
  EXPECT_EQ(**needs_check,
            "switch to 'patched' did not reboot the board (boot id boot-1 unchanged)");
}

TEST_F(KernelSwitcherTest, BootCommandFailureIsReportedAndLeavesNothingPending) {
  commands_.on_run = [](const Argv&, const FakeCommandRunner::Env&, std::string*) { return 3; };
  auto life = Life("6.1.0-sim-vanilla", "boot-1");
  const std::string reason = life->Switch("patched", stopping_);
  EXPECT_EQ(reason, "switch to 'patched': `/lab/boot patched` exited with 3");
  EXPECT_EQ(life->Health(), reason) << "recorded for the hello that follows";
  auto pending = SwitchState(dir_.path()).LoadPending();
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value()) << "the board must not be left switching";
  EXPECT_TRUE(clock_.waits().empty()) << "no waiting for a reboot that will not come";

  // The next life (the operator restarts the agent) sees the check, not a switch.
  auto next = Life("6.1.0-sim-vanilla", "boot-1")->Settle(nullptr);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ(**next, reason);
}

TEST_F(KernelSwitcherTest, ACommandThatCannotStartStopsTheSwitch) {
  commands_.on_run = [](const Argv&, const FakeCommandRunner::Env&, std::string* error) {
    *error = "starting kexec: No such file or directory";
    return -1;
  };
  const std::string reason = Life("6.1.0-sim-vanilla", "boot-1")->Switch("fast", stopping_);
  EXPECT_EQ(reason,
            "switch to 'fast': `kexec --load /boot/vmlinuz-fast --command-line=console=ttyS0 "
            "root=/dev/vda` starting kexec: No such file or directory");
  EXPECT_EQ(commands_.commands.size(), 1u) << "nothing after a failed command";
}

TEST_F(KernelSwitcherTest, NoRebootWithinTheTimeoutNeedsCheck) {
  auto life = Life("6.1.0-sim-vanilla", "boot-1");
  const std::string reason = life->Switch("patched", stopping_);  // returns 0, never reboots
  EXPECT_EQ(reason,
            "the boot commands for 'patched' succeeded but the board did not reboot within 90 s");
  EXPECT_EQ(clock_.waits(), (std::vector<std::chrono::milliseconds>{std::chrono::seconds(90)}));
  EXPECT_EQ(life->Health(), reason);
  auto pending = SwitchState(dir_.path()).LoadPending();
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value());
}

TEST_F(KernelSwitcherTest, WhatCannotBeBootedNeedsCheckWithoutRunningAnything) {
  auto life = Life("6.1.0-sim-vanilla", "boot-1");
  EXPECT_EQ(life->Switch("nightly", stopping_),
            "asked to switch to kernel 'nightly', which is not configured");
  EXPECT_EQ(life->Switch("manual", stopping_),
            "kernel 'manual' has boot: none and cannot be switched to");
  EXPECT_TRUE(commands_.commands.empty());
  EXPECT_EQ(life->Health(), "kernel 'manual' has boot: none and cannot be switched to");
  auto pending = SwitchState(dir_.path()).LoadPending();
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value());
}

}  // namespace
}  // namespace faultline::agent
