#pragma once
#include <string>

namespace faultline::agent {

struct AgentOptions {
  std::string controller = "localhost:50051";
  std::string config_path;
  std::string workload_binary;     // overrides the config; default: next to the agent binary
  bool clear_needs_check = false;  // clear the board's needs-check state and exit
};

// Runs until SIGINT/SIGTERM; returns the process exit code.
int RunAgent(const AgentOptions& options, const std::string& argv0);

}  // namespace faultline::agent
