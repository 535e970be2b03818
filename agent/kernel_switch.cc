#include "agent/kernel_switch.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/durable_file.h"
#include "common/log.h"
#include "common/read_file.h"
#include "common/strings.h"
#include "common/units.h"

namespace faultline::agent {
namespace {

constexpr char kPendingFile[] = "kernel-switch.pending";
constexpr char kNeedsCheckFile[] = "needs-check";

std::map<std::string, std::string> ParseLines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<BootIdentity> ReadBootIdentity(const AgentConfig& config) {
  BootIdentity id;
  if (!config.release_file.empty()) {
    auto text = ReadFile(config.release_file);
    if (!text.ok()) return text.status();
    id.release = std::string(TrimSpace(*text));
  } else {
    struct utsname u {};
    if (::uname(&u) != 0) return Errno("uname");
    id.release = u.release;
  }
  const std::string boot_id_path =
      config.boot_id_file.empty() ? "/proc/sys/kernel/random/boot_id" : config.boot_id_file;
  auto text = ReadFile(boot_id_path);
  if (!text.ok()) return text.status();
  id.boot_id = std::string(TrimSpace(*text));
  if (id.release.empty()) return absl::FailedPreconditionError("the running release is empty");
  if (id.boot_id.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(boot_id_path, " is empty"));
  }
  return id;
}

bool SystemdIsInit() {
  struct stat st {};
  return ::lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::vector<std::vector<std::string>>> BootCommands(
    const KernelEntry& entry, const std::string& running_cmdline, bool systemd_is_init) {
  std::vector<std::vector<std::string>> commands;
  if (entry.boot == "kexec") {
    // Load the image, then let systemd stop the services cleanly and jump into it.
    std::vector<std::string> load = {"kexec", "--load"};
    load.insert(load.end(), entry.kexec_args.begin(), entry.kexec_args.end());
    load.push_back(entry.kernel);
    if (!entry.initrd.empty()) load.push_back("--initrd=" + entry.initrd);
    const std::string cmdline =
        entry.cmdline == "running" ? std::string(TrimSpace(running_cmdline)) : entry.cmdline;
    load.push_back("--command-line=" + cmdline);
    commands.push_back(std::move(load));
    const bool direct =
        entry.kexec_exec == "direct" || (entry.kexec_exec == "auto" && !systemd_is_init);
    if (direct) {
      // No service manager to stop things: flush the file systems (the result spool and
      // the switch record live there), then jump.
      commands.push_back({"sync"});
      commands.push_back({"kexec", "-e"});
    } else {
      commands.push_back({"systemctl", "kexec"});
    }
  } else if (entry.boot == "grub-reboot") {
    // One-shot: the next boot only; a kernel that does not come up is followed by the
    // default entry again (by the watchdog or a power cycle), which the agent then sees.
    commands.push_back({"grub-reboot", entry.grub_entry});
    commands.push_back({"systemctl", "reboot"});
  } else if (entry.boot == "command") {
    commands.push_back(entry.command);
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel '", entry.label, "' has boot: ", entry.boot, " and cannot be switched to"));
  }
  return commands;
}

int RunBootCommand(const std::vector<std::string>& argv,
                   const std::vector<std::pair<std::string, std::string>>& extra_env,
                   std::string* error) {
  if (argv.empty()) {
    *error = "empty command";
    return -1;
  }
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the agent blocks SIGTERM in all its threads
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = absl::StrCat("starting ", argv[0], ": ", std::strerror(rc));
    return -1;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = absl::StrCat("waiting for ", argv[0], ": ", std::strerror(errno));
      return -1;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

absl::Status SwitchState::SavePending(const PendingSwitch& p) {
  std::string text = absl::StrCat("label=", OneLine(p.label), "\nrelease=", OneLine(p.release),
                                  "\nboot_id_before=", OneLine(p.boot_id_before),
                                  "\nrequested_at_unix=", p.requested_at_unix, "\n");
  return WriteFileDurably(dir_, kPendingFile, text);
}

absl::StatusOr<std::optional<PendingSwitch>> SwitchState::LoadPending() const {
  const std::string path = dir_ + "/" + kPendingFile;
  if (::access(path.c_str(), F_OK) != 0) return std::optional<PendingSwitch>();
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  auto kv = ParseLines(*text);
  PendingSwitch p;
  p.label = kv["label"];
  p.release = kv["release"];
  p.boot_id_before = kv["boot_id_before"];
  p.requested_at_unix = static_cast<int64_t>(ParseUnsigned(kv["requested_at_unix"]).value_or(0));
  if (p.label.empty() || p.release.empty() || p.boot_id_before.empty()) {
    return absl::DataLossError(absl::StrCat(path, ": incomplete switch record"));
  }
  return std::optional<PendingSwitch>(p);
}

absl::Status SwitchState::ClearPending() {
  return RemoveFileDurably(dir_, kPendingFile);
}

absl::Status SwitchState::MarkNeedsCheck(const std::string& reason) {
  return WriteFileDurably(dir_, kNeedsCheckFile, OneLine(reason) + "\n");
}

std::optional<std::string> SwitchState::NeedsCheck() const {
  auto text = ReadFile(dir_ + "/" + kNeedsCheckFile);
  if (!text.ok()) return std::nullopt;
  std::string reason = std::string(TrimSpace(*text));
  return reason.empty() ? std::string("needs a check (no reason recorded)") : reason;
}

absl::Status SwitchState::ClearNeedsCheck() {
  return RemoveFileDurably(dir_, kNeedsCheckFile);
}

std::string VerifySwitch(const PendingSwitch& pending, const BootIdentity& now) {
  if (now.boot_id == pending.boot_id_before) {
    return absl::StrCat("switch to '", pending.label, "' did not reboot the board (boot id ",
                        now.boot_id, " unchanged)");
  }
  if (now.release != pending.release) {
    return absl::StrCat("switch to '", pending.label, "' came back running ", now.release,
                        ", expected ", pending.release);
  }
  return "";
}

absl::StatusOr<std::optional<std::string>> SettleSwitchOnStart(SwitchState& state,
                                                               const BootIdentity& now,
                                                               std::string* switched_to) {
  auto pending = state.LoadPending();
  if (!pending.ok()) {
    // A record that cannot be read proves nothing about this boot: needs a look.
    std::string reason =
        absl::StrCat("unreadable kernel switch record: ", pending.status().message());
    if (auto s = state.MarkNeedsCheck(reason); !s.ok()) return s;
    if (auto s = state.ClearPending(); !s.ok()) return s;
    return std::optional<std::string>(reason);
  }
  if (pending->has_value()) {
    std::string reason = VerifySwitch(**pending, now);
    if (!reason.empty()) {
      if (auto s = state.MarkNeedsCheck(reason); !s.ok()) return s;
    } else if (switched_to != nullptr) {
      *switched_to = (*pending)->label;
    }
    if (auto s = state.ClearPending(); !s.ok()) return s;
  }
  return state.NeedsCheck();
}

KernelSwitcher::KernelSwitcher(const AgentConfig& config, SwitchContext context,
                               CommandRunner& commands, Clock& clock)
    : config_(config),
      context_(std::move(context)),
      commands_(commands),
      clock_(clock),
      state_(config.state_dir) {}

absl::StatusOr<std::optional<std::string>> KernelSwitcher::Settle(std::string* switched_to) {
  return SettleSwitchOnStart(state_, context_.identity, switched_to);
}

std::string KernelSwitcher::Health() const {
  return state_.NeedsCheck().value_or("");
}

std::string KernelSwitcher::NeedsCheck(const std::string& reason) {
  if (absl::Status s = state_.MarkNeedsCheck(reason); !s.ok()) {
    log::error("event=needs_check_unrecorded error=\"{}\"", std::string(s.message()));
  }
  return reason;
}

std::string KernelSwitcher::Switch(const std::string& label, const std::atomic<bool>& stopping) {
  const KernelEntry* entry = FindKernel(config_, label);
  if (entry == nullptr) {
    return NeedsCheck(
        absl::StrCat("asked to switch to kernel '", label, "', which is not configured"));
  }
  auto commands = BootCommands(*entry, context_.running_cmdline, context_.systemd_is_init);
  if (!commands.ok()) return NeedsCheck(std::string(commands.status().message()));
  PendingSwitch pending;
  pending.label = entry->label;
  pending.release = entry->release;
  pending.boot_id_before = context_.identity.boot_id;
  pending.requested_at_unix = clock_.UnixSeconds();
  // On disk before anything runs: the next life must know what it is supposed to be.
  if (absl::Status s = state_.SavePending(pending); !s.ok()) {
    return NeedsCheck(absl::StrCat("recording the switch to '", entry->label, "': ", s.message()));
  }
  std::vector<std::pair<std::string, std::string>> env = {
      {"FAULTLINE_BOARD", config_.board},
      {"FAULTLINE_KERNEL_LABEL", entry->label},
      {"FAULTLINE_KERNEL_RELEASE", entry->release},
      {"FAULTLINE_AGENT_PID", std::to_string(context_.agent_pid)}};
  // A kernel a job brought, booted by a `command`: the script gets the fetched image.
  if (!entry->kernel.empty()) env.emplace_back("FAULTLINE_KERNEL_IMAGE", entry->kernel);
  for (const auto& argv : *commands) {
    std::string joined;
    for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
    log::info("event=boot_command label={} command=\"{}\"", entry->label, joined);
    std::string error;
    const int rc = commands_.Run(argv, env, &error);
    if (rc != 0) {
      (void)state_.ClearPending();
      return NeedsCheck(absl::StrCat("switch to '", entry->label, "': `", joined, "` ",
                                     rc < 0 ? error : absl::StrCat("exited with ", rc)));
    }
  }
  // The board is going down now; the next agent life verifies the boot.
  const auto timeout = std::chrono::seconds(config_.switch_timeout_seconds);
  if (clock_.WaitFor(timeout, [&] { return stopping.load(); })) return "";
  (void)state_.ClearPending();
  return NeedsCheck(absl::StrCat("the boot commands for '", entry->label,
                                 "' succeeded but the board did not reboot within ",
                                 config_.switch_timeout_seconds, " s"));
}

}  // namespace faultline::agent
