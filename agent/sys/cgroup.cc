#include "agent/sys/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>

#include "agent/sys/file_io.h"
#include "common/units.h"

namespace faultline::sys {
namespace {

// Cgroup file names, in one place (oomd style).
constexpr char kControllers[] = "cgroup.controllers";
constexpr char kSubtreeControl[] = "cgroup.subtree_control";
constexpr char kProcs[] = "cgroup.procs";
constexpr char kKill[] = "cgroup.kill";
constexpr char kV2MemoryMax[] = "memory.max";
constexpr char kV2MemoryHigh[] = "memory.high";
constexpr char kV2SwapMax[] = "memory.swap.max";
constexpr char kV2Events[] = "memory.events";
constexpr char kV1Limit[] = "memory.limit_in_bytes";
constexpr char kV1SoftLimit[] = "memory.soft_limit_in_bytes";
constexpr char kV1MemswLimit[] = "memory.memsw.limit_in_bytes";
constexpr char kV1Failcnt[] = "memory.failcnt";
constexpr char kV1MemswFailcnt[] = "memory.memsw.failcnt";
constexpr char kV1OomControl[] = "memory.oom_control";
constexpr char kStat[] = "memory.stat";

// How long Destroy() keeps killing and retrying rmdir before giving up. Processes stuck in
// uninterruptible sleep (e.g. on I/O) can take a while to die.
constexpr std::chrono::seconds kDestroyTimeout{10};
constexpr long kDestroyPollNanoseconds = 5'000'000;

std::string Join(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (out.empty() || out.back() != '/') out += '/';
  out += name;
  return out;
}

bool ListContainsWord(std::string_view text, std::string_view word) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n' && text[i] != '\t') ++i;
    // v2 subtree_control lists "memory"; be tolerant of "+memory" style input too.
    std::string_view token = text.substr(start, i - start);
    if (!token.empty() && token.front() == '+') token.remove_prefix(1);
    if (token == word) return true;
  }
  return false;
}

bool HasMemoryController(const std::string& dir) {
  auto controllers = ReadFileToString(Join(dir, kControllers), nullptr);
  return controllers && ListContainsWord(*controllers, "memory");
}

bool IsValidCgroupName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool MakeDirectory(const std::string& path, bool exist_ok, std::string* error) {
  if (::mkdir(path.c_str(), 0755) == 0) return true;
  const int mkdir_errno = errno;
  if (mkdir_errno == EEXIST && exist_ok) return true;
  *error = "mkdir " + path + ": " + ErrnoMessage(mkdir_errno);
  if (mkdir_errno == EEXIST) *error += " (left by an earlier run? see RemoveStaleRunCgroups)";
  return false;
}

// v2 only lets a cgroup's children use the memory controller when it is enabled in the
// cgroup's subtree_control.
bool EnableMemoryForChildren(const std::string& dir, std::string* error) {
  auto current = ReadFileToString(Join(dir, kSubtreeControl), error);
  if (!current) return false;
  if (ListContainsWord(*current, "memory")) return true;
  if (!WriteToExistingFile(Join(dir, kSubtreeControl), "+memory", error)) {
    // EBUSY here is the v2 "no internal processes" rule: dir itself holds processes.
    *error +=
        " (a v2 parent must not hold processes itself; configure a delegated, empty "
        "parent)";
    return false;
  }
  return true;
}

void SleepBriefly() {
  struct timespec ts = {0, kDestroyPollNanoseconds};
  ::nanosleep(&ts, nullptr);
}

}  // namespace

std::string_view CgroupVersionName(CgroupVersion version) {
  return version == CgroupVersion::kV1 ? "1" : "2";
}

