#pragma once
// Runs one parsed faultline-workload command: swap check, optional own memcg, prepare,
// harness, result JSON. Separate from main() so the flow reads in one place.
#include <atomic>
#include <string>

#include "agent/workloads/command_line.h"

namespace faultline::workloads {

struct CommandOutput {
  int exit_code = 0;
  std::string result_json;  // set on success only
  std::string error;        // one line for stderr otherwise
};

// `interrupted` is set by main()'s SIGTERM/SIGINT handler.
CommandOutput RunWorkloadCommand(const WorkloadCommand& command,
                                 const std::atomic<bool>& interrupted);

// Progress lines for the runner: "phase=started" once the threads run, then
// "phase=measuring second=N rounds=R" (R = measured rounds so far) every second.
std::string FormatProgressStarted();
std::string FormatProgressSecond(uint32_t second, uint64_t measured_rounds);

}  // namespace faultline::workloads
