#pragma once
// What the agent tells the controller about its board (docs/operations.md, "Board facts").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sys/vmstat.h"

namespace faultline::sys {

struct BoardFacts {
  std::string arch;  // uname machine: x86_64, aarch64, riscv64
  std::string cpu_model;
  uint32_t cpu_count = 0;     // online CPUs
  uint64_t memory_bytes = 0;  // MemTotal
  uint64_t page_size = 0;     // sysconf(_SC_PAGESIZE): 4K, 16K or 64K
  std::vector<SwapDevice> swap_devices;
  std::string cgroup_version;  // "1", "2", or "" when no memory cgroup is usable
  std::string kernel_release;  // uname -r
  std::string proc_version;    // /proc/version, trailing newline removed
};

// Where CollectBoardFacts reads from; tests point these at fake trees.
struct BoardFactsSources {
  std::string proc_root = "/proc";
  std::string cgroup_root = "/sys/fs/cgroup";
};

// The CPU model from /proc/cpuinfo: "model name" (x86, some arm), else the aarch64 "CPU
// implementer"/"CPU part" pair, else riscv64 "uarch" or "isa", else `arch`.
std::string ParseCpuModel(std::string_view cpuinfo, std::string_view arch);

// MemTotal from /proc/meminfo in bytes; 0 when missing.
uint64_t ParseMemTotalBytes(std::string_view meminfo);

// Never fails as a whole: facts that cannot be read stay empty/zero.
BoardFacts CollectBoardFacts(const BoardFactsSources& sources = {});

}  // namespace faultline::sys