std::optional<CgroupBackend> DetectCgroupBackend(const CgroupBackendOptions& options,
                                                 std::string* error) {
  const std::string v1_root = Join(options.cgroup_root, "memory");
  const bool has_v1 = PathExists(Join(v1_root, kV1Limit)) && PathExists(Join(v1_root, kProcs));
  const bool pure_v2 = PathExists(Join(options.cgroup_root, kControllers));
  std::string v2_parent = options.v2_parent;
  if (v2_parent == kDelegatedParent) {
    v2_parent.clear();
    if (pure_v2) {
      // "0::/system.slice/faultline-agent.service/agent" -> the unit's cgroup.
      const std::string path =
          ParseProcCgroupPath(ReadFileToString(options.self_cgroup_file, nullptr).value_or(""),
                              CgroupVersion::kV2)
              .value_or("");
      const size_t slash = path.rfind('/');
      if (path.empty() || slash == std::string::npos || path.substr(slash + 1) != "agent") {
        *error =
            "cgroup_parent 'delegated': the agent is not in an 'agent' leaf of a delegated "
            "cgroup (its cgroup is '" +
            path + "' in " + options.self_cgroup_file +
            "); start it with faultline-agent.service (Delegate=yes), or set "
            "cgroup_parent to a delegated cgroup v2 directory";
        return std::nullopt;
      }
      v2_parent =
          slash == 0 ? options.cgroup_root : Join(options.cgroup_root, path.substr(1, slash - 1));
    }
  }
  if (!v2_parent.empty()) {
    if (!HasMemoryController(v2_parent)) {
      if (has_v1 && !pure_v2) {
        *error = "cgroup_parent " + v2_parent +
                 " is a cgroup v2 directory, but this board has cgroup v1 (the memory "
                 "controller is at " +
                 v1_root + "): set cgroup_parent to 'delegated' or remove it";
      } else {
        *error = "configured cgroup v2 parent " + v2_parent +
                 " does not offer the memory controller (no 'memory' in " + kControllers + ")";
      }
      return std::nullopt;
    }
    return CgroupBackend{CgroupVersion::kV2, options.cgroup_root, v2_parent};
  }
  if (HasMemoryController(options.cgroup_root)) {
    return CgroupBackend{CgroupVersion::kV2, options.cgroup_root, options.cgroup_root};
  }
  if (has_v1) {
    return CgroupBackend{CgroupVersion::kV1, v1_root, v1_root};
  }
  const std::string hybrid_root = Join(options.cgroup_root, "unified");
  if (HasMemoryController(hybrid_root)) {
    return CgroupBackend{CgroupVersion::kV2, hybrid_root, hybrid_root};
  }
  *error = "no memory cgroup found under " + options.cgroup_root +
           " (neither cgroup v2 with the memory controller nor the v1 memory hierarchy)";
  return std::nullopt;
}

MemcgLimitPlan PlanMemcgLimits(CgroupVersion version, const MemcgLimits& limits,
                               const MemcgFeatures& features) {
  MemcgLimitPlan plan;
  auto write = [&plan](const char* file, uint64_t value, const std::string& key,
                       std::string_view note) {
    std::string text = std::to_string(value);
    plan.writes.push_back({file, text});
    plan.applied[key] = std::string(file) + "=" + text + std::string(note);
  };

  if (version == CgroupVersion::kV2) {
    // memory.high before memory.max: throttling is in place before the hard limit is.
    if (limits.memory_high) write(kV2MemoryHigh, *limits.memory_high, "memcg.memory_high", "");
    if (limits.memory_max) write(kV2MemoryMax, *limits.memory_max, "memcg.memory_max", "");
    if (limits.swap_max) {
      if (features.has_swap_max) {
        write(kV2SwapMax, *limits.swap_max, "memcg.swap_max", "");
      } else {
        plan.applied["memcg.swap_max"] =
            "not applied: memory.swap.max missing (kernel without swap accounting)";
      }
    }
    return plan;
  }

  // v1. memory.limit_in_bytes first: memsw.limit_in_bytes must never be below it, and a
  // fresh cgroup starts with both unlimited.
  if (limits.memory_max) write(kV1Limit, *limits.memory_max, "memcg.memory_max", "");
  if (limits.memory_high) {
    write(kV1SoftLimit, *limits.memory_high, "memcg.memory_high", " (v1 has no memory.high)");
  }
  if (limits.swap_max) {
    if (!features.has_memsw) {
      plan.applied["memcg.swap_max"] =
          "not applied: memory.memsw.limit_in_bytes missing (v1 swap accounting off; "
          "boot with swapaccount=1)";
    } else if (!limits.memory_max) {
      plan.applied["memcg.swap_max"] =
          "not applied: v1 limits swap only as memory+swap (memory.memsw.limit_in_bytes), "
          "which needs memory_max";
    } else {
      uint64_t max = *limits.memory_max;
      uint64_t total = *limits.swap_max > std::numeric_limits<uint64_t>::max() - max
                           ? std::numeric_limits<uint64_t>::max()
                           : max + *limits.swap_max;
      write(kV1MemswLimit, total, "memcg.swap_max", " (v1: memory+swap = memory_max + swap_max)");
    }
  }
  return plan;
}

