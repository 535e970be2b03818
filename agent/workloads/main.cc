// faultline-workload: runs one page-fault benchmark and prints its result as JSON.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/workloads/command_line.h"
#include "agent/workloads/exit_codes.h"
#include "agent/workloads/run_command.h"

namespace {

std::atomic<bool> g_interrupted{false};
// Stored from a signal handler, so it must not be a locked atomic. GCC 12 on riscv64 says
// "sometimes" (1) for byte atomics, which it implements lock-free with word-sized LR/SC.
static_assert(ATOMIC_BOOL_LOCK_FREE >= 1, "used from a signal handler");

void OnTerminate(int) {
  g_interrupted.store(true, std::memory_order_relaxed);
}

void InstallSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnTerminate;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: the sampling sleep must wake up
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // The progress pipe's reader may vanish; a failed write must not kill the run.
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faultline::workloads;
  InstallSignalHandlers();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string error;
  auto command = ParseWorkloadCommand(args, &error);
  if (!command) {
    std::fprintf(stderr, "faultline-workload: %s\n(see faultline-workload --help)\n",
                 error.c_str());
    return kExitUsage;
  }
  if (command->list_presets) {
    std::fputs(PresetListing().c_str(), stdout);
    return kExitSuccess;
  }
  if (command->help) {
    std::fputs(WorkloadUsage().c_str(), stdout);
    return kExitSuccess;
  }
  CommandOutput output = RunWorkloadCommand(*command, g_interrupted);
  if (output.exit_code != kExitSuccess) {
    std::fprintf(stderr, "faultline-workload: %s\n", output.error.c_str());
    return output.exit_code;
  }
  std::fputs(output.result_json.c_str(), stdout);
  std::fputc('\n', stdout);
  return std::fflush(stdout) == 0 ? kExitSuccess : kExitFailure;
}
