#include "agent/sys/thp.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "agent/sys/file_io.h"
#include "common/units.h"

namespace faultline::sys {

std::string ParseBracketedChoice(std::string_view text) {
  size_t open = text.find('[');
  if (open == std::string_view::npos) return "";
  size_t close = text.find(']', open);
  if (close == std::string_view::npos) return "";
  return std::string(text.substr(open + 1, close - open - 1));
}

uint64_t ThpPmdSize(const std::string& thp_dir) {
  auto text = ReadFileToString(thp_dir + "/hpage_pmd_size", nullptr);
  if (!text) return 0;
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  return ParseUnsigned(*text).value_or(0);
}

std::string ShmemEnabledPathFor(uint64_t folio_bytes, const std::string& thp_dir) {
  const std::string per_size =
      thp_dir + "/hugepages-" + std::to_string(folio_bytes / 1024) + "kB/shmem_enabled";
  if (PathExists(per_size)) return per_size;
  if (folio_bytes != 0 && folio_bytes == ThpPmdSize(thp_dir) &&
      PathExists(thp_dir + "/shmem_enabled")) {
    return thp_dir + "/shmem_enabled";
  }
  return "";
}

std::optional<ScopedSysfsChoice> ScopedSysfsChoice::Set(const std::string& path,
                                                        const std::string& value,
                                                        std::string* error) {
  auto text = ReadFileToString(path, error);
  if (!text) return std::nullopt;
  ScopedSysfsChoice scoped;
  scoped.previous_ = ParseBracketedChoice(*text);
  if (scoped.previous_ == value) return scoped;  // nothing to change or restore
  if (!WriteToExistingFile(path, value, error)) return std::nullopt;
  scoped.path_ = path;
  return scoped;
}

ScopedSysfsChoice::ScopedSysfsChoice(ScopedSysfsChoice&& other) noexcept
    : path_(std::exchange(other.path_, std::string())), previous_(other.previous_) {}

ScopedSysfsChoice::~ScopedSysfsChoice() {
  if (path_.empty() || previous_.empty()) return;
  std::string ignored;
  WriteToExistingFile(path_, previous_, &ignored);
}

std::optional<std::map<std::string, uint64_t>> ParseSmapsFor(std::string_view smaps,
                                                             uintptr_t start) {
  char header[32];
  std::snprintf(header, sizeof(header), "%" PRIxPTR "-", start);
  const std::string_view wanted(header);
  bool inside = false;
  std::map<std::string, uint64_t> fields;
  while (!smaps.empty()) {
    size_t eol = smaps.find('\n');
    std::string_view line = smaps.substr(0, eol);
    smaps = eol == std::string_view::npos ? std::string_view() : smaps.substr(eol + 1);
    size_t colon = line.find(':');
    // Mapping headers start with "start-end perms"; field lines are "Name:   N kB".
    const bool is_header = colon == std::string_view::npos || line.find(' ') < colon;
    if (is_header) {
      if (inside) return fields;
      inside = line.substr(0, wanted.size()) == wanted;
      continue;
    }
    if (!inside) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    value = value.substr(0, value.find(' '));
    if (auto v = ParseUnsigned(value)) fields[std::string(line.substr(0, colon))] = *v;
  }
  if (inside) return fields;
  return std::nullopt;
}

std::optional<std::map<std::string, uint64_t>> ReadSmapsFor(const void* start) {
  auto text = ReadFileToString("/proc/self/smaps", nullptr);
  if (!text) return std::nullopt;
  return ParseSmapsFor(*text, reinterpret_cast<uintptr_t>(start));
}

}  // namespace faultline::sys