std::map<std::string, uint64_t> ParseCgroupKeyValues(std::string_view text) {
  return ParseKeyValueLines(text);
}

std::vector<pid_t> ParseCgroupProcs(std::string_view text) {
  std::vector<pid_t> pids;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (auto pid = ParseUnsigned(line);
        pid && *pid > 0 && *pid <= static_cast<uint64_t>(std::numeric_limits<pid_t>::max())) {
      pids.push_back(static_cast<pid_t>(*pid));
    }
  }
  return pids;
}

std::optional<std::string> ParseProcCgroupPath(std::string_view text, CgroupVersion version) {
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view id = line.substr(0, first);
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string_view path = line.substr(second + 1);
    if (version == CgroupVersion::kV2) {
      if (id == "0" && controllers.empty()) return std::string(path);
      continue;
    }
    while (!controllers.empty()) {
      size_t comma = controllers.find(',');
      if (controllers.substr(0, comma) == "memory") return std::string(path);
      if (comma == std::string_view::npos) break;
      controllers.remove_prefix(comma + 1);
    }
  }
  return std::nullopt;
}

std::optional<std::string> CurrentCgroupDir(const CgroupBackend& backend, std::string* error) {
  auto text = ReadFileToString("/proc/self/cgroup", error);
  if (!text) return std::nullopt;
  auto path = ParseProcCgroupPath(*text, backend.version);
  if (!path) {
    *error = "no memory cgroup line in /proc/self/cgroup";
    return std::nullopt;
  }
  if (*path == "/") return backend.hierarchy_root;
  return backend.hierarchy_root + *path;
}

bool MoveProcessToCgroupDir(const std::string& dir, pid_t pid, std::string* error) {
  return WriteToExistingFile(Join(dir, kProcs), std::to_string(pid), error);
}

bool WriteSelfToCgroupProcs(int procs_fd) {
  // Formatted by hand: std::to_string may allocate, which is not async-signal-safe.
  char digits[24];
  char* end = digits + sizeof(digits);
  char* p = end;
  unsigned long value = static_cast<unsigned long>(::getpid());
  do {
    *--p = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && p > digits);
  ssize_t n;
  do {
    n = ::write(procs_fd, p, static_cast<size_t>(end - p));
  } while (n < 0 && errno == EINTR);
  return n == end - p;
}

std::string RunCgroupName(std::string_view run_id) {
  return RunCgroupName(run_id, ::getpid());
}

std::string RunCgroupName(std::string_view run_id, pid_t agent) {
  return std::string(kRunCgroupPrefix) + "p" + std::to_string(agent) + "-" + std::string(run_id);
}

