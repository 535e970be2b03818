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
};

CounterSnapshot TakeCounterSnapshot();

// Deltas over the interval: vmstat (pgfault, pgmajfault, pswpin, pswpout, workingset
// refaults, oom_kill, pgscan_*/pgsteal_* by reclaim source plus pgscan/pgsteal totals),
// rusage (rusage_minflt, ..., rusage_utime_seconds) and PSI memory stall microseconds.
std::map<std::string, double> CounterDeltas(const CounterSnapshot& start, const CounterSnapshot& end);

}  // namespace faultline::workloads
