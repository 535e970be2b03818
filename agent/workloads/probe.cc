#include "agent/workloads/probe.h"

#include "agent/sys/perf_counters.h"
#include "agent/workloads/exit_codes.h"
#include "agent/workloads/lock_wait_tracing.h"
#include "agent/workloads/perf_counting.h"
#include "agent/workloads/profile_sampling.h"

namespace faultline::workloads {

std::optional<std::vector<std::unique_ptr<Probe>>> MakeProbes(const WorkloadCommand& command,
                                                              int* exit_code, std::string* error) {
  std::vector<std::unique_ptr<Probe>> probes;
  if (!command.events.empty()) {
    // Unknown names and tracepoints this kernel lacks are refused before anything is set up
    // (tracefs, if it must be mounted, only for the look-up of their ids).
    sys::PerfEventsError perf_error;
    auto resolved = sys::ResolvePerfEvents(command.events, command.work_dir, &perf_error);
    if (!resolved) {
      *exit_code = perf_error.usage ? kExitUsage : kExitFailure;
      *error = "--events: " + perf_error.message;
      return std::nullopt;
    }
    probes.push_back(std::make_unique<PerfCounting>(std::move(*resolved)));
  }
  if (command.mmap_lock_waits)
    probes.push_back(std::make_unique<LockWaitTracing>(command.work_dir));
  if (command.profile_hz > 0) {
    probes.push_back(std::make_unique<ProfileSampling>(command.profile_hz, command.profile_pmu));
  }
  return probes;
}

}  // namespace faultline::workloads
