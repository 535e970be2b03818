#pragma once
// The builder's sandbox: every program a kernel tree provides (make and what its Makefiles
// run, the config scripts, merge_config.sh, kernelrelease) runs inside bubblewrap as an
// unprivileged uid, with no network, a cleared environment, only the build's slot
// writable, in a cgroup of its own (memory, pids, CPU), under a wall-time limit and with
// its output capped. The rules, and what a stranger can and cannot do: docs/kernels.md
// ("Strangers' kernels").
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kbuild/process.h"

namespace faultline::kbuild {

// What one sandboxed program may use. Defaults fit a defconfig build on a 2-core, 24 GiB
// builder with room to spare (docs/kernels.md gives the measured peaks).
struct SandboxLimits {
  uint64_t memory_bytes = 12ull << 30;  // the build's cgroup (memory.max / limit_in_bytes)
  uint64_t pids = 2048;                 // pids.max
  double cpus = 0;                      // CPU quota in CPUs; 0: none
  std::chrono::seconds wall{3 * 3600};  // then everything inside is killed
  // Each program of the config step (the base target, merge_config.sh, olddefconfig) and
  // kernelrelease: seconds in a real tree, so a Kconfig $(shell) or script that hangs (or
  // leaves a process holding its output open) does not hold the builder for `wall`.
  std::chrono::seconds step_wall{600};
  uint64_t log_bytes = 64ull << 20;          // more output than this stops the build
  uint64_t file_bytes = 4ull << 30;          // RLIMIT_FSIZE: no file larger
  uint64_t disk_reserve_bytes = 1ull << 30;  // free space the build must leave on the slot's fs
  uint64_t image_bytes = 256ull << 20;       // a larger boot image is refused
};

// auto: sandbox every build where it runs; where it cannot, trusted builds run without it
// (logged) and untrusted ones are refused. required: every build sandboxed or refused.
// none-i-trust-every-series: never (the operator's opt-out, by name).
enum class SandboxMode { kAuto, kRequired, kNone };
absl::StatusOr<SandboxMode> ParseSandboxMode(const std::string& text);  // names above
const char* SandboxModeName(SandboxMode mode);

// Below systemd's DynamicUser range (61184-65519): a uid no account and no file outside
// the builder's slots has.
inline constexpr uid_t kDefaultSandboxUid = 61183;

struct SandboxOptions {
  SandboxMode mode = SandboxMode::kAuto;
  uid_t uid = kDefaultSandboxUid;  // also the gid
  SandboxLimits limits;
  std::string bwrap = "bwrap";  // looked up in PATH
  std::string cgroup_root = "/sys/fs/cgroup";
  // More paths bound at their own place, writable or read-only (tests: a fixture's step
  // log), and variables of the builder's environment passed in by name (the operator's).
  std::vector<std::string> extra_writable, extra_readonly, pass_env;
};

struct SandboxMount {
  std::string source;  // on the host (opened by the builder, as root)
  std::string dest;    // where the sandbox sees it ("" : at `source`)
  bool writable = false;
};

struct SandboxCommand {
  Command command;  // argv, cwd (a path inside), env (the whole environment), output
  std::vector<SandboxMount> mounts;
  std::string scratch;           // a directory of the build's own: /scratch inside (TMPDIR, HOME)
  std::chrono::seconds wall{0};  // 0: the limits' wall
};

class Sandbox {
 public:
  explicit Sandbox(SandboxOptions options);

  const SandboxOptions& options() const { return options_; }

  // OK when sandboxed runs work on this machine (bwrap found, user namespaces allowed, the
  // uid can be taken): checked once, by running `true` inside. Otherwise why not.
  absl::Status Available();

  // Runs `run` inside. Finished::stopped says why the sandbox killed it ("" when the
  // program ended on its own); no process of it is left when this returns.
  absl::StatusOr<Finished> Run(const SandboxCommand& run);

  // Makes `dir` and everything under it the sandbox uid's (a slot it builds in).
  absl::Status Own(const std::string& dir) const;

  // Removes the build cgroups of builders that are no longer running (named by pid).
  void RemoveStaleCgroups() const;

 private:
  // The run's mounts with the scratch and extra ones, parents first, each reachable.
  absl::StatusOr<std::vector<SandboxMount>> Mounts(const SandboxCommand& run) const;

  SandboxOptions options_;
  bool probed_ = false;
  absl::Status available_;
};

// OK when `uid` can reach `path` (every directory on the way lets others through).
absl::Status Reachable(const std::string& path, uid_t uid);

// The kbuild environment every build gets, sandboxed or not (reproducible builds: the same
// key gives the same image).
std::vector<std::pair<std::string, std::string>> KbuildEnvironment();

}  // namespace faultline::kbuild
