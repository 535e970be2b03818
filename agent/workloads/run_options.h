#pragma once
// --run-options JSON: a job's RunOptions (proto/faultline/v1/job.proto) as the agent gives
// it to the workload, whole, with the proto's field names:
//   {"events": ["sw:page-faults", ...], "mmap_lock_waits": true,
//    "profile": {"frequency_hz": 99, "pmu": false}}
// Read here into the command's options (the same ones --events, --mmap-lock-waits,
// --profile-hz and --profile-pmu set by hand), which MakeProbes (probe.h) turns into probes.
// An option this workload does not know is refused, naming it: a run never measures less
// than its job asked. (No protobuf here: the workload is a small static binary.)
#include <string>

#include "agent/workloads/command_line.h"

namespace faultline::workloads {

// Fills command->events, mmap_lock_waits, profile_hz, profile_pmu from `json`; false with
// *error ("--run-options: ..." naming the option and the limit) when it is not such JSON.
bool ParseRunOptions(const std::string& json, WorkloadCommand* command, std::string* error);

}  // namespace faultline::workloads
