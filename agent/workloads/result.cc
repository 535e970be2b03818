#include "agent/workloads/result.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "agent/sys/cgroup.h"
#include "agent/sys/file_io.h"

namespace faultline::workloads {
namespace {

// vmstat counters copied as deltas when the kernel has them (names vary by version:
// workingset_refault split into _anon/_file in 5.9).
constexpr const char* kVmstatDeltas[] = {
    "pgfault",         "pgmajfault",         "pswpin",
    "pswpout",         "workingset_refault", "workingset_refault_anon",
    "workingset_refault_file", "workingset_activate_anon", "workingset_activate_file",
    "oom_kill",        "pgscan_kswapd",      "pgscan_direct",
    "pgscan_khugepaged", "pgscan_proactive", "pgsteal_kswapd",
    "pgsteal_direct",  "pgsteal_khugepaged", "pgsteal_proactive",
    // 6.12+: zero-filled pages skip swap I/O (no pswpin/pswpout); these count them.
    "swpin_zero",      "swpout_zero",        "zswpin",            "zswpout",
    "pgpgin",          "pgpgout",            "thp_file_alloc",    "thp_file_mapped",
};

// The by-source counters partition all scanning/stealing; pgscan_anon/_file split the
// same pages again by type, so summing every pgscan_* would count pages twice.
constexpr const char* kScanSources[] = {"kswapd", "direct", "khugepaged", "proactive"};

// memory.stat event counters worth a delta; which exist depends on version (v1 has no
// pgscan/pgsteal, v2 has them all).
constexpr const char* kMemcgStatDeltas[] = {
    "pgfault",       "pgmajfault",     "workingset_refault_anon", "workingset_refault_file",
    "pgscan",        "pgsteal",        "pgscan_kswapd",           "pgscan_direct",
    "pgsteal_kswapd", "pgsteal_direct", "pswpin",                 "pswpout",
};

double Seconds(const struct timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

double Delta(uint64_t start, uint64_t end) {
  return end >= start ? static_cast<double>(end - start) : 0.0;  // counters never go back
}

}  // namespace

std::string FormatWorkloadResultJson(const WorkloadResultData& result) {
  // JSON has no inf/NaN (a counter over a zero-length interval): written as 0.
  auto number = [](double v) { return std::isfinite(v) ? v : 0.0; };
  nlohmann::ordered_json json;
  json["benchmark"] = result.benchmark;
  json["throughput_rounds_per_second"] = number(result.throughput_rounds_per_second);
  json["rounds"] = result.rounds;
  json["pages"] = result.pages;
  json["pages_per_second"] = number(result.pages_per_second);
  json["too_coarse"] = result.too_coarse;
  json["duration_seconds"] = number(result.duration_seconds);
  json["warmup_seconds"] = number(result.warmup_seconds);
  json["samples"] = nlohmann::ordered_json::array();
  for (const auto& s : result.samples) {
    json["samples"].push_back({{"second", s.second}, {"rounds", s.rounds}, {"pages", s.pages}});
  }
  json["params"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : result.params) json["params"][k] = v;
  json["counters"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : result.counters) json["counters"][k] = number(v);
  json["environment"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : result.environment) json["environment"][k] = v;
  // Bytes that are not UTF-8 (a path, a kernel's cmdline) become U+FFFD: protobuf's JSON
  // parser rejects invalid UTF-8, and the result must always reach the controller.
  return json.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

CounterSnapshot TakeCounterSnapshot(const std::string& memcg_dir) {
  CounterSnapshot snapshot;
  if (!memcg_dir.empty()) {
    if (auto text = sys::ReadFileToString(memcg_dir + "/memory.stat", nullptr)) {
      snapshot.memcg_stat = sys::ParseKeyValueLines(*text);
    }
    if (auto version = sys::MemcgDirVersion(memcg_dir)) {
      if (auto events = sys::ReadMemcgEvents(memcg_dir, *version, nullptr)) {
        snapshot.memcg_events = std::move(*events);
      }
      snapshot.memcg_peak_bytes = sys::ReadMemcgPeakBytes(memcg_dir, *version);
      if (*version == sys::CgroupVersion::kV2) {
        snapshot.memcg_pressure = sys::ReadMemoryPressure(memcg_dir + "/memory.pressure");
      }
    }
  }
  if (auto vmstat = sys::ReadVmstat()) snapshot.vmstat = std::move(*vmstat);
  ::getrusage(RUSAGE_SELF, &snapshot.usage);
  snapshot.memory_pressure = sys::ReadMemoryPressure();
  return snapshot;
}

std::map<std::string, double> CounterDeltas(const CounterSnapshot& start, const CounterSnapshot& end) {
  std::map<std::string, double> out;
  for (const char* name : kVmstatDeltas) {
    auto a = start.vmstat.find(name);
    auto b = end.vmstat.find(name);
    if (a != start.vmstat.end() && b != end.vmstat.end()) out[name] = Delta(a->second, b->second);
  }
  for (const char* kind : {"pgscan", "pgsteal"}) {
    double total = 0;
    bool any = false;
    for (const char* source : kScanSources) {
      auto it = out.find(std::string(kind) + "_" + source);
      if (it != out.end()) {
        total += it->second;
        any = true;
      }
    }
    if (any) {
      out[std::string(kind) + "_total"] = total;
      out[kind] = total;  // the names: pgscan, pgsteal (all reclaim sources)
    }
  }
  for (const char* name : kMemcgStatDeltas) {
    auto a = start.memcg_stat.find(name);
    auto b = end.memcg_stat.find(name);
    if (a != start.memcg_stat.end() && b != end.memcg_stat.end()) {
      out[std::string("memcg_") + name] = Delta(a->second, b->second);
    }
  }
  const auto& u0 = start.usage;
  const auto& u1 = end.usage;
  out["rusage_minflt"] = Delta(static_cast<uint64_t>(u0.ru_minflt), static_cast<uint64_t>(u1.ru_minflt));
  out["rusage_majflt"] = Delta(static_cast<uint64_t>(u0.ru_majflt), static_cast<uint64_t>(u1.ru_majflt));
  out["rusage_nvcsw"] = Delta(static_cast<uint64_t>(u0.ru_nvcsw), static_cast<uint64_t>(u1.ru_nvcsw));
  out["rusage_nivcsw"] = Delta(static_cast<uint64_t>(u0.ru_nivcsw), static_cast<uint64_t>(u1.ru_nivcsw));
  out["rusage_utime_seconds"] = Seconds(u1.ru_utime) - Seconds(u0.ru_utime);
  out["rusage_stime_seconds"] = Seconds(u1.ru_stime) - Seconds(u0.ru_stime);
  for (const auto& [name, value] : end.memcg_events) {
    out["memcg_event." + name] = static_cast<double>(value);
    auto a = start.memcg_events.find(name);
    if (a != start.memcg_events.end()) out["memcg_event_delta." + name] = Delta(a->second, value);
  }
  if (end.memcg_peak_bytes) out["memcg_peak_bytes"] = static_cast<double>(*end.memcg_peak_bytes);
  if (start.memcg_pressure && end.memcg_pressure) {
    out["memcg_psi_memory_some_us"] =
        Delta(start.memcg_pressure->some_total_us, end.memcg_pressure->some_total_us);
    out["memcg_psi_memory_full_us"] =
        Delta(start.memcg_pressure->full_total_us, end.memcg_pressure->full_total_us);
  }
  if (start.memory_pressure && end.memory_pressure) {
    out["psi_memory_some_us"] = Delta(start.memory_pressure->some_total_us, end.memory_pressure->some_total_us);
    out["psi_memory_full_us"] = Delta(start.memory_pressure->full_total_us, end.memory_pressure->full_total_us);
  }
  return out;
}

}  // namespace faultline::workloads
