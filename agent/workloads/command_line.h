#pragma once
// faultline-workload's command line:
//   faultline-workload BENCHMARK [--KNOB VALUE ...] --duration 5s [--dir DIR]
//       [--memory-max SIZE] [--memory-high SIZE] [--swap-max SIZE]
//       [--cgroup-root DIR] [--cgroup-parent DIR] [--progress-fd N] [--inherit-cgroup]
//       [--events EV1,EV2,...] [--mmap-lock-waits]
//   faultline-workload --preset NAME [BENCHMARK] [--KNOB VALUE ...] [--duration ...]
// A preset supplies knob defaults, the duration and (unless --inherit-cgroup, which the
// agent's runner passes because its run cgroup already has the limits) the memcg limits.
// Flags may use dashes or underscores (--file-size, --file_size) and "--k=v"; each may be
// given once. --help and --list-presets stop where they stand; "--" ends the flags. Parsed
// with CLI11 (header-only), the values checked by the catalogue (common).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/sys/cgroup.h"
#include "agent/workloads/workload.h"

namespace faultline::workloads {

struct WorkloadCommand {
  bool help = false;
  bool list_presets = false;  // --list-presets: PresetListing() and exit
  std::string benchmark;
  ResolvedKnobs knobs;            // every knob of the benchmark, defaults filled in
  uint32_t duration_seconds = 0;  // measured seconds (whole seconds)
  std::string work_dir = "/tmp";
  // With any limit set the workload makes its own memcg (for runs by hand).
  sys::MemcgLimits limits;
  bool own_cgroup = false;
  sys::CgroupBackendOptions cgroup;
  int progress_fd = -1;          // where per-second progress lines go (the runner's pipe)
  std::string preset;            // "" = none
  uint64_t zram_swap_bytes = 0;  // --zram-swap: provision zram swap for a swap benchmark
  // --events: perf events counted over the measured interval (common/perf_events.h
  // syntax, checked here; whether a tracepoint exists is checked when the run starts).
  std::vector<std::string> events;
  // --mmap-lock-waits: each mmap_lock acquisition's wait (lock_wait_tracing.h).
  bool mmap_lock_waits = false;
  // --profile-hz N [--profile-pmu]: call stacks sampled N times a second per thread over the
  // measured interval (profile_sampling.h); 0: none.
  // (--run-options JSON sets these four whole, as the agent gives them: run_options.h.)
  uint32_t profile_hz = 0;
  bool profile_pmu = false;
};

inline constexpr uint32_t kMaxDurationSeconds = 7 * 24 * 3600;
inline constexpr uint32_t kMaxProfileHz = 10000;  // --profile-hz's limit (JobSpec.profile's)

// Returns nullopt with a one-line *error naming the offending flag/knob and its limits.
std::optional<WorkloadCommand> ParseWorkloadCommand(const std::vector<std::string>& args,
                                                    std::string* error);

// Usage text listing the benchmarks and their knobs from the catalogue.
std::string WorkloadUsage();

// One line per preset, for scripts: "NAME BENCHMARK DURATION_S small|full [KNOB=V1,V2 ...]"
// (the matrix axes).
std::string PresetListing();

}  // namespace faultline::workloads
