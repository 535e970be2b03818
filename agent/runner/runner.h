#pragma once
// Runs one faultline-workload child for the agent: a fresh memory cgroup per run, the child
// joins it before exec (the agent itself never enters it), stdout collected, stderr's tail
// kept, timeout and cancellation enforced, OOM kills recognised, the cgroup removed after.
// RunWorkload blocks the calling thread until the child is gone.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sys/cgroup.h"

namespace faultline::runner {

// Parsed from the workload's --progress-fd lines.
struct WorkloadProgress {
  enum class Phase { kStarted, kMeasuring };
  Phase phase = Phase::kStarted;
  uint32_t second = 0;         // measured seconds completed (kMeasuring)
  uint64_t rounds = 0;         // measured rounds so far (kMeasuring)
  double elapsed_seconds = 0;  // since the child was started
};

struct WorkloadInvocation {
  std::string workload_binary;  // path to faultline-workload
  std::string benchmark;
  std::map<std::string, std::string> params;  // knob -> value text
  uint32_t duration_seconds = 0;
  std::chrono::milliseconds warmup{0};  // params.warmup as the controller parsed it
  // --run-options: the job's RunOptions as JSON (proto field names), passed whole: what
  // the run measures besides throughput (events, mmap_lock waits, profile). "": none.
  std::string run_options;
  std::string work_dir;  // --dir; empty: the workload's default
  sys::MemcgLimits limits;
  sys::CgroupBackend cgroup_backend;
  std::string run_id;                                        // the cgroup is faultline/run-<run_id>
  uint32_t grace_seconds = 60;                               // timeout = warmup + duration + grace
  std::atomic<bool>* cancel = nullptr;                       // set by anyone to stop the run
  std::function<void(const WorkloadProgress&)> on_progress;  // called on this thread
  std::chrono::milliseconds kill_after_term{5000};           // SIGTERM, then SIGKILL
};

struct WorkloadOutcome {
  bool succeeded = false;
  // "timeout", "cancelled", "oom_killed", "exit code 3: <last stderr line>",
  // "killed by signal 9", or a setup failure ("cgroup: ...", "invalid params: ...").
  std::string failure_reason;
  std::string result_json;  // the child's stdout
  std::string stderr_tail;  // last ~4 KiB of the child's stderr
  std::map<std::string, std::string> applied_limits;
  std::map<std::string, uint64_t> memcg_events;
  std::string cleanup_error;  // the cgroup could not be removed (reported, not fatal)
};

WorkloadOutcome RunWorkload(const WorkloadInvocation& invocation);

// --- pieces exposed for unit tests ---

// argv for the child (argv[0] = binary): BENCHMARK --knob value ... --duration Ns [--dir D]
// [--events A,B] --progress-fd 3. Limits are not passed: the runner's cgroup applies them.
std::vector<std::string> BuildWorkloadArgv(const WorkloadInvocation& invocation);

// "phase=started" / "phase=measuring second=N rounds=R"; nullopt for anything else.
std::optional<WorkloadProgress> ParseProgressLine(std::string_view line);

struct ChildObservations {
  bool exited = false;  // WIFEXITED
  int exit_code = 0;
  int signal = 0;  // WTERMSIG when killed by a signal
  bool cancel_requested = false;
  bool timed_out = false;
  uint64_t memcg_oom_kills = 0;
  uint64_t system_oom_kills_during_run = 0;  // /proc/vmstat oom_kill delta
  bool we_sent_sigkill = false;
  std::string stdout_text;
  std::string stderr_tail;
};

// Success, or the failure reason, from what was observed about the child.
struct Verdict {
  bool succeeded = false;
  std::string failure_reason;
};
Verdict ClassifyChildOutcome(const ChildObservations& observed);

// Last non-empty line of `text` (for "exit code N: <line>").
std::string LastLine(std::string_view text);

}  // namespace faultline::runner
