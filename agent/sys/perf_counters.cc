#include "agent/sys/perf_counters.h"

#include <dirent.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "agent/sys/file_io.h"
#include "common/units.h"

namespace faultline::sys {
namespace {

std::optional<uint64_t> SoftwareConfig(const std::string& name) {
  if (name == "page-faults") return PERF_COUNT_SW_PAGE_FAULTS;
  if (name == "minor-faults") return PERF_COUNT_SW_PAGE_FAULTS_MIN;
  if (name == "major-faults") return PERF_COUNT_SW_PAGE_FAULTS_MAJ;
  if (name == "context-switches") return PERF_COUNT_SW_CONTEXT_SWITCHES;
  if (name == "cpu-migrations") return PERF_COUNT_SW_CPU_MIGRATIONS;
  if (name == "task-clock") return PERF_COUNT_SW_TASK_CLOCK;
  return std::nullopt;
}

std::optional<uint64_t> HardwareConfig(const std::string& name) {
  if (name == "cycles") return PERF_COUNT_HW_CPU_CYCLES;
  if (name == "instructions") return PERF_COUNT_HW_INSTRUCTIONS;
  if (name == "cache-misses") return PERF_COUNT_HW_CACHE_MISSES;
  if (name == "branch-misses") return PERF_COUNT_HW_BRANCH_MISSES;
  return std::nullopt;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A tracefs tree is there when it has events/ (an empty mount point has not).
bool HasTracefs(const std::string& dir) {
  return IsDirectory(dir + "/events");
}

std::vector<std::string> ListSubdirectories(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (IsDirectory(dir + "/" + name)) names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

int PerfEventOpen(struct perf_event_attr* attr, pid_t pid, int cpu) {
  return static_cast<int>(::syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// Counting mode: no sample period, nothing excluded, disabled until PERF_EVENT_IOC_ENABLE.
struct perf_event_attr CountingAttr(const PerfEventName& event) {
  struct perf_event_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = event.type;
  attr.config = event.config;  // calls: 0, an entry probe (1 would be a return probe)
  if (event.kind == PerfEventKind::kCalls) {
    attr.config1 = reinterpret_cast<uintptr_t>(event.name.c_str());  // kprobe_func
    attr.config2 = event.probe_offset;                               // probe_offset
  }
  attr.disabled = 1;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  return attr;
}

std::string ParanoidNote() {
  std::string ignored;
  auto text = ReadFileToString("/proc/sys/kernel/perf_event_paranoid", &ignored);
  std::string note = "needs root or CAP_PERFMON";
  if (text) {
    std::string value = *text;
    while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
    note += "; kernel.perf_event_paranoid=" + value;
  }
  return note;
}

// Why perf_event_open refused an event, for a message.
std::string OpenErrorReason(int error_number) {
  std::string reason = "perf_event_open: " + ErrnoMessage(error_number);
  if (error_number == EACCES || error_number == EPERM) reason += " (" + ParanoidNote() + ")";
  if (error_number == ENOSYS) reason += " (kernel built without perf events)";
  return reason;
}

// A hardware event this board cannot count: no PMU driver (qemu TCG), or this event unknown
// to it.
bool IsNoPmu(int error_number) {
  return error_number == ENOENT || error_number == EOPNOTSUPP || error_number == ENODEV;
}

// The kprobe PMU's perf type (a kernel with CONFIG_KPROBE_EVENTS has it); nullopt with *why.
std::optional<uint32_t> KprobePmuType(const std::string& sysfs_root, std::string* why) {
  const std::string path = sysfs_root + "/bus/event_source/devices/kprobe/type";
  std::string error;
  auto text = ReadFileToString(path, &error);
  std::optional<uint64_t> type;
  if (text) {
    std::string trimmed = *text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' '))
      trimmed.pop_back();
    type = ParseUnsigned(trimmed);
  }
  if (!type || *type > UINT32_MAX) {
    *why = "this kernel has no kprobe PMU to count calls with (" +
           (text ? path + ": not a number" : error) + "; needs CONFIG_KPROBE_EVENTS)";
    return std::nullopt;
  }
  return static_cast<uint32_t>(*type);
}

// Lets this process hold `more` descriptors beyond those open now, raising the soft limit
// towards the hard one if it must.
bool EnsureDescriptors(size_t more, std::string* error) {
  size_t open_now = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++open_now;
    ::closedir(d);
  }
  const rlim_t needed = static_cast<rlim_t>(open_now + more + 64);
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return true;  // let open() say what is wrong
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= needed) return true;
  if (limit.rlim_cur == RLIM_INFINITY) return true;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
    *error = std::to_string(more) + " perf counters need " + std::to_string(needed) +
             " file descriptors; RLIMIT_NOFILE's hard limit is " + std::to_string(limit.rlim_max);
    return false;
  }
  limit.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    *error = "raising RLIMIT_NOFILE to " + std::to_string(needed) + " for " + std::to_string(more) +
             " perf counters: " + ErrnoMessage(errno);
    return false;
  }
  return true;
}

}  // namespace

