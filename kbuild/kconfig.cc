#include "kbuild/kconfig.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace faultline::kbuild {

std::map<std::string, std::string> ParseConfig(absl::string_view text) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "# CONFIG_")) {
      // (a moved std::string: `out[key] = "n"` trips GCC 12 -Wrestrict, a false alarm)
      if (absl::ConsumeSuffix(&line, " is not set"))
        out.insert_or_assign(std::string(line), std::string("n"));
      continue;
    }
    if (!absl::ConsumePrefix(&line, "CONFIG_")) continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    out.insert_or_assign(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return out;
}

std::vector<Requirement> BoardRequirements(absl::string_view arch,
                                           bool tree_has_per_vma_lock_stats) {
  std::vector<Requirement> r = {
      {{"CGROUPS"}, "runs execute in memory cgroups"},
      {{"MEMCG"}, "runs execute under memory-cgroup limits"},
      {{"SWAP"}, "swap-in runs swap"},
      {{"ZRAM"}, "the agent's swap device is zram"},
      {{"KEXEC", "KEXEC_FILE"}, "the agent switches kernels with kexec"},
      {{"PERF_EVENTS"}, "counters are perf events"},
      {{"TRACING"}, "the mm tracepoints (mmap_lock:*) need the tracing core"},
      {{"VM_EVENT_COUNTERS"}, "vmstat counters (pgfault, pswpin, ...)"},
      {{"BLK_DEV_INITRD"}, "boards boot with an initramfs"},
  };
  if (arch == "x86_64") {
    r.push_back({{"RELOCATABLE"},
                 "kexec loads a non-relocatable x86 kernel at 1 MiB only, and refuses the next "
                 "larger one after a kexec'd kernel"});
  }
  if (tree_has_per_vma_lock_stats) {
    r.push_back({{"PER_VMA_LOCK_STATS"}, "per-VMA lock counters (vma_lock_*) in vmstat"});
  }
  return r;
}

std::vector<std::string> MissingOptions(const std::map<std::string, std::string>& config,
                                        const std::vector<Requirement>& requirements) {
  std::vector<std::string> missing;
  for (const Requirement& req : requirements) {
    bool ok = false;
    for (const std::string& option : req.any_of) {
      auto it = config.find(option);
      if (it != config.end() && it->second == "y") ok = true;
    }
    // PER_VMA_LOCK_STATS only where the arch has per-VMA locks at all.
    if (!ok && req.any_of.front() == "PER_VMA_LOCK_STATS") {
      auto lock = config.find("PER_VMA_LOCK");
      if (lock == config.end() || lock->second != "y") ok = true;
    }
    if (ok) continue;
    std::vector<std::string> names;
    std::string state;
    for (const std::string& option : req.any_of) {
      names.push_back("CONFIG_" + option);
      auto it = config.find(option);
      if (state.empty()) {
        state = it == config.end() ? "absent" : it->second == "n" ? "not set" : "=" + it->second;
      }
    }
    missing.push_back(
        absl::StrCat(absl::StrJoin(names, " or "), "=y (", req.why, "; final: ", state, ")"));
  }
  return missing;
}

std::vector<std::string> DroppedFragmentOptions(const std::map<std::string, std::string>& fragment,
                                                const std::map<std::string, std::string>& config) {
  std::vector<std::string> dropped;
  for (const auto& [option, asked] : fragment) {
    auto it = config.find(option);
    const std::string final_value = it == config.end() ? "n" : it->second;
    if (final_value == asked) continue;
    if (asked == "n" && it == config.end()) continue;
    dropped.push_back(absl::StrCat("CONFIG_", option, "=", asked, " asked, final: ",
                                   final_value == "n" ? "not set" : final_value));
  }
  return dropped;
}

}  // namespace faultline::kbuild