bool KillAndRemoveCgroupDir(const std::string& dir, CgroupVersion version, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + kDestroyTimeout;
  const std::string procs_path = Join(dir, kProcs);
  if (!PathExists(dir)) return true;

  // cgroup.kill (v2, Linux 5.14+) also catches processes forking while we kill.
  if (version == CgroupVersion::kV2 && PathExists(Join(dir, kKill))) {
    std::string ignored;
    WriteToExistingFile(Join(dir, kKill), "1", &ignored);
  }
  for (;;) {
    std::string read_error;
    auto procs = ReadFileToString(procs_path, &read_error);
    if (!procs) {
      if (!PathExists(dir)) return true;
      *error = read_error;
      return false;
    }
    std::vector<pid_t> pids = ParseCgroupProcs(*procs);
    if (pids.empty()) break;
    if (std::find(pids.begin(), pids.end(), ::getpid()) != pids.end()) {
      *error = "refusing to kill " + dir + ": this process is inside it";
      return false;
    }
    // A pid read here may exit and be reused before kill(); the window is tiny and the
    // same one systemd accepts. cgroup.kill (above) has no such window.
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    if (std::chrono::steady_clock::now() >= deadline) {
      *error = dir + ": " + std::to_string(pids.size()) + " process(es) still inside after " +
               std::to_string(kDestroyTimeout.count()) + " s of SIGKILL";
      return false;
    }
    SleepBriefly();
  }
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    // EBUSY while exiting tasks are still being released.
    if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) {
      *error = "rmdir " + dir + ": " + ErrnoMessage(errno);
      return false;
    }
    SleepBriefly();
  }
}

std::optional<MemoryCgroup> MemoryCgroup::Create(const CgroupBackend& backend,
                                                 std::string_view name, const MemcgLimits& limits,
                                                 std::string* error) {
  if (!IsValidCgroupName(name)) {
    *error = "invalid cgroup name '" + std::string(name) + "' (use letters, digits, . _ -)";
    return std::nullopt;
  }
  const std::string faultline_dir = Join(backend.parent_dir, kFaultlineCgroupDirName);
  if (backend.version == CgroupVersion::kV2 &&
      !EnableMemoryForChildren(backend.parent_dir, error)) {
    return std::nullopt;
  }
  if (!MakeDirectory(faultline_dir, /*exist_ok=*/true, error)) return std::nullopt;
  if (backend.version == CgroupVersion::kV2 && !EnableMemoryForChildren(faultline_dir, error)) {
    return std::nullopt;
  }
  const std::string path = Join(faultline_dir, name);
  if (!MakeDirectory(path, /*exist_ok=*/false, error)) return std::nullopt;
  MemoryCgroup cgroup(path, backend.version);

  MemcgFeatures features;
  features.has_memsw = PathExists(Join(path, kV1MemswLimit));
  features.has_swap_max = PathExists(Join(path, kV2SwapMax));
  MemcgLimitPlan plan = PlanMemcgLimits(backend.version, limits, features);
  for (const auto& w : plan.writes) {
    if (!WriteToExistingFile(Join(path, w.file), w.value, error)) {
      std::string ignored;
      cgroup.Destroy(&ignored);
      return std::nullopt;
    }
  }
  cgroup.applied_ = std::move(plan.applied);
  cgroup.applied_["memcg.version"] = std::string(CgroupVersionName(backend.version));
  cgroup.applied_["memcg.path"] = path;
  return cgroup;
}

MemoryCgroup::MemoryCgroup(MemoryCgroup&& other) noexcept
    : path_(std::exchange(other.path_, std::string())),
      version_(other.version_),
      applied_(std::move(other.applied_)) {}

MemoryCgroup& MemoryCgroup::operator=(MemoryCgroup&& other) noexcept {
  if (this != &other) {
    std::string ignored;
    Destroy(&ignored);
    path_ = std::exchange(other.path_, std::string());
    version_ = other.version_;
    applied_ = std::move(other.applied_);
  }
  return *this;
}

MemoryCgroup::~MemoryCgroup() {
  std::string ignored;
  Destroy(&ignored);
}

bool MemoryCgroup::AddProcess(pid_t pid, std::string* error) const {
  return MoveProcessToCgroupDir(path_, pid, error);
}

UniqueFd MemoryCgroup::OpenProcsForWriting(std::string* error) const {
  const std::string procs = Join(path_, kProcs);
  UniqueFd fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) *error = procs + ": " + ErrnoMessage(errno);
  return fd;
}

std::optional<std::vector<pid_t>> MemoryCgroup::Processes(std::string* error) const {
  auto text = ReadFileToString(Join(path_, kProcs), error);
  if (!text) return std::nullopt;
  return ParseCgroupProcs(*text);
}

