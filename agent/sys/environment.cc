#include "agent/sys/environment.h"

#include <cstdio>

#include "agent/sys/board_facts.h"
#include "agent/sys/file_io.h"
#include "agent/sys/thp.h"
#include "agent/sys/vmstat.h"

namespace faultline::sys {
namespace {

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
    text.pop_back();
  }
  return text;
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

}  // namespace

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

std::map<std::string, std::string> CollectEnvironmentFingerprint(const EnvironmentSources& sources) {
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
  for (const auto& path : {sources.boot_dir + "/config-" + facts.kernel_release,
                           sources.proc_root + "/config.gz"}) {
    if (auto config = ReadFileToString(path, nullptr); config && !config->empty()) {
      env["kernel.config_fnv1a64"] = Fnv1a64Hex(*config);
      env["kernel.config_source"] = path;
      break;
    }
  }

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