std::vector<pid_t> ThreadsOfThisProcess(std::string* error) {
  std::vector<pid_t> tids;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) {
    *error = "/proc/self/task: " + ErrnoMessage(errno);
    return tids;
  }
  while (struct dirent* entry = ::readdir(d)) {
    auto tid = ParseUnsigned(entry->d_name);
    if (tid && *tid > 0) tids.push_back(static_cast<pid_t>(*tid));
  }
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

std::optional<PerfEventName> ParseEventName(std::string_view text, std::string* error) {
  std::string why;
  auto parts = SplitPerfEventName(text, &why);
  if (!parts) {
    *error = QuotedEventName(text) + ": " + why;
    return std::nullopt;
  }
  PerfEventName event;
  event.text = std::string(text);
  event.kind = parts->kind;
  event.system = std::move(parts->system);
  event.name = std::move(parts->name);
  std::optional<uint64_t> config;
  switch (event.kind) {
    case PerfEventKind::kTracepoint:
      event.type = PERF_TYPE_TRACEPOINT;
      config = 0;  // the id, once resolved
      break;
    case PerfEventKind::kSoftware:
      event.type = PERF_TYPE_SOFTWARE;
      config = SoftwareConfig(event.name);
      break;
    case PerfEventKind::kHardware:
      event.type = PERF_TYPE_HARDWARE;
      config = HardwareConfig(event.name);
      break;
    case PerfEventKind::kCalls:
      config = 0;  // the kprobe PMU's type, once resolved; the function goes in config1
      break;
  }
  if (!config) {  // a name common knows and this table does not: a bug
    *error = QuotedEventName(text) + ": no perf config for this name";
    return std::nullopt;
  }
  event.config = *config;
  return event;
}

// --- tracefs ---

