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

// Deltas over the interval: vmstat (pgfault, pgmajfault, pswpin, pswpout, workingset
// refaults, oom_kill, pgscan_*/pgsteal_* by reclaim source plus pgscan/pgsteal totals),
// rusage (rusage_minflt, ..., rusage_utime_seconds), PSI memory stall microseconds, and
// "memcg_"-prefixed memory.stat event deltas (memcg_pgscan, memcg_workingset_refault_file...),
// "memcg_event.<name>" totals at the end (oom_kill, max/failcnt: since the memcg was made)
// and "memcg_event_delta.<name>" over the interval, memcg PSI (v2) and peak usage.
std::map<std::string, double> CounterDeltas(const CounterSnapshot& start, const CounterSnapshot& end);

}  // namespace faultline::workloads
