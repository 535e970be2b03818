#include "agent/workloads/run_command.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "agent/sys/board_facts.h"
#include "agent/sys/cgroup.h"
#include "agent/sys/environment.h"
#include "agent/sys/file_io.h"
#include "agent/sys/vmstat.h"
#include "agent/sys/zram_swap.h"
#include "agent/workloads/exit_codes.h"
#include "agent/workloads/probe.h"
#include "agent/workloads/result.h"
#include "agent/workloads/workload.h"
#include "common/strings.h"
#include "common/units.h"

namespace faultline::workloads {
namespace {

// Puts the process back where it started before its own cgroup is destroyed (the cgroup
// kills whatever is still inside, which would otherwise be us).
class ScopedCgroupMembership {
 public:
  ScopedCgroupMembership(std::string original_dir) : original_dir_(std::move(original_dir)) {}
  ~ScopedCgroupMembership() {
    std::string ignored;
    sys::MoveProcessToCgroupDir(original_dir_, ::getpid(), &ignored);
  }
  ScopedCgroupMembership(const ScopedCgroupMembership&) = delete;
  ScopedCgroupMembership& operator=(const ScopedCgroupMembership&) = delete;

 private:
  std::string original_dir_;
};

void WriteProgress(int fd, const std::string& line) {
  if (fd < 0) return;
  // Best effort: a reader that went away must not fail the benchmark (SIGPIPE is ignored).
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
}

CommandOutput Fail(int exit_code, std::string error) {
  CommandOutput out;
  out.exit_code = exit_code;
  out.error = std::move(error);
  return out;
}

}  // namespace

std::string FormatProgressStarted() {
  return "phase=started\n";
}

std::string FormatProgressSecond(uint32_t second, uint64_t measured_rounds) {
  return "phase=measuring second=" + std::to_string(second) +
         " rounds=" + std::to_string(measured_rounds) + "\n";
}

namespace {

// "--KNOB: must not exceed the board's RAM (...)" for the first size knob over it; "" when
// none is (or the RAM is unknown).
std::string OverTheBoardsRam(const BenchmarkSpec& spec, const WorkloadCommand& command) {
  auto meminfo = sys::ReadFileToString("/proc/meminfo", nullptr);
  const uint64_t ram = meminfo ? sys::ParseMemTotalBytes(*meminfo) : 0;
  if (ram == 0) return "";
  for (const auto& knob : spec.knobs) {
    if (knob.type != KnobType::kSize) continue;
    const uint64_t value = command.knobs.at(knob.name).number;
    if (value > ram) {
      return "--" + knob.name + ": must not exceed the board's RAM (" + FormatSize(ram) +
             "), got " + FormatSize(value);
    }
  }
  return "";
}

// The memory cgroup this process is in now ("" when there is none to find).
std::string CurrentMemcgDir(const sys::CgroupBackendOptions& cgroup) {
  std::string ignored;
  auto backend = sys::DetectCgroupBackend(cgroup, &ignored);
  if (!backend) return "";
  auto dir = sys::CurrentCgroupDir(*backend, &ignored);
  return dir ? *dir : "";
}

}  // namespace

CommandOutput RunWorkloadCommand(const WorkloadCommand& command,
                                 const std::atomic<bool>& interrupted) {
  const BenchmarkSpec* spec = FindBenchmark(command.benchmark);
  if (spec == nullptr) return Fail(kExitUsage, "unknown benchmark " + command.benchmark);
  // Sizes beyond the board's RAM fail before anything is allocated.
  if (std::string why = OverTheBoardsRam(*spec, command); !why.empty()) {
    return Fail(kExitUsage, why);
  }
  // What the command measures besides the rounds (probe.h); what it refuses is refused
  // before anything is set up.
  int probe_exit = 0;
  std::string probe_error;
  std::optional<std::vector<std::unique_ptr<Probe>>> made =
      MakeProbes(command, &probe_exit, &probe_error);
  if (!made) return Fail(probe_exit, probe_error);
  Probes probes(*std::move(made));
  // Declared before the cgroup and the workload: swapoff happens after their memory is gone.
  std::unique_ptr<sys::ZramSwap> zram;
  if (command.zram_swap_bytes > 0 && spec->requires_swap) {
    sys::ZramSwapOptions zram_options;
    zram_options.disksize_bytes = command.zram_swap_bytes;
    std::string why;
    auto started = sys::ZramSwap::Start(zram_options, &why);
    if (!started) return Fail(kExitFailure, "--zram-swap: " + why);
    zram = std::make_unique<sys::ZramSwap>(std::move(*started));
  }
  const bool swap_present = sys::HasSwap();
  if (spec->requires_swap && !swap_present) {
    return Fail(kExitNoSwap, "no swap: " + command.benchmark +
                                 " needs an active swap device and /proc/swaps lists none "
                                 "(e.g. set up zram: disksize, mkswap, swapon)");
  }

  std::map<std::string, std::string> environment;
  std::optional<sys::MemoryCgroup> own_cgroup;
  std::unique_ptr<ScopedCgroupMembership> membership;
  if (command.own_cgroup) {
    std::string error;
    auto backend = sys::DetectCgroupBackend(command.cgroup, &error);
    if (!backend) return Fail(kExitFailure, "memory limits given but " + error);
    auto original = sys::CurrentCgroupDir(*backend, &error);
    if (!original) return Fail(kExitFailure, error);
    own_cgroup = sys::MemoryCgroup::Create(*backend, "manual-" + std::to_string(::getpid()),
                                           command.limits, &error);
    if (!own_cgroup) return Fail(kExitFailure, error);
    // Join before anything is allocated, so every page the benchmark touches is charged
    // to the limited cgroup.
    if (!own_cgroup->AddProcess(::getpid(), &error)) return Fail(kExitFailure, error);
    membership = std::make_unique<ScopedCgroupMembership>(*original);
    for (const auto& [k, v] : own_cgroup->AppliedLimits()) environment[k] = v;
  }

  WorkloadOptions options;
  options.work_dir = command.work_dir;
  options.page_size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::unique_ptr<Workload> workload = MakeWorkload(command.benchmark, command.knobs, options);
  if (!workload) return Fail(kExitUsage, "no implementation for " + command.benchmark);
  std::string error;
  if (!workload->Prepare(interrupted, &error)) {
    return Fail(interrupted.load() ? kExitInterrupted : kExitFailure, error);
  }
  if (interrupted.load()) return Fail(kExitInterrupted, "interrupted");

  // Where we run now (own cgroup, the agent's run cgroup, or wherever we were started).
  const std::string memcg_dir = CurrentMemcgDir(command.cgroup);

  SamplingPlan plan;
  plan.warmup = std::chrono::milliseconds(command.knobs.at("warmup").number);
  plan.seconds = command.duration_seconds;
  CounterSnapshot at_start, at_end;
  HarnessHooks hooks;
  hooks.threads_started = [&] {
    probes.ThreadsStarted();
    WriteProgress(command.progress_fd, FormatProgressStarted());
  };
  hooks.measurement_started = [&] {
    at_start = TakeCounterSnapshot(memcg_dir);
    workload->MeasurementStarted();
    probes.MeasurementStarted();
  };
  hooks.second_done = [&](uint32_t second, uint64_t rounds) {
    WriteProgress(command.progress_fd, FormatProgressSecond(second, rounds));
  };
  hooks.measurement_ended = [&] {
    probes.MeasurementEnded();
    workload->MeasurementEnded();
    at_end = TakeCounterSnapshot(memcg_dir);
  };
  RealMonotonicClock clock(&interrupted);
  HarnessResult run = RunHarness(workload->ThreadGroups(), plan, clock, hooks);
  if (run.interrupted) return Fail(kExitInterrupted, "interrupted");
  if (!run.ok) return Fail(kExitFailure, run.error);

  WorkloadResultData result;
  result.benchmark = command.benchmark;
  result.throughput_rounds_per_second = run.sampling.throughput_rounds_per_second;
  result.rounds = run.sampling.rounds;
  result.pages = run.sampling.pages;
  result.pages_per_second = run.sampling.pages_per_second;
  result.too_coarse = run.sampling.too_coarse;
  result.duration_seconds = command.duration_seconds;
  result.warmup_seconds = static_cast<double>(plan.warmup.count()) / 1000.0;
  result.samples = run.sampling.samples;
  for (const auto& [name, value] : command.knobs) result.params[name] = value.text;
  CounterDeltas deltas = ComputeCounterDeltas(at_start, at_end);
  result.counters = std::move(deltas.values);
  if (!deltas.one_sided.empty()) {
    environment["counters.one_sided"] = JoinStrings(deltas.one_sided, ",");
  }
  if (!deltas.resets.empty()) environment["counters.reset"] = JoinStrings(deltas.resets, ",");
  environment["vmstat.keys"] = std::to_string(at_end.vmstat.size());
  for (const auto& [name, rounds] : run.helper_rounds)
    result.counters[name] = static_cast<double>(rounds);
  for (const auto& [name, pages] : run.helper_pages)
    result.counters[name] = static_cast<double>(pages);
  result.counters["rounds_per_thread_min"] = static_cast<double>(run.min_thread_rounds);
  result.counters["rounds_per_thread_max"] = static_cast<double>(run.max_thread_rounds);
  result.counters["measured_elapsed_seconds"] =
      std::chrono::duration<double>(run.sampling.measured_elapsed).count();
  result.counters["cpu_seconds"] =
      result.counters["rusage.utime_seconds"] + result.counters["rusage.stime_seconds"];
  workload->AddCounters(&result.counters);

  for (auto& [key, value] : sys::CollectEnvironmentFingerprint()) {
    environment.try_emplace(key, std::move(value));
  }
  environment["arch"] = environment["cpu.arch"];
  environment["page_size"] = std::to_string(options.page_size);
  if (!command.preset.empty()) environment["preset"] = command.preset;
  environment["swap_present"] = swap_present ? "true" : "false";
  environment["threads_started"] = std::to_string(run.threads_started);
  if (!memcg_dir.empty()) environment["memcg.current"] = memcg_dir;
  workload->DescribeEnvironment(&environment);
  if (!probes.AddFindings({.counters = &result.counters,
                           .environment = &environment,
                           .folded_stacks = &result.folded_stacks},
                          &error)) {
    return Fail(kExitFailure, error);
  }
  result.environment = std::move(environment);

  CommandOutput out;
  out.exit_code = kExitSuccess;
  out.result_json = FormatWorkloadResultJson(result);
  return out;
}

}  // namespace faultline::workloads