std::optional<TracefsRoot> TracefsRoot::Find(const std::string& scratch_dir, std::string* error) {
  return Find({"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}, scratch_dir, error);
}

std::optional<TracefsRoot> TracefsRoot::Find(const std::vector<std::string>& candidates,
                                             const std::string& scratch_dir, std::string* error) {
  for (const auto& dir : candidates) {
    if (HasTracefs(dir)) return TracefsRoot(dir, false);
  }
  std::string looked;
  for (const auto& dir : candidates) looked += (looked.empty() ? "" : ", ") + dir;
  if (scratch_dir.empty()) {
    *error = "tracefs is not mounted (looked at " + looked + ")";
    return std::nullopt;
  }
  std::string pattern = scratch_dir + "/faultline-tracefs-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    *error = "tracefs is not mounted (looked at " + looked + ") and mkdtemp " + pattern +
             " failed: " + ErrnoMessage(errno);
    return std::nullopt;
  }
  if (::mount("tracefs", pattern.c_str(), "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) !=
      0) {
    const int mount_errno = errno;
    ::rmdir(pattern.c_str());
    *error = "tracefs is not mounted (looked at " + looked + ") and mounting it on " + pattern +
             " failed: " + ErrnoMessage(mount_errno) +
             (mount_errno == EPERM ? " (needs root or CAP_SYS_ADMIN)" : "");
    return std::nullopt;
  }
  return TracefsRoot(pattern, true);
}

TracefsRoot::TracefsRoot(TracefsRoot&& other) noexcept
    : path_(std::move(other.path_)), mounted_here_(std::exchange(other.mounted_here_, false)) {}

TracefsRoot& TracefsRoot::operator=(TracefsRoot&& other) noexcept {
  if (this != &other) {
    Unmount();
    path_ = std::move(other.path_);
    mounted_here_ = std::exchange(other.mounted_here_, false);
  }
  return *this;
}

TracefsRoot::~TracefsRoot() {
  Unmount();
}

void TracefsRoot::Unmount() {
  if (!mounted_here_) return;
  mounted_here_ = false;
  // Lazy: a reader elsewhere must not keep the directory from going away.
  ::umount2(path_.c_str(), MNT_DETACH);
  ::rmdir(path_.c_str());
}

std::optional<uint64_t> TracepointId(const std::string& tracefs_root, const std::string& system,
                                     const std::string& name, std::string* error) {
  const std::string system_dir = tracefs_root + "/events/" + system;
  if (!IsDirectory(system_dir)) {
    *error = "no tracepoint system '" + system + "' on this kernel (no " + system_dir + ")";
    return std::nullopt;
  }
  const std::string id_path = system_dir + "/" + name + "/id";
  std::string read_error;
  auto text = ReadFileToString(id_path, &read_error);
  if (!text) {
    if (IsDirectory(system_dir + "/" + name)) {
      *error = "tracepoint " + system + ":" + name + ": " + read_error;
      return std::nullopt;
    }
    std::vector<std::string> names = ListSubdirectories(system_dir);
    std::string listed;
    constexpr size_t kListed = 12;
    for (size_t i = 0; i < names.size() && i < kListed; ++i) {
      listed += (listed.empty() ? "" : ", ") + names[i];
    }
    if (names.size() > kListed) listed += ", ...";
    *error = "no tracepoint " + system + ":" + name + " on this kernel (" + system +
             " has: " + (listed.empty() ? std::string("nothing") : listed) + ")";
    return std::nullopt;
  }
  std::string trimmed = *text;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.pop_back();
  auto id = ParseUnsigned(trimmed);
  if (!id) {
    *error = id_path + ": not a tracepoint id: '" + trimmed.substr(0, 32) + "'";
    return std::nullopt;
  }
  return *id;
}

std::optional<ResolvedPerfEvents> ResolvePerfEvents(const std::vector<std::string>& names,
                                                    const std::string& scratch_dir,
                                                    PerfEventsError* error) {
  ResolvedPerfEvents resolved;
  size_t index = 0;
  std::string why;
  if (!CheckPerfEventList(names, &index, &why)) {
    error->usage = true;
    error->message = why;
    return std::nullopt;
  }
  std::vector<PerfEventName> parsed;
  bool any_tracepoint = false;
  std::optional<uint32_t> kprobe_type;
  std::string no_kprobes;
  for (const auto& text : names) {
    auto event = ParseEventName(text, &why);
    if (!event) {
      error->usage = true;
      error->message = why;
      return std::nullopt;
    }
    any_tracepoint = any_tracepoint || event->kind == PerfEventKind::kTracepoint;
    if (event->kind == PerfEventKind::kCalls) {
      if (!kprobe_type && no_kprobes.empty()) kprobe_type = KprobePmuType("/sys", &no_kprobes);
      if (!kprobe_type) {  // counting calls is evidence, not the run: it goes on
        resolved.unsupported[event->text] = no_kprobes;
        continue;
      }
      event->type = *kprobe_type;
    }
    parsed.push_back(std::move(*event));
  }
  if (any_tracepoint) {
    // Mounted (if it must be) only for the look-up: the ids are all that is needed.
    auto tracefs = TracefsRoot::Find(scratch_dir, &why);
    for (auto& event : parsed) {
      if (event.kind != PerfEventKind::kTracepoint) continue;
      if (!tracefs) {
        error->usage = false;
        error->message = QuotedEventName(event.text) + ": " + why;
        return std::nullopt;
      }
      auto id = TracepointId(tracefs->path(), event.system, event.name, &why);
      if (!id) {
        error->usage = true;
        error->message = QuotedEventName(event.text) + ": " + why;
        return std::nullopt;
      }
      event.config = *id;
    }
  }
  for (auto& event : parsed) {
    struct perf_event_attr attr = CountingAttr(event);
    UniqueFd fd(PerfEventOpen(&attr, 0, -1));
    int open_errno = fd ? 0 : errno;
    if (!fd && event.kind == PerfEventKind::kCalls && open_errno == EINVAL &&
        kKprobeEntryPatchBytes > 0) {
      event.probe_offset = kKprobeEntryPatchBytes;
      attr = CountingAttr(event);
      fd.Reset(PerfEventOpen(&attr, 0, -1));
      if (fd) {
        resolved.notes[event.text] = "kprobe at " + event.name + "+" +
                                     std::to_string(event.probe_offset) +
                                     " (past ftrace's patch site: a probe on it was refused)";
      } else {
        event.probe_offset = 0;  // the first refusal is the one to report
      }
    }
    if (!fd) {
      if (event.kind == PerfEventKind::kHardware && IsNoPmu(open_errno)) {
        resolved.unsupported[event.text] =
            "no hardware PMU counts this event on this board (" + OpenErrorReason(open_errno) + ")";
        continue;
      }
      if (event.kind == PerfEventKind::kCalls) {  // not in kallsyms, inlined, notrace, lockdown
        resolved.unsupported[event.text] = "no kprobe on kernel function '" + event.name +
                                           "' here (" + OpenErrorReason(open_errno) + ")";
        continue;
      }
      error->usage = false;
      error->message = QuotedEventName(event.text) + ": " + OpenErrorReason(open_errno);
      return std::nullopt;
    }
    resolved.events.push_back(std::move(event));
  }
  return resolved;
}

// --- counting ---

PerfCount SumReadings(const std::string& event, const std::vector<PerfReading>& readings) {
  PerfCount count;
  count.event = event;
  bool any_ran = false, any_enabled = false;
  for (const auto& r : readings) {
    ++count.threads;
    any_enabled = any_enabled || r.time_enabled > 0;
    if (r.time_running == 0) continue;  // never on the PMU (or never enabled): nothing counted
    any_ran = true;
    double value = static_cast<double>(r.value);
    if (r.time_running < r.time_enabled) {
      value *= static_cast<double>(r.time_enabled) / static_cast<double>(r.time_running);
      count.scaled = true;
    }
    count.value += value;
  }
  count.never_counted = any_enabled && !any_ran;
  return count;
}

std::optional<PerfCounterSession> PerfCounterSession::Open(const std::vector<PerfEventName>& events,
                                                           std::string* error) {
  PerfCounterSession session;
  session.events_ = events;
  session.fds_.resize(events.size());
  if (events.empty()) return session;
  std::vector<pid_t> tids = ThreadsOfThisProcess(error);
  if (tids.empty()) {
    if (error->empty()) *error = "/proc/self/task lists no thread";
    return std::nullopt;
  }
  if (!EnsureDescriptors(tids.size() * events.size(), error)) return std::nullopt;
  std::vector<bool> counted(tids.size(), false);
  for (size_t e = 0; e < events.size(); ++e) {
    for (size_t t = 0; t < tids.size(); ++t) {
      struct perf_event_attr attr = CountingAttr(events[e]);
      UniqueFd fd(PerfEventOpen(&attr, tids[t], -1));
      if (!fd) {
        if (errno == ESRCH) continue;  // the thread is gone: nothing of it to count
        *error = QuotedEventName(events[e].text) + " on thread " + std::to_string(tids[t]) + ": " +
                 OpenErrorReason(errno);
        return std::nullopt;
      }
      counted[t] = true;
      session.fds_[e].push_back(std::move(fd));
    }
  }
  session.threads_ = static_cast<size_t>(std::count(counted.begin(), counted.end(), true));
  return session;
}

bool PerfCounterSession::Enable(std::string* error) {
  for (size_t e = 0; e < fds_.size(); ++e) {
    for (const auto& fd : fds_[e]) {
      if (::ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
        *error =
            QuotedEventName(events_[e].text) + ": PERF_EVENT_IOC_ENABLE: " + ErrnoMessage(errno);
        return false;
      }
    }
  }
  return true;
}

bool PerfCounterSession::Disable(std::string* error) {
  bool ok = true;
  for (size_t e = 0; e < fds_.size(); ++e) {
    for (const auto& fd : fds_[e]) {
      if (::ioctl(fd.get(), PERF_EVENT_IOC_DISABLE, 0) != 0 && ok) {
        *error =
            QuotedEventName(events_[e].text) + ": PERF_EVENT_IOC_DISABLE: " + ErrnoMessage(errno);
        ok = false;  // the others are still stopped
      }
    }
  }
  return ok;
}

std::optional<std::vector<PerfCount>> PerfCounterSession::Read(std::string* error) const {
  std::vector<PerfCount> counts;
  for (size_t e = 0; e < fds_.size(); ++e) {
    std::vector<PerfReading> readings;
    for (const auto& fd : fds_[e]) {
      uint64_t buffer[3] = {0, 0, 0};  // value, time_enabled, time_running
      ssize_t n;
      do {
        n = ::read(fd.get(), buffer, sizeof(buffer));
      } while (n < 0 && errno == EINTR);
      if (n != static_cast<ssize_t>(sizeof(buffer))) {
        *error = QuotedEventName(events_[e].text) + ": reading the counter: " +
                 (n < 0 ? ErrnoMessage(errno) : "short read of " + std::to_string(n) + " bytes");
        return std::nullopt;
      }
      readings.push_back({buffer[0], buffer[1], buffer[2]});
    }
    counts.push_back(SumReadings(events_[e].text, readings));
  }
  return counts;
}

}  // namespace faultline::sys
