#pragma once
// The agent's board configuration (agent.yaml):
//   board: lab-x86-01
//   labels: {site: lab1}
//   work_dir: /var/tmp/faultline       # files of filemap-thrash live here
//   workload_binary: ""                # default: faultline-workload next to the agent
//   cgroup_parent: ""                  # optional delegated cgroup v2 directory
//   zram_swap: 1G                      # optional: a zram swap device of this size is set
//                                      # up for each run that needs swap, removed after
//   kernels:
//     - {label: vanilla, release: 6.1.0-18-amd64, boot: none}
//     - {label: patched, release: 6.1.0-rc1+, boot: kexec}
// `release: running` stands for the running kernel's `uname -r`.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace faultline::agent {

struct KernelEntry {
  std::string label;
  std::string release;
  std::string boot = "none";  // none | kexec | grub-reboot | command
};

struct AgentConfig {
  std::string board;
  std::map<std::string, std::string> labels;
  std::string work_dir = "/var/tmp/faultline";
  std::string workload_binary;
  std::string cgroup_parent;
  uint64_t zram_swap_bytes = 0;  // 0: the agent never provisions swap
  std::vector<KernelEntry> kernels;
};

// Parses and checks the config; `running_release` resolves `release: running`.
absl::StatusOr<AgentConfig> ParseAgentConfig(const std::string& yaml_text,
                                             const std::string& running_release);
absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path,
                                            const std::string& running_release);

// The label of the configured kernel whose release is running, or "" when none is.
std::string RunningKernelLabel(const AgentConfig& config, const std::string& running_release);
// Every label whose release is running (two labels on one kernel make an A/A check).
std::vector<std::string> RunningKernelLabels(const AgentConfig& config,
                                             const std::string& running_release);

}  // namespace faultline::agent
