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
//   page_size, memory.total_bytes, cgroup.version,
//   mm.lru_gen (MGLRU: /sys/kernel/mm/lru_gen/enabled, "absent" without it),
//   kernel.per_vma_lock / kernel.memcg_v1 / kernel.lru_gen ("y" or "n", from the plain
//   config file only), virt.accel (below).
// The confounders of a 6.1 vs 6.12 study: they show in the report's differences.
std::map<std::string, std::string> CollectEnvironmentFingerprint(
    const EnvironmentSources& sources = {});

// How the board's CPU is provided: "tcg" (emulated: numbers are not hardware numbers),
// "kvm", another hypervisor's name, or "none". A lab says so on the kernel command line
// (faultline.virt_accel=tcg); otherwise x86's CPUID hypervisor leaf tells (TCG, KVM, ...).
// `cmdline` is /proc/cmdline; `x86_hypervisor_vendor` the 12-byte leaf-0x40000000 vendor
// ("" when the hypervisor bit is clear or not x86).
std::string VirtAccel(const std::string& cmdline, const std::string& x86_hypervisor_vendor);
// VirtAccel of this machine (/proc/cmdline and CPUID).
std::string DetectVirtAccel();

// "y" / "n" for CONFIG_<name> in a kernel config text (# ... is not set, or absent: "n").
std::string KernelConfigFlag(const std::string& config_text, const std::string& name);

}  // namespace faultline::sys
