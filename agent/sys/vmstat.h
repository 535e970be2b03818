#pragma once
// System-wide memory counters: /proc/vmstat, /proc/swaps, /proc/pressure/memory.
// Parsers take file contents so tests can feed them fixed text.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::sys {

using VmstatCounters = std::map<std::string, uint64_t>;

VmstatCounters ParseVmstat(std::string_view text);
std::optional<VmstatCounters> ReadVmstat(std::string* error = nullptr,
                                         const std::string& path = "/proc/vmstat");

struct SwapDevice {
  std::string path;  // "/dev/zram0", "/swapfile"
  std::string type;  // "partition", "file"
  uint64_t size_bytes = 0;
  uint64_t used_bytes = 0;
  int priority = 0;
};

// /proc/swaps content: a header line, then one device per line with sizes in KiB.
// Octal escapes in paths (\040 for a space) are decoded.
std::vector<SwapDevice> ParseProcSwaps(std::string_view text);
std::optional<std::vector<SwapDevice>> ReadSwapDevices(std::string* error = nullptr,
                                                       const std::string& path = "/proc/swaps");

// True when at least one swap device with a non-zero size is active.
bool HasSwap(const std::string& proc_swaps_path = "/proc/swaps");

// Cumulative stall time from /proc/pressure/memory (Linux 4.20+, CONFIG_PSI).
struct MemoryPressure {
  uint64_t some_total_us = 0;
  uint64_t full_total_us = 0;
};
std::optional<MemoryPressure> ParseMemoryPressure(std::string_view text);
std::optional<MemoryPressure> ReadMemoryPressure(const std::string& path = "/proc/pressure/memory");

}  // namespace faultline::sys
