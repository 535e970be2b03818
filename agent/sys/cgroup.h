#pragma once
// Memory cgroups for benchmark runs, on cgroup v2 and on the v1 memory hierarchy (both
// exist in labs). Every run gets a fresh child cgroup <parent>/faultline/<name>; the
// MemoryCgroup object owns it and kills what is left inside and removes it when destroyed.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sys/unique_fd.h"

namespace faultline::sys {

enum class CgroupVersion { kV1, kV2 };

// "1" or "2", as reported in board facts and result environments.
std::string_view CgroupVersionName(CgroupVersion version);

struct CgroupBackend {
  CgroupVersion version = CgroupVersion::kV2;
  // Mount point of the hierarchy that has the memory controller: /sys/fs/cgroup on a v2
  // host, /sys/fs/cgroup/memory on v1. Paths in /proc/<pid>/cgroup are relative to it.
  std::string hierarchy_root;
  // Directory the faultline/ subtree is created in: the hierarchy root, or a delegated
  // v2 subtree (systemd Delegate=) configured for the agent.
  std::string parent_dir;
};

struct CgroupBackendOptions {
  std::string cgroup_root = "/sys/fs/cgroup";  // overridable so tests can use fake trees
  // Optional delegated v2 directory, or kDelegatedParent: on cgroup v2 the parent of the
  // agent's own cgroup, a leaf named "agent" (faultline-agent.service moves the agent
  // there, see the unit); on v1 nothing (the v1 memory hierarchy).
  std::string v2_parent;
  std::string self_cgroup_file = "/proc/self/cgroup";  // the agent's own cgroup (tests: fake)
};
inline constexpr std::string_view kDelegatedParent = "delegated";

// v2 when cgroup_root (or the configured v2 parent) lists "memory" in cgroup.controllers;
// else the v1 memory hierarchy at <cgroup_root>/memory; else a hybrid v2 mount at
// <cgroup_root>/unified with memory. Fails with a message when none is usable.
std::optional<CgroupBackend> DetectCgroupBackend(const CgroupBackendOptions& options,
                                                 std::string* error);

// Limits for one run. Unset means "no limit" (v2 "max").
struct MemcgLimits {
  std::optional<uint64_t> memory_max;
  std::optional<uint64_t> memory_high;
  std::optional<uint64_t> swap_max;
};

// One write into a cgroup directory, in the order it must happen.
struct CgroupFileWrite {
  std::string file;
  std::string value;
};

// What PlanMemcgLimits found about the cgroup it plans for.
struct MemcgFeatures {
  bool has_memsw = false;     // v1: memory.memsw.limit_in_bytes (swap accounting on)
  bool has_swap_max = false;  // v2: memory.swap.max
};

struct MemcgLimitPlan {
  std::vector<CgroupFileWrite> writes;
  // "memcg.memory_max" -> "memory.limit_in_bytes=268435456" etc.; limits that could not be
  // expressed are described with "not applied: <why>".
  std::map<std::string, std::string> applied;
};

// Maps limits onto the files of one cgroup version. Pure, so both versions' mappings are
// unit-tested on any host.
MemcgLimitPlan PlanMemcgLimits(CgroupVersion version, const MemcgLimits& limits,
                               const MemcgFeatures& features);

// Parses v2 memory.events and v1 memory.oom_control ("oom_kill_disable 0\nunder_oom 0\n
// oom_kill 3"): both are "key value" lines.
std::map<std::string, uint64_t> ParseCgroupKeyValues(std::string_view text);

// Parses cgroup.procs content (one pid per line).
std::vector<pid_t> ParseCgroupProcs(std::string_view text);

// Finds this process's cgroup path (relative to the hierarchy root) in /proc/self/cgroup
// content: the "0::/path" line on v2, the line whose controllers include "memory" on v1.
std::optional<std::string> ParseProcCgroupPath(std::string_view proc_cgroup_text,
                                               CgroupVersion version);

// Where the calling process currently is, as an absolute directory.
std::optional<std::string> CurrentCgroupDir(const CgroupBackend& backend, std::string* error);

// Moves a whole process (all its threads) into the cgroup directory `dir`.
bool MoveProcessToCgroupDir(const std::string& dir, pid_t pid, std::string* error);

// Writes the caller's pid into an already opened cgroup.procs. Async-signal-safe: it is
// meant for a forked child joining the run's cgroup before exec (no malloc, no locks).
bool WriteSelfToCgroupProcs(int procs_fd);

inline constexpr std::string_view kFaultlineCgroupDirName = "faultline";
inline constexpr std::string_view kRunCgroupPrefix = "run-";

// "run-p<agent pid>-<run_id>": the names the agent uses (pid: this process's). Several agents
// on one host share faultline/, and each knows its own runs' cgroups by the pid in the name.
std::string RunCgroupName(std::string_view run_id);
std::string RunCgroupName(std::string_view run_id, pid_t agent);

class MemoryCgroup {
 public:
  // Creates <backend.parent_dir>/faultline/<name> (and faultline/ when missing; on v2 it
  // also enables +memory for the children of parent_dir and faultline/), then applies
  // `limits`. `name` is one path component of [A-Za-z0-9._-]. A half-made cgroup is
  // removed before returning an error.
  static std::optional<MemoryCgroup> Create(const CgroupBackend& backend, std::string_view name,
                                            const MemcgLimits& limits, std::string* error);

