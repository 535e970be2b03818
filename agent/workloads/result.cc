#include "agent/workloads/result.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "agent/sys/cgroup.h"
#include "agent/sys/file_io.h"

namespace faultline::workloads {
namespace {

// /proc/vmstat mixes event counters (pgfault, pswpin, workingset_refault_file, and the
// debug counters a patched kernel adds) with levels (nr_free_pages, nr_swapcached): a
// level's change over a run is not an amount of work, so levels are left out. Levels are the
// nr_* items except the two that count events, and workingset_nodes.
bool IsVmstatLevel(const std::string& name) {
  if (name == "workingset_nodes") return true;
  if (name == "nr_dirtied" || name == "nr_written") return false;
  return name.rfind("nr_", 0) == 0;
}

// memory.stat: sizes (anon, file, shmem, ..., v1's cache/rss/total_*) are levels; the
// event counters are the pg*, workingset_*, thp_*, swap and zswap ones (v1: pgfault,
// pgmajfault, pgpgin, pgpgout and their total_ forms).
bool IsMemcgStatEvent(const std::string& name) {
  if (name == "workingset_nodes") return false;
  for (const char* prefix : {"pg", "total_pg", "workingset_", "thp_", "zswpin", "zswpout", "zswpwb",
                             "swpin_", "swpout_", "pswp"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

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
  if (!result.folded_stacks.empty()) json["folded_stacks"] = result.folded_stacks;
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

CounterDeltas DeltasOfCounters(const std::map<std::string, uint64_t>& start,
                               const std::map<std::string, uint64_t>& end,
                               const std::string& prefix,
                               const std::function<bool(const std::string&)>& counts) {
  CounterDeltas out;
  for (const auto& [name, value] : end) {
    if (!counts(name)) continue;
    auto a = start.find(name);
    if (a == start.end()) {
      out.one_sided.push_back(prefix + name);
      continue;
    }
    if (value < a->second) {
      out.resets.push_back(prefix + name);
      continue;
    }
    if (value > a->second) out.values[prefix + name] = static_cast<double>(value - a->second);
  }
  for (const auto& [name, value] : start) {
    if (counts(name) && end.find(name) == end.end()) out.one_sided.push_back(prefix + name);
  }
  return out;
}

CounterDeltas ComputeCounterDeltas(const CounterSnapshot& start, const CounterSnapshot& end) {
  CounterDeltas out;
  auto merge = [&](CounterDeltas part) {
    out.values.merge(part.values);
    out.one_sided.insert(out.one_sided.end(), part.one_sided.begin(), part.one_sided.end());
    out.resets.insert(out.resets.end(), part.resets.begin(), part.resets.end());
  };
  merge(DeltasOfCounters(start.vmstat, end.vmstat, "vmstat.",
                         [](const std::string& k) { return !IsVmstatLevel(k); }));
  merge(DeltasOfCounters(start.memcg_stat, end.memcg_stat, "memcg.", IsMemcgStatEvent));
  merge(DeltasOfCounters(start.memcg_events, end.memcg_events, "memcg.events.",
                         [](const std::string&) { return true; }));
  auto& v = out.values;
  const auto& u0 = start.usage;
  const auto& u1 = end.usage;
  auto rusage = [](long a, long b) {
    return Delta(static_cast<uint64_t>(a), static_cast<uint64_t>(b));
  };
  v["rusage.minflt"] = rusage(u0.ru_minflt, u1.ru_minflt);
  v["rusage.majflt"] = rusage(u0.ru_majflt, u1.ru_majflt);
  v["rusage.nvcsw"] = rusage(u0.ru_nvcsw, u1.ru_nvcsw);
  v["rusage.nivcsw"] = rusage(u0.ru_nivcsw, u1.ru_nivcsw);
  v["rusage.utime_seconds"] = Seconds(u1.ru_utime) - Seconds(u0.ru_utime);
  v["rusage.stime_seconds"] = Seconds(u1.ru_stime) - Seconds(u0.ru_stime);
  if (end.memcg_peak_bytes) v["memcg.peak_bytes"] = static_cast<double>(*end.memcg_peak_bytes);
  if (start.memcg_pressure && end.memcg_pressure) {
    v["memcg.psi.memory_some_us"] =
        Delta(start.memcg_pressure->some_total_us, end.memcg_pressure->some_total_us);
    v["memcg.psi.memory_full_us"] =
        Delta(start.memcg_pressure->full_total_us, end.memcg_pressure->full_total_us);
  }
  if (start.memory_pressure && end.memory_pressure) {
    v["psi.memory_some_us"] =
        Delta(start.memory_pressure->some_total_us, end.memory_pressure->some_total_us);
    v["psi.memory_full_us"] =
        Delta(start.memory_pressure->full_total_us, end.memory_pressure->full_total_us);
  }
  std::sort(out.one_sided.begin(), out.one_sided.end());
  std::sort(out.resets.begin(), out.resets.end());
  return out;
}

}  // namespace faultline::workloads
