#pragma once
// faultline-workload's exit codes; the runner maps them to failure reasons.
namespace faultline::workloads {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;      // the benchmark could not run or failed mid-run
inline constexpr int kExitUsage = 2;        // bad command line or knob value
inline constexpr int kExitNoSwap = 3;       // the benchmark needs active swap and there is none
inline constexpr int kExitInterrupted = 4;  // SIGTERM/SIGINT before the result was complete

}  // namespace faultline::workloads
