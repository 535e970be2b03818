#include "common/perf_events.h"

#include <algorithm>

namespace faultline {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

bool IsNamePart(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsNameChar);
}

// A kernel symbol as kallsyms spells it: C identifiers plus the compiler's suffixes
// (folio_add_lru.part.0, __x64_sys_munmap).
bool IsFunctionName(std::string_view s) {
  auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  };
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') && s[0] != '.' &&
         std::all_of(s.begin(), s.end(), ok);
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

const std::vector<std::string>& SoftwarePerfEventNames() {
  static const std::vector<std::string> kNames = {"page-faults",    "minor-faults",
                                                  "major-faults",   "context-switches",
                                                  "cpu-migrations", "task-clock"};
  return kNames;
}

const std::vector<std::string>& HardwarePerfEventNames() {
  static const std::vector<std::string> kNames = {"cycles", "instructions", "cache-misses",
                                                  "branch-misses"};
  return kNames;
}

std::optional<PerfEventNameParts> SplitPerfEventName(std::string_view event, std::string* why) {
  if (event.empty()) {
    *why = "empty event name (SYSTEM:NAME, sw:NAME, hw:NAME or calls:FUNCTION)";
    return std::nullopt;
  }
  if (event.size() > kMaxPerfEventNameLength) {
    *why = "event name longer than " + std::to_string(kMaxPerfEventNameLength) + " characters";
    return std::nullopt;
  }
  const size_t colon = event.find(':');
  if (colon == std::string_view::npos) {
    *why =
        "malformed event name (want SYSTEM:NAME for a tracepoint, sw:NAME, hw:NAME or "
        "calls:FUNCTION)";
    return std::nullopt;
  }
  PerfEventNameParts parts;
  parts.system = std::string(event.substr(0, colon));
  parts.name = std::string(event.substr(colon + 1));
  auto known = [&](const std::vector<std::string>& names, const char* what) {
    if (std::find(names.begin(), names.end(), parts.name) != names.end()) return true;
    *why = "unknown " + std::string(what) + " event '" + parts.name.substr(0, 64) + "' (" +
           parts.system + ": one of " + JoinNames(names) + ")";
    return false;
  };
  if (parts.system == "sw") {
    if (!known(SoftwarePerfEventNames(), "software")) return std::nullopt;
    parts.kind = PerfEventKind::kSoftware;
    return parts;
  }
  if (parts.system == "hw") {
    if (!known(HardwarePerfEventNames(), "hardware")) return std::nullopt;
    parts.kind = PerfEventKind::kHardware;
    return parts;
  }
  if (parts.system == "calls") {
    if (!IsFunctionName(parts.name)) {
      *why =
          "malformed kernel function name (want calls:FUNCTION, a symbol of [A-Za-z0-9_.], "
          "e.g. calls:lock_vma_under_rcu)";
      return std::nullopt;
    }
    parts.kind = PerfEventKind::kCalls;
    return parts;
  }
  if (!IsNamePart(parts.system) || !IsNamePart(parts.name)) {
    *why =
        "malformed tracepoint name (want SYSTEM:NAME, both [a-z0-9_]+, e.g. "
        "mmap_lock:mmap_lock_start_locking)";
    return std::nullopt;
  }
  parts.kind = PerfEventKind::kTracepoint;
  return parts;
}

bool CheckPerfEventList(const std::vector<std::string>& events, size_t* index, std::string* why) {
  if (events.size() > kMaxPerfEvents) {
    *index = events.size();
    *why = "at most " + std::to_string(kMaxPerfEvents) + " events, got " +
           std::to_string(events.size());
    return false;
  }
  for (size_t i = 0; i < events.size(); ++i) {
    *index = i;
    std::string reason;
    if (!SplitPerfEventName(events[i], &reason)) {
      *why = QuotedEventName(events[i]) + ": " + reason;
      return false;
    }
    if (std::find(events.begin(), events.begin() + static_cast<std::ptrdiff_t>(i), events[i]) !=
        events.begin() + static_cast<std::ptrdiff_t>(i)) {
      *why = QuotedEventName(events[i]) + ": listed twice";
      return false;
    }
  }
  return true;
}

std::string QuotedEventName(std::string_view event) {
  constexpr size_t kShown = 64;
  return "'" + std::string(event.substr(0, kShown)) + (event.size() > kShown ? "...'" : "'");
}

}  // namespace faultline