  MemoryCgroup(MemoryCgroup&& other) noexcept;
  MemoryCgroup& operator=(MemoryCgroup&& other) noexcept;
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;
  // Destroy(), errors ignored (call Destroy() yourself to see them).
  ~MemoryCgroup();

  const std::string& path() const { return path_; }
  CgroupVersion version() const { return version_; }

  // What was written where, plus "memcg.version" and "memcg.path".
  const std::map<std::string, std::string>& AppliedLimits() const { return applied_; }

  bool AddProcess(pid_t pid, std::string* error) const;

  // An O_CLOEXEC fd on cgroup.procs, opened before fork() so the child can join with
  // WriteSelfToCgroupProcs() without touching the filesystem by path.
  UniqueFd OpenProcsForWriting(std::string* error) const;

  std::optional<std::vector<pid_t>> Processes(std::string* error) const;

  // memory.stat as numbers.
  std::optional<std::map<std::string, uint64_t>> ReadStats(std::string* error) const;

  // v2: memory.events (low, high, max, oom, oom_kill, ...). v1: "failcnt",
  // "memsw_failcnt" (when present), "oom_kill" and "under_oom" from memory.oom_control.
  std::optional<std::map<std::string, uint64_t>> ReadEvents(std::string* error) const;

  // Kills every process still inside (cgroup.kill on v2 when available, else SIGKILL per
  // pid, repeated until empty or ~10 s pass), then removes the directory. Idempotent.
  // Refuses when the calling process itself is inside.
  bool Destroy(std::string* error);

 private:
  MemoryCgroup(std::string path, CgroupVersion version)
      : path_(std::move(path)), version_(version) {}

  std::string path_;  // empty once destroyed or moved from
  CgroupVersion version_ = CgroupVersion::kV2;
  std::map<std::string, std::string> applied_;
};

// What MemoryCgroup::ReadEvents returns, for any memcg directory (the workload reads the
// cgroup it runs in): v2 memory.events; v1 failcnt, memsw_failcnt, oom_kill, under_oom.
std::optional<std::map<std::string, uint64_t>> ReadMemcgEvents(const std::string& dir,
                                                               CgroupVersion version,
                                                               std::string* error);

// v2 when `dir` has memory.events, v1 when it has memory.failcnt; nullopt otherwise (the
// root of a v2 hierarchy has neither).
std::optional<CgroupVersion> MemcgDirVersion(const std::string& dir);

// The memcg's peak usage in bytes: v2 memory.peak (5.19+), v1 memory.max_usage_in_bytes.
std::optional<uint64_t> ReadMemcgPeakBytes(const std::string& dir, CgroupVersion version);

// Kills and removes <parent>/faultline/run-* cgroups left behind by an agent that died
// mid-run: those whose agent pid is no longer running, and those named before the pid was
// (run-<id>); another live agent's runs on the same host are left alone. Returns how many were
// removed, or nullopt with *error naming the first one that could not be.
std::optional<int> RemoveStaleRunCgroups(const CgroupBackend& backend, std::string* error);

// Kills everything in the cgroup directory and removes it (what Destroy() does).
bool KillAndRemoveCgroupDir(const std::string& dir, CgroupVersion version, std::string* error);

}  // namespace faultline::sys
