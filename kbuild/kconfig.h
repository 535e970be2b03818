#pragma once
// What a faultline board needs of a kernel's .config, and checking a final .config for it.
// Pure: tests feed .config text.
#include <map>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

namespace faultline::kbuild {

// CONFIG_X -> "y", "m", a value, or "n" for "# CONFIG_X is not set". Keys without CONFIG_.
std::map<std::string, std::string> ParseConfig(absl::string_view text);

struct Requirement {
  std::vector<std::string> any_of;  // satisfied when one of them is =y
  std::string why;
};

// The options a board needs built in (=y): memory cgroups, swap on zram, kexec, perf events,
// the mm tracepoints, vmstat counters, the initramfs, and PER_VMA_LOCK_STATS where the tree
// has it (`tree_has_per_vma_lock_stats`) and the arch has per-VMA locks; on x86_64 a
// relocatable image (kexec-tools loads any other at exactly 1 MiB: see board.config).
std::vector<Requirement> BoardRequirements(absl::string_view arch,
                                           bool tree_has_per_vma_lock_stats);

// One line per unmet requirement ("CONFIG_ZRAM (swap-in runs swap to zram)"), empty when
// `config` has them all.
std::vector<std::string> MissingOptions(const std::map<std::string, std::string>& config,
                                        const std::vector<Requirement>& requirements);

// Options a fragment asked for that the final .config does not have as asked ("CONFIG_X=y
// asked, final: not set"): olddefconfig drops what a dependency rules out.
std::vector<std::string> DroppedFragmentOptions(const std::map<std::string, std::string>& fragment,
                                                const std::map<std::string, std::string>& config);

}  // namespace faultline::kbuild
