#pragma once
// Counting-mode perf events (perf_event_open(2), raw syscall: no sampling, no perf binary)
// over the threads of this process: tracepoints (SYSTEM:NAME, ids from tracefs), software
// counters (sw:page-faults, ...) and hardware counters (hw:cycles, ...; a board without a
// PMU, e.g. under qemu TCG, reports those as unsupported instead of failing) and the calls
// of kernel functions (calls:FUNC, a kprobe per thread from the kprobe PMU; a kernel without
// CONFIG_KPROBE_EVENTS or without the function reports it as unsupported).
//
// Flow: ResolvePerfEvents (names -> perf type/config; refuses unknown names and missing
// tracepoints, probes permission and PMU support on the calling thread), then
// PerfCounterSession::Open (one disabled counter per event per thread of /proc/self/task),
// Enable at the start of the measured interval, Disable at its end, Read (per event, summed
// over threads, scaled when the kernel multiplexed a counter).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sys/unique_fd.h"
#include "common/perf_events.h"

namespace faultline::sys {

// One event name, parsed: the text as given plus what perf_event_open needs. A
// tracepoint's config (its id) is only known once resolved against tracefs.
struct PerfEventName {
  std::string text;  // "mmap_lock:mmap_lock_start_locking", "sw:page-faults"
  PerfEventKind kind = PerfEventKind::kTracepoint;
  std::string system;
  std::string name;
  uint32_t type = 0;          // PERF_TYPE_* (calls: the kprobe PMU's, once resolved)
  uint64_t config = 0;        // PERF_COUNT_* (0 for a tracepoint until resolved; 0 for calls)
  uint64_t probe_offset = 0;  // calls: bytes past the function's symbol where the kprobe sits
};

// calls: where a kprobe at a function's first byte is refused (EINVAL), the bytes to skip:
// riscv's ftrace patch site (-fpatchable-function-entry: four compressed or two full nops,
// 8 bytes). Without KPROBES_ON_FTRACE (riscv since DYNAMIC_FTRACE_WITH_ARGS, Debian's 6.12)
// the kernel refuses a kprobe on that site; the first instruction after it runs once per
// call as well. 0 where no such retry is known.
#if defined(__riscv)
inline constexpr uint64_t kKprobeEntryPatchBytes = 8;
#else
inline constexpr uint64_t kKprobeEntryPatchBytes = 0;
#endif

// Syntax and known names only; nullopt with *error = "'EVENT': reason".
std::optional<PerfEventName> ParseEventName(std::string_view text, std::string* error);

// The tracefs tree to read tracepoint ids from: a mounted one (/sys/kernel/tracing, then
// /sys/kernel/debug/tracing), else tracefs mounted on a private directory under
// scratch_dir, unmounted and removed again when this object goes away.
class TracefsRoot {
 public:
  static std::optional<TracefsRoot> Find(const std::string& scratch_dir, std::string* error);
  // For tests: look only in `candidates` (no mounting unless scratch_dir is non-empty).
  static std::optional<TracefsRoot> Find(const std::vector<std::string>& candidates,
                                         const std::string& scratch_dir, std::string* error);
  TracefsRoot(TracefsRoot&& other) noexcept;
  TracefsRoot& operator=(TracefsRoot&& other) noexcept;
  TracefsRoot(const TracefsRoot&) = delete;
  TracefsRoot& operator=(const TracefsRoot&) = delete;
  ~TracefsRoot();

  const std::string& path() const { return path_; }
  bool mounted_here() const { return mounted_here_; }

 private:
  TracefsRoot(std::string path, bool mounted_here)
      : path_(std::move(path)), mounted_here_(mounted_here) {}
  void Unmount();

  std::string path_;
  bool mounted_here_ = false;
};

// The id of SYSTEM:NAME under a tracefs root (events/SYSTEM/NAME/id); nullopt with *error
// saying what is missing ("no tracepoint system 'x' on this kernel", "... has no event 'y'
// (it has: a, b, ...)").
std::optional<uint64_t> TracepointId(const std::string& tracefs_root, const std::string& system,
                                     const std::string& name, std::string* error);

// The ids of this process's threads (/proc/self/task), sorted; empty with *error when the
// directory cannot be read.
std::vector<pid_t> ThreadsOfThisProcess(std::string* error);

struct ResolvedPerfEvents {
  std::vector<PerfEventName> events;               // ready to open, in the order given
  std::map<std::string, std::string> unsupported;  // event -> why (hw:* without a PMU, ...)
  std::map<std::string, std::string> notes;        // event -> how it is counted, where unusual
};

struct PerfEventsError {
  bool usage = false;   // the name is wrong for this board (unknown, no such tracepoint)
  std::string message;  // "'EVENT': reason"
};

// Parses every name, resolves tracepoint ids (tracefs as TracefsRoot::Find, mounted only for
// the lookup), and opens each event once on the calling thread to learn, before anything
// runs, whether perf_event_open allows it here. nullopt with *error on the first refusal.
std::optional<ResolvedPerfEvents> ResolvePerfEvents(const std::vector<std::string>& names,
                                                    const std::string& scratch_dir,
                                                    PerfEventsError* error);

// The count of one event over an interval.
struct PerfCount {
  std::string event;
  double value = 0;            // summed over threads, each scaled by enabled/running if needed
  bool scaled = false;         // some thread's counter was multiplexed: value is an estimate
  bool never_counted = false;  // enabled but never on the PMU: value means nothing
  uint32_t threads = 0;        // threads whose counter was read
};

// One thread's reading (PERF_FORMAT_TOTAL_TIME_ENABLED | _RUNNING).
struct PerfReading {
  uint64_t value = 0;
  uint64_t time_enabled = 0;
  uint64_t time_running = 0;
};

// Sums readings of one event over threads, scaling a multiplexed one by enabled/running.
PerfCount SumReadings(const std::string& event, const std::vector<PerfReading>& readings);

class PerfCounterSession {
 public:
  // Opens one disabled counter per event per thread of this process (threads that exit
  // meanwhile are skipped). Raises RLIMIT_NOFILE towards its hard limit when the counters
  // need more descriptors.
  static std::optional<PerfCounterSession> Open(const std::vector<PerfEventName>& events,
                                                std::string* error);
  PerfCounterSession(PerfCounterSession&&) noexcept = default;
  PerfCounterSession& operator=(PerfCounterSession&&) noexcept = default;
  PerfCounterSession(const PerfCounterSession&) = delete;
  PerfCounterSession& operator=(const PerfCounterSession&) = delete;
  ~PerfCounterSession() = default;

  bool Enable(std::string* error);
  bool Disable(std::string* error);
  // One entry per event, in the order given to Open.
  std::optional<std::vector<PerfCount>> Read(std::string* error) const;
  size_t threads() const { return threads_; }

 private:
  PerfCounterSession() = default;

  std::vector<PerfEventName> events_;
  std::vector<std::vector<UniqueFd>> fds_;  // [event][thread]
  size_t threads_ = 0;
};

}  // namespace faultline::sys
