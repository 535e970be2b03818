#pragma once
// The environment fingerprint stored with every result: what a reader needs to know to
// trust or compare a number (kernel identity and config, THP, swap, CPU, memory, cgroups).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace faultline::sys {

struct EnvironmentSources {
  std::string proc_root = "/proc";
  std::string sys_root = "/sys";
  std::string boot_dir = "/boot";
  std::string cgroup_root = "/sys/fs/cgroup";
};

// FNV-1a, 64 bit, as 16 hex digits: identifies a kernel config (not a security hash).
std::string Fnv1a64Hex(std::string_view data);

// Keys (values are text; missing facts are left out, never guessed):
//   kernel.release, kernel.version (/proc/version), kernel.cmdline,
//   kernel.config_fnv1a64 + kernel.config_source (/boot/config-<release> or /proc/config.gz),
//   thp.enabled, thp.defrag, thp.shmem_enabled (the bracketed choices), thp.pmd_size,
//   swap.devices ("path type size; ..."), swap.total_bytes, swap.<dev>.comp_algorithm (zram),
//   cpu.arch, cpu.model, cpu.online (list, e.g. "0-1"), cpu.count, cpu.governor,
//   page_size, memory.total_bytes, cgroup.version.
std::map<std::string, std::string> CollectEnvironmentFingerprint(
    const EnvironmentSources& sources = {});

}  // namespace faultline::sys