std::optional<std::map<std::string, uint64_t>> MemoryCgroup::ReadStats(std::string* error) const {
  auto text = ReadFileToString(Join(path_, kStat), error);
  if (!text) return std::nullopt;
  return ParseKeyValueLines(*text);
}

std::optional<std::map<std::string, uint64_t>> MemoryCgroup::ReadEvents(std::string* error) const {
  return ReadMemcgEvents(path_, version_, error);
}

std::optional<std::map<std::string, uint64_t>> ReadMemcgEvents(const std::string& dir,
                                                               CgroupVersion version,
                                                               std::string* error) {
  if (version == CgroupVersion::kV2) {
    auto text = ReadFileToString(Join(dir, kV2Events), error);
    if (!text) return std::nullopt;
    return ParseCgroupKeyValues(*text);
  }
  std::map<std::string, uint64_t> events;
  auto failcnt = ReadFileToString(Join(dir, kV1Failcnt), error);
  if (!failcnt) return std::nullopt;
  if (auto v = ParseUnsigned(*failcnt)) events["failcnt"] = *v;
  if (auto memsw = ReadFileToString(Join(dir, kV1MemswFailcnt), nullptr)) {
    if (auto v = ParseUnsigned(*memsw)) events["memsw_failcnt"] = *v;
  }
  auto oom = ReadFileToString(Join(dir, kV1OomControl), error);
  if (!oom) return std::nullopt;
  for (const auto& [key, value] : ParseCgroupKeyValues(*oom)) {
    // oom_kill_disable is a setting, not an event.
    if (key == "oom_kill" || key == "under_oom") events[key] = value;
  }
  return events;
}

std::optional<CgroupVersion> MemcgDirVersion(const std::string& dir) {
  if (PathExists(Join(dir, kV2Events))) return CgroupVersion::kV2;
  if (PathExists(Join(dir, kV1Failcnt))) return CgroupVersion::kV1;
  return std::nullopt;
}

std::optional<uint64_t> ReadMemcgPeakBytes(const std::string& dir, CgroupVersion version) {
  auto text = ReadFileToString(
      Join(dir, version == CgroupVersion::kV2 ? "memory.peak" : "memory.max_usage_in_bytes"),
      nullptr);
  if (!text) return std::nullopt;
  while (!text->empty() && text->back() == '\n') text->pop_back();
  return ParseUnsigned(*text);
}

bool MemoryCgroup::Destroy(std::string* error) {
  if (path_.empty()) return true;
  if (!KillAndRemoveCgroupDir(path_, version_, error)) return false;
  path_.clear();
  return true;
}

std::optional<int> RemoveStaleRunCgroups(const CgroupBackend& backend, std::string* error) {
  const std::string faultline_dir = Join(backend.parent_dir, kFaultlineCgroupDirName);
  DIR* dir = ::opendir(faultline_dir.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return 0;
    *error = "opendir " + faultline_dir + ": " + ErrnoMessage(errno);
    return std::nullopt;
  }
  std::vector<std::string> stale;
  while (struct dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (entry->d_type != DT_DIR || name.substr(0, kRunCgroupPrefix.size()) != kRunCgroupPrefix) {
      continue;
    }
    // run-p<pid>-...: stale when that agent is gone (or is this one, restarted in place).
    std::string_view rest = name.substr(kRunCgroupPrefix.size());
    const size_t dash = rest.find('-');
    if (rest.size() > 1 && rest[0] == 'p' && dash != std::string_view::npos) {
      if (auto pid = ParseUnsigned(rest.substr(1, dash - 1))) {
        const bool gone = ::kill(static_cast<pid_t>(*pid), 0) != 0 && errno == ESRCH;
        if (!gone && static_cast<pid_t>(*pid) != ::getpid()) continue;  // a live agent's run
      }
    }
    stale.push_back(Join(faultline_dir, name));
  }
  ::closedir(dir);
  int removed = 0;
  for (const auto& path : stale) {
    if (!KillAndRemoveCgroupDir(path, backend.version, error)) return std::nullopt;
    ++removed;
  }
  return removed;
}

}  // namespace faultline::sys
