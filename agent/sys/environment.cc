#include "agent/sys/environment.h"

#include <cstdio>
#include <cstring>
#include <sstream>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "agent/sys/board_facts.h"
#include "agent/sys/file_io.h"
#include "agent/sys/thp.h"
#include "agent/sys/vmstat.h"
#include "common/strings.h"

namespace faultline::sys {
namespace {

// sysfs/procfs values end in a newline, device-tree strings in NULs.
std::string Trimmed(std::string text) {
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return std::string(TrimSpace(text));
}

void PutFile(std::map<std::string, std::string>* env, const std::string& key,
             const std::string& path) {
  if (auto text = ReadFileToString(path, nullptr)) (*env)[key] = Trimmed(*text);
}

void PutChoice(std::map<std::string, std::string>* env, const std::string& key,
               const std::string& path) {
  if (auto text = ReadFileToString(path, nullptr)) {
    std::string choice = ParseBracketedChoice(*text);
    (*env)[key] = choice.empty() ? Trimmed(*text) : choice;
  }
}

std::string X86HypervisorVendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 31))) return "";  // hypervisor bit
  __cpuid(0x40000000, a, b, c, d);
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &c, 4);
  std::memcpy(vendor + 8, &d, 4);
  return std::string(vendor, 12);
#else
  return "";
#endif
}

}  // namespace

std::string VirtAccel(const std::string& cmdline, const std::string& x86_hypervisor_vendor) {
  std::istringstream words(cmdline);
  for (std::string word; words >> word;) {
    static constexpr std::string_view kKey = "faultline.virt_accel=";
    if (word.rfind(kKey, 0) == 0 && word.size() > kKey.size()) return word.substr(kKey.size());
  }
  if (x86_hypervisor_vendor.empty()) return "none";
  const std::string name = HypervisorName(x86_hypervisor_vendor);
  return name.empty() ? "none" : name;
}

std::string DetectVirtAccel() {
  return VirtAccel(ReadFileToString("/proc/cmdline", nullptr).value_or(""), X86HypervisorVendor());
}

std::string KernelConfigFlag(const std::string& config_text, const std::string& name) {
  const std::string key = "CONFIG_" + name + "=";
  std::istringstream lines(config_text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key, 0) == 0) {
      const std::string value = line.substr(key.size());
      return value == "y" || value == "m" ? "y" : "n";
    }
  }
  return "n";
}

std::string Fnv1a64Hex(std::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(hash));
  return out;
}

std::map<std::string, std::string> CollectEnvironmentFingerprint(
    const EnvironmentSources& sources) {
  std::map<std::string, std::string> env;
  BoardFactsSources board_sources;
  board_sources.proc_root = sources.proc_root;
  board_sources.cgroup_root = sources.cgroup_root;
  const BoardFacts facts = CollectBoardFacts(board_sources);

  env["kernel.release"] = facts.kernel_release;
  if (!facts.proc_version.empty()) env["kernel.version"] = facts.proc_version;
  PutFile(&env, "kernel.cmdline", sources.proc_root + "/cmdline");
  // The plain config next to the kernel is preferred; /proc/config.gz (IKCONFIG_PROC) is
  // hashed as the compressed bytes the kernel embeds, which are fixed per build.
  for (const auto& path :
       {sources.boot_dir + "/config-" + facts.kernel_release, sources.proc_root + "/config.gz"}) {
    if (auto config = ReadFileToString(path, nullptr); config && !config->empty()) {
      env["kernel.config_fnv1a64"] = Fnv1a64Hex(*config);
      env["kernel.config_source"] = path;
      if (path.size() < 3 || path.compare(path.size() - 3, 3, ".gz") != 0) {  // plain text
        env["kernel.per_vma_lock"] = KernelConfigFlag(*config, "PER_VMA_LOCK");
        env["kernel.memcg_v1"] = KernelConfigFlag(*config, "MEMCG_V1");
        env["kernel.lru_gen"] = KernelConfigFlag(*config, "LRU_GEN");
      }
      break;
    }
  }
  if (auto lru_gen = ReadFileToString(sources.sys_root + "/kernel/mm/lru_gen/enabled", nullptr)) {
    env["mm.lru_gen"] = Trimmed(*lru_gen);
  } else {
    env["mm.lru_gen"] = "absent";
  }
  env["virt.accel"] =
      VirtAccel(ReadFileToString(sources.proc_root + "/cmdline", nullptr).value_or(""),
                X86HypervisorVendor());

  const std::string thp = sources.sys_root + "/kernel/mm/transparent_hugepage";
  PutChoice(&env, "thp.enabled", thp + "/enabled");
  PutChoice(&env, "thp.defrag", thp + "/defrag");
  PutChoice(&env, "thp.shmem_enabled", thp + "/shmem_enabled");
  PutFile(&env, "thp.pmd_size", thp + "/hpage_pmd_size");

  std::string devices;
  uint64_t total = 0;
  for (const auto& d : facts.swap_devices) {
    if (!devices.empty()) devices += "; ";
    devices += d.path + " " + d.type + " " + std::to_string(d.size_bytes);
    total += d.size_bytes;
    const std::string_view name = std::string_view(d.path).substr(d.path.rfind('/') + 1);
    if (name.substr(0, 4) == "zram") {
      PutChoice(&env, "swap." + std::string(name) + ".comp_algorithm",
                sources.sys_root + "/block/" + std::string(name) + "/comp_algorithm");
    }
  }
  env["swap.devices"] = devices.empty() ? "none" : devices;
  env["swap.total_bytes"] = std::to_string(total);

  env["cpu.arch"] = facts.arch;
  env["cpu.model"] = facts.cpu_model;
  env["cpu.count"] = std::to_string(facts.cpu_count);
  PutFile(&env, "cpu.online", sources.sys_root + "/devices/system/cpu/online");
  if (auto governor = ReadFileToString(
          sources.sys_root + "/devices/system/cpu/cpu0/cpufreq/scaling_governor", nullptr)) {
    env["cpu.governor"] = Trimmed(*governor);
  } else {
    env["cpu.governor"] = "none (no cpufreq)";
  }
  env["page_size"] = std::to_string(facts.page_size);
  env["memory.total_bytes"] = std::to_string(facts.memory_bytes);
  env["cgroup.version"] = facts.cgroup_version.empty() ? "none" : facts.cgroup_version;
  return env;
}

}  // namespace faultline::sys
