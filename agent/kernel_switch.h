#pragma once
// Switching a board to another configured kernel, and knowing afterwards whether it worked.
//
// The controller asks for a label; the agent looks the label up in its own config (nothing
// else crosses the network), writes what it expects to find after the reboot to disk
// (fsync'd: the state must survive the reboot it causes), and runs the entry's boot
// commands. The next agent life reads that state: a new boot id and the expected release
// mean the switch worked; anything else (same boot, other release: grub fell back to the
// default entry, the lab script booted the wrong image) puts the board in needs-check,
// also on disk, until an operator clears it (`faultline-agent --clear-needs-check`).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/clock.h"
#include "agent/config.h"

namespace faultline::agent {

// What the board is running, as far as kernel switches are concerned.
struct BootIdentity {
  std::string release;  // uname -r (or release_file)
  std::string boot_id;  // /proc/sys/kernel/random/boot_id (or boot_id_file)
};
absl::StatusOr<BootIdentity> ReadBootIdentity(const AgentConfig& config);

// The commands a switch to `entry` runs, in order, each an argv. `running_cmdline` is this
// boot's /proc/cmdline (kexec with `cmdline: running`). Pure: tests check the commands
// without running them. FAILED_PRECONDITION for `boot: none`. `systemd_is_init` decides
// `kexec_exec: auto` (SystemdIsInit() on a board).
absl::StatusOr<std::vector<std::vector<std::string>>> BootCommands(
    const KernelEntry& entry, const std::string& running_cmdline, bool systemd_is_init = true);

// sd_booted(3)'s test: /run/systemd/system exists.
bool SystemdIsInit();

// Runs one boot command (argv[0] looked up in PATH) with `extra_env` added to this
// process's environment and an empty signal mask; waits for it. Returns its exit status
// (128 + signal when killed) or -1 with *error when it could not be started.
int RunBootCommand(const std::vector<std::string>& argv,
                   const std::vector<std::pair<std::string, std::string>>& extra_env,
                   std::string* error);

// Runs the boot methods' commands: RunBootCommand on a board, a fake in the unit tests.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // RunBootCommand's contract: exit status, 128 + signal, or -1 with *error.
  virtual int Run(const std::vector<std::string>& argv,
                  const std::vector<std::pair<std::string, std::string>>& extra_env,
                  std::string* error) = 0;
};

class SystemCommandRunner : public CommandRunner {
 public:
  int Run(const std::vector<std::string>& argv,
          const std::vector<std::pair<std::string, std::string>>& extra_env,
          std::string* error) override {
    return RunBootCommand(argv, extra_env, error);
  }
};

// A switch under way, as written before the boot commands run.
struct PendingSwitch {
  std::string label;
  std::string release;         // what the new boot must run
  std::string boot_id_before;  // the boot it was ordered from
  int64_t requested_at_unix = 0;
};

// The board's switch state in a directory (agent config state_dir).
class SwitchState {
 public:
  explicit SwitchState(std::string dir) : dir_(std::move(dir)) {}

  // Durable: written to a temporary file, fsync'd, renamed, directory fsync'd.
  absl::Status SavePending(const PendingSwitch& pending);
  absl::StatusOr<std::optional<PendingSwitch>> LoadPending() const;
  absl::Status ClearPending();

  absl::Status MarkNeedsCheck(const std::string& reason);
  // The reason the board needs a check, or nullopt when it does not.
  std::optional<std::string> NeedsCheck() const;
  absl::Status ClearNeedsCheck();

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Whether a boot that follows a switch is the one that was asked for. Empty when it is,
// otherwise the reason the board needs a check.
std::string VerifySwitch(const PendingSwitch& pending, const BootIdentity& now);

// On agent start: settles a pending switch against the running boot (clearing it, or
// turning it into needs-check) and returns the board's needs-check reason, if any.
// `switched_to` is set to the label when a pending switch was verified.
absl::StatusOr<std::optional<std::string>> SettleSwitchOnStart(SwitchState& state,
                                                               const BootIdentity& now,
                                                               std::string* switched_to);

// The boot an agent life runs in, as far as a switch away from it is concerned.
struct SwitchContext {
  BootIdentity identity;        // this boot's release and boot id
  std::string running_cmdline;  // /proc/cmdline (kexec with `cmdline: running`)
  bool systemd_is_init = true;  // SystemdIsInit()
  int agent_pid = 0;            // FAULTLINE_AGENT_PID for `command` boot scripts
};

// The kernel-switch flow of one agent life, its state in config.state_dir: Settle() on
// start verifies the switch a previous life ordered, Switch() carries out the controller's
// order, Health() is what the agent tells the controller on hello.
class KernelSwitcher {
 public:
  KernelSwitcher(const AgentConfig& config, SwitchContext context, CommandRunner& commands,
                 Clock& clock);

  // SettleSwitchOnStart for this boot: a pending switch that came back on a new boot with
  // the expected release is cleared (*switched_to = its label), any other outcome turns
  // into needs-check. Returns the board's needs-check reason, if any.
  absl::StatusOr<std::optional<std::string>> Settle(std::string* switched_to);

  // Boots `label`: the pending switch is written durably first, then the boot method's
  // commands run. Returns only when the board did not go down: "" when the agent is asked
  // to stop (`stopping`: the reboot's SIGTERM; the next life verifies the boot), otherwise
  // why the board now needs a check. That reason is recorded and the pending switch
  // removed, so a failed switch never leaves the board switching: a boot command that
  // fails, or commands that succeed but no reboot within config.switch_timeout_seconds.
  std::string Switch(const std::string& label, const std::atomic<bool>& stopping);

  // The needs-check reason recorded on disk, or "" when the board is healthy.
  std::string Health() const;

  SwitchState& state() { return state_; }

 private:
  std::string NeedsCheck(const std::string& reason);

  const AgentConfig& config_;
  SwitchContext context_;
  CommandRunner& commands_;
  Clock& clock_;
  SwitchState state_;
};

}  // namespace faultline::agent
