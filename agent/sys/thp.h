#pragma once
// Transparent huge page settings (/sys/kernel/mm/transparent_hugepage) and per-mapping
// smaps facts. Parsers take text so tests can feed them fixed content.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace faultline::sys {

inline constexpr char kThpDir[] = "/sys/kernel/mm/transparent_hugepage";

// "always [madvise] never" -> "madvise"; "" when no word is bracketed.
std::string ParseBracketedChoice(std::string_view text);

// The shmem_enabled file that governs shmem folios of `folio_bytes`: the per-size
// hugepages-<N>kB/shmem_enabled (Linux 6.11+), else the top-level shmem_enabled when
// folio_bytes is the PMD size (hpage_pmd_size). "" when neither applies.
std::string ShmemEnabledPathFor(uint64_t folio_bytes, const std::string& thp_dir = kThpDir);

// hpage_pmd_size, or 0 when THP is not built in.
uint64_t ThpPmdSize(const std::string& thp_dir = kThpDir);

// Sets a sysfs choice file (e.g. shmem_enabled) to `value` and puts the old choice back
// when destroyed. A SIGKILL in between leaves the new value; the environment records both.
class ScopedSysfsChoice {
 public:
  static std::optional<ScopedSysfsChoice> Set(const std::string& path, const std::string& value,
                                              std::string* error);
  ScopedSysfsChoice(ScopedSysfsChoice&& other) noexcept;
  ScopedSysfsChoice& operator=(ScopedSysfsChoice&&) = delete;
  ScopedSysfsChoice(const ScopedSysfsChoice&) = delete;
  ScopedSysfsChoice& operator=(const ScopedSysfsChoice&) = delete;
  ~ScopedSysfsChoice();

  const std::string& previous() const { return previous_; }

 private:
  ScopedSysfsChoice() = default;
  std::string path_;  // empty: nothing to restore
  std::string previous_;
};

// The smaps block ("Rss:", "ShmemPmdMapped:", ... in kB) of the mapping that starts at
// `start`, from /proc/self/smaps-format text. Values are in kB as the kernel prints them.
std::optional<std::map<std::string, uint64_t>> ParseSmapsFor(std::string_view smaps,
                                                             uintptr_t start);
std::optional<std::map<std::string, uint64_t>> ReadSmapsFor(const void* start);

}  // namespace faultline::sys
