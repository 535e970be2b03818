#pragma once
// The names of the perf events a job may count per run (JobSpec.events, faultline-workload
// --events): the syntax and the known software/hardware names, shared by the controller's
// validation, the agent's own check and the workload. Whether a tracepoint exists is only
// known on the board (agent/sys/perf_counters.h resolves it against tracefs).
//   SYSTEM:NAME   a tracepoint, [a-z0-9_]+:[a-z0-9_]+ (mmap_lock:mmap_lock_start_locking)
//   sw:NAME       a software counter (page-faults, context-switches, ...)
//   hw:NAME       a hardware counter (cycles, ...): boards without a PMU report it as
//                 unsupported instead of failing
//   calls:FUNC    the exact number of calls of a kernel function (lock_vma_under_rcu,
//                 handle_mm_fault): a kprobe per thread through the kprobe PMU
//                 (CONFIG_KPROBE_EVENTS; a kernel without it, or without the function,
//                 reports it as unsupported instead of failing)
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

inline constexpr size_t kMaxPerfEvents = 16;
inline constexpr size_t kMaxPerfEventNameLength = 128;

enum class PerfEventKind { kTracepoint, kSoftware, kHardware, kCalls };

struct PerfEventNameParts {
  PerfEventKind kind = PerfEventKind::kTracepoint;
  std::string system;  // the tracepoint's system, or "sw" / "hw" / "calls"
  std::string name;    // the tracepoint's, the counter's or the kernel function's name
};

// The known names after "sw:" and "hw:", in the order the help text lists them.
const std::vector<std::string>& SoftwarePerfEventNames();
const std::vector<std::string>& HardwarePerfEventNames();

// Splits and checks one event name; nullopt with *why (the reason, without the name).
std::optional<PerfEventNameParts> SplitPerfEventName(std::string_view event, std::string* why);

// Checks a list: at most kMaxPerfEvents, each valid, none twice. On an error *index is the
// offending entry (or list.size() when the list as a whole is refused, e.g. too long) and
// *why the reason, which names the event.
bool CheckPerfEventList(const std::vector<std::string>& events, size_t* index, std::string* why);

// An event name as a message quotes it: 'name', cut to 64 characters ("...'") so a message
// never carries unbounded user text.
std::string QuotedEventName(std::string_view event);

}  // namespace faultline
