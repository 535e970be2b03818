#pragma once
// The result faultline-workload prints: one JSON object that parses into
// faultline.v1.WorkloadResult (snake_case field names), plus the counters it carries.
#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/sys/vmstat.h"
#include "agent/workloads/harness.h"

namespace faultline::workloads {

struct WorkloadResultData {
  std::string benchmark;
  double throughput_rounds_per_second = 0;
  uint64_t rounds = 0;
  uint64_t pages = 0;  // pages touched by the benchmark's threads
  double pages_per_second = 0;
  bool too_coarse = false;  // rounds < kMinRoundsToCompare: compare pages/s instead
  double duration_seconds = 0;
  double warmup_seconds = 0;
  std::vector<Sample> samples;
  std::map<std::string, std::string> params;
  std::map<std::string, double> counters;
  std::map<std::string, std::string> environment;
  std::string folded_stacks;  // --profile-hz: "root;...;leaf COUNT" a line ("" : none)
};

std::string FormatWorkloadResultJson(const WorkloadResultData& result);

// System and process counters read at the start and end of the measured interval.
struct CounterSnapshot {
  sys::VmstatCounters vmstat;
  struct rusage usage {};
  std::optional<sys::MemoryPressure> memory_pressure;
  // memory.stat of the memcg the workload runs in: reclaim caused by a memcg limit is
  // counted there, not in /proc/vmstat's pgscan/pgsteal.
  std::map<std::string, uint64_t> memcg_stat;
  // memory.events (v2) or failcnt/oom_control (v1) of that memcg, and its PSI (v2).
  std::map<std::string, uint64_t> memcg_events;
  std::optional<sys::MemoryPressure> memcg_pressure;
  std::optional<uint64_t> memcg_peak_bytes;
};

// `memcg_dir` may be empty (no memory cgroup known).
CounterSnapshot TakeCounterSnapshot(const std::string& memcg_dir);

// Every counter that moved over the measured interval, by where it comes from:
//   vmstat.<key>          each /proc/vmstat event counter with a non-zero delta (levels such
//                         as nr_free_pages are left out), so a debug counter that a patched
//                         kernel adds appears under its own name;
//   memcg.<key>           each memory.stat event counter of the run's memcg (v1 and v2);
//   memcg.events.<key>    memory.events (v2) or failcnt/oom_control (v1) deltas;
//   memcg.psi.memory_{some,full}_us, psi.memory_{some,full}_us   stall time (always);
//   memcg.peak_bytes      the memcg's peak usage;
//   rusage.{minflt,majflt,nvcsw,nivcsw,utime_seconds,stime_seconds}   of the workload.
// A counter absent from one snapshot (cannot happen within one boot, but a memcg file can
// come and go) is named in one_sided; one that went backwards (a reset) in resets; neither
// gets a value.
struct CounterDeltas {
  std::map<std::string, double> values;
  std::vector<std::string> one_sided;
  std::vector<std::string> resets;
};
CounterDeltas ComputeCounterDeltas(const CounterSnapshot& start, const CounterSnapshot& end);

}  // namespace faultline::workloads
