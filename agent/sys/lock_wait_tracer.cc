#include "agent/sys/lock_wait_tracer.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "agent/sys/file_io.h"

namespace faultline::sys {
namespace {

// "\tfield:bool write;\toffset:24;\tsize:1;\tsigned:0;" -> offset of `name` if its size is
// `bytes`, else -1.
int FieldOffset(const std::string& format, const std::string& name, int bytes) {
  std::istringstream lines(format);
  std::string line;
  while (std::getline(lines, line)) {
    const auto field = line.find("field:");
    const auto semi = line.find(';');
    if (field == std::string::npos || semi == std::string::npos) continue;
    const std::string decl = line.substr(field + 6, semi - field - 6);
    const auto space = decl.find_last_of(" *");
    if (space == std::string::npos || decl.substr(space + 1) != name) continue;
    const auto off = line.find("offset:");
    const auto size = line.find("size:");
    if (off == std::string::npos || size == std::string::npos) return -1;
    if (std::atoi(line.c_str() + size + 5) != bytes) return -1;
    return std::atoi(line.c_str() + off + 7);
  }
  return -1;
}

int PerfEventOpen(perf_event_attr* attr, pid_t tid) {
  return static_cast<int>(::syscall(SYS_perf_event_open, attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

namespace {

std::optional<uint64_t> FormatId(const std::string& format, std::string* error) {
  const auto id = format.find("\nID: ");
  if (id == std::string::npos) {
    *error = "no ID line in the tracepoint's format";
    return std::nullopt;
  }
  return std::strtoull(format.c_str() + id + 5, nullptr, 10);
}

bool NeedField(const std::string& format, const char* name, int bytes, int* offset,
               std::string* error) {
  *offset = FieldOffset(format, name, bytes);
  if (*offset >= 0) return true;
  *error = "the tracepoint has no " + std::to_string(bytes) + "-byte field '" + name + "'";
  return false;
}

template <typename T>
T ReadAt(const char* raw, int offset) {
  T value{};
  std::memcpy(&value, raw + offset, sizeof(value));
  return value;
}

// The raw record holds a field of `bytes` at `offset`.
bool Holds(int offset, size_t bytes, uint32_t raw_size) {
  return offset >= 0 && static_cast<size_t>(offset) + bytes <= raw_size;
}

}  // namespace

std::optional<LockTracepointLayout> ParseLockTracepointFormat(const std::string& format,
                                                              bool needs_success,
                                                              std::string* error) {
  LockTracepointLayout layout;
  const auto id = FormatId(format, error);
  if (!id) return std::nullopt;
  layout.id = *id;
  if (!NeedField(format, "write", 1, &layout.write_offset, error)) return std::nullopt;
  if (needs_success && !NeedField(format, "success", 1, &layout.success_offset, error)) {
    return std::nullopt;
  }
  layout.mm_offset = FieldOffset(format, "mm", sizeof(void*));  // contention needs it
  return layout;
}

std::optional<LockTracepointLayout> ParseContentionFormat(const std::string& format, bool begin,
                                                          std::string* error) {
  LockTracepointLayout layout;
  const auto id = FormatId(format, error);
  if (!id) return std::nullopt;
  layout.id = *id;
  if (!NeedField(format, "lock_addr", sizeof(void*), &layout.lock_addr_offset, error)) {
    return std::nullopt;
  }
  if (begin && !NeedField(format, "flags", 4, &layout.flags_offset, error)) return std::nullopt;
  return layout;
}

void DecodeLockRecords(const std::string& records, const LockTracepoints& events,
                       LockWaitAggregator& into) {
  size_t at = 0;
  while (at + sizeof(perf_event_header) <= records.size()) {
    perf_event_header header;
    std::memcpy(&header, records.data() + at, sizeof(header));
    if (header.size < sizeof(header) || at + header.size > records.size()) break;
    const char* body = records.data() + at + sizeof(header);
    const size_t body_size = header.size - sizeof(header);
    at += header.size;
    if (header.type == PERF_RECORD_LOST && body_size >= 16) {
      into.Lost(ReadAt<uint64_t>(body, 8));
      continue;
    }
    // PERF_SAMPLE_TID | TIME | RAW: u32 pid, tid; u64 time; u32 size; raw[size].
    if (header.type != PERF_RECORD_SAMPLE || body_size < 20) continue;
    const auto raw_size = ReadAt<uint32_t>(body, 16);
    const char* raw = body + 20;
    if (20 + static_cast<size_t>(raw_size) > body_size || raw_size < 2) continue;
    const auto type = ReadAt<uint16_t>(raw, 0);
    LockEvent event;
    event.tid = ReadAt<uint32_t>(body, 4);
    event.time_ns = ReadAt<uint64_t>(body, 8);
    const LockTracepointLayout* layout = nullptr;
    if (type == events.start.id) {
      layout = &events.start;
      event.kind = LockEvent::Kind::kStartLocking;
    } else if (type == events.acquired.id) {
      layout = &events.acquired;
      event.kind = LockEvent::Kind::kAcquireReturned;
    } else if (events.contention() && type == events.contention_begin.id) {
      layout = &events.contention_begin;
      event.kind = LockEvent::Kind::kContentionBegin;
    } else if (events.contention() && type == events.contention_end.id) {
      layout = &events.contention_end;
      event.kind = LockEvent::Kind::kContentionEnd;
    } else {
      continue;
    }
    if (layout->write_offset >= 0) {
      if (!Holds(layout->write_offset, 1, raw_size)) continue;
      event.write = raw[layout->write_offset] != 0;
    }
    if (layout->success_offset >= 0) {
      if (!Holds(layout->success_offset, 1, raw_size)) continue;
      event.success = raw[layout->success_offset] != 0;
    }
    if (Holds(layout->mm_offset, sizeof(uint64_t), raw_size)) {
      event.mm = ReadAt<uint64_t>(raw, layout->mm_offset);
    }
    if (layout->lock_addr_offset >= 0) {
      if (!Holds(layout->lock_addr_offset, sizeof(uint64_t), raw_size)) continue;
      event.lock_addr = ReadAt<uint64_t>(raw, layout->lock_addr_offset);
    }
    if (layout->flags_offset >= 0) {
      if (!Holds(layout->flags_offset, sizeof(uint32_t), raw_size)) continue;
      event.flags = ReadAt<uint32_t>(raw, layout->flags_offset);
    }
    into.Add(event);
  }
}

namespace {

// Fills events->contention_begin/end from lock:contention_begin/end's format files, or
// leaves them unset and says why.
std::string FindContentionEvents(const std::string& tracefs_root, LockTracepoints* events) {
  if (events->start.mm_offset < 0) {
    return "mmap_lock:mmap_lock_start_locking has no field 'mm' to match locks with";
  }
  LockTracepoints found = *events;
  for (const auto& [name, begin, layout] : {std::tuple<std::string, bool, LockTracepointLayout*>{
                                                "contention_begin", true, &found.contention_begin},
                                            std::tuple<std::string, bool, LockTracepointLayout*>{
                                                "contention_end", false, &found.contention_end}}) {
    std::string read_error;
    auto format = ReadFileToString(tracefs_root + "/events/lock/" + name + "/format", &read_error);
    if (!format) return "no tracepoint lock:" + name + " on this kernel (" + read_error + ")";
    std::string why;
    auto parsed = ParseContentionFormat("\n" + *format, begin, &why);
    if (!parsed) return "lock:" + name + ": " + why;
    *layout = *parsed;
  }
  *events = found;
  return "";
}

}  // namespace

std::optional<LockWaitTracer> LockWaitTracer::Open(const std::string& tracefs_root,
                                                   const std::vector<pid_t>& tids, size_t pages,
                                                   std::string* error,
                                                   std::string* contention_error) {
  std::string no_contention;
  auto tracer = OpenEvents(tracefs_root, tids, pages, true, error, &no_contention);
  if (contention_error != nullptr) *contention_error = no_contention;
  return tracer;
}

std::optional<LockWaitTracer> LockWaitTracer::OpenEvents(const std::string& tracefs_root,
                                                         const std::vector<pid_t>& tids,
                                                         size_t pages, bool with_contention,
                                                         std::string* error,
                                                         std::string* contention_error) {
  if (pages == 0 || (pages & (pages - 1)) != 0) {
    *error = "ring buffer pages must be a power of two";
    return std::nullopt;
  }
  LockWaitTracer tracer;
  LockTracepoints& events = tracer.events_;
  for (const auto& [name, needs_success, layout] :
       {std::tuple<std::string, bool, LockTracepointLayout*>{"mmap_lock_start_locking", false,
                                                             &events.start},
        std::tuple<std::string, bool, LockTracepointLayout*>{"mmap_lock_acquire_returned", true,
                                                             &events.acquired}}) {
    std::string read_error;
    auto format =
        ReadFileToString(tracefs_root + "/events/mmap_lock/" + name + "/format", &read_error);
    if (!format) {
      *error = "no tracepoint mmap_lock:" + name + " on this kernel (" + read_error + ")";
      return std::nullopt;
    }
    std::string why;
    auto parsed = ParseLockTracepointFormat("\n" + *format, needs_success, &why);
    if (!parsed) {
      *error = "mmap_lock:" + name + ": " + why;
      return std::nullopt;
    }
    *layout = *parsed;
  }
  // True contention where the kernel has it (5.19+, CONFIG_TRACEPOINTS): optional.
  if (with_contention) *contention_error = FindContentionEvents(tracefs_root, &events);

  std::vector<const LockTracepointLayout*> layouts{&events.start, &events.acquired};
  if (events.contention()) {
    layouts.push_back(&events.contention_begin);
    layouts.push_back(&events.contention_end);
  }
  tracer.page_size_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (pid_t tid : tids) {
    Buffer buffer;
    bool exited = false;
    for (size_t i = 0; i < layouts.size() && !exited; ++i) {
      perf_event_attr attr{};
      attr.size = sizeof(attr);
      attr.type = PERF_TYPE_TRACEPOINT;
      attr.config = layouts[i]->id;
      attr.sample_period = 1;
      attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
      attr.disabled = 1;
      attr.wakeup_events = 0;
      const int opened = PerfEventOpen(&attr, tid);
      if (opened < 0) {
        if (errno == ESRCH) {  // the thread has exited
          exited = true;
          break;
        }
        if (i >= 2) {  // a contention event refused: go on without contention
          *contention_error = "perf_event_open(lock:contention_*) for thread " +
                              std::to_string(tid) + ": " + ErrnoMessage(errno);
          return OpenEvents(tracefs_root, tids, pages, false, error, contention_error);
        }
        *error = "perf_event_open(mmap_lock tracepoint, sampling) for thread " +
                 std::to_string(tid) + ": " + ErrnoMessage(errno);
        return std::nullopt;
      }
      if (layouts[i] == &events.contention_begin) {
        // Only rwsem contention can be an mmap_lock's (READ or WRITE, not SPIN): the kernel
        // drops the rest before they reach the buffer. Best effort: a kernel that refuses
        // the filter sends them all, and the aggregator ignores them.
        static constexpr char kRwsemOnly[] = "flags == 2 || flags == 4";
        (void)::ioctl(opened, PERF_EVENT_IOC_SET_FILTER, kRwsemOnly);
      }
      buffer.fds.emplace_back(opened);
    }
    if (exited) continue;
    buffer.bytes = (pages + 1) * tracer.page_size_;
    buffer.base =
        ::mmap(nullptr, buffer.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, buffer.fds[0].get(), 0);
    if (buffer.base == MAP_FAILED) {
      buffer.base = nullptr;
      *error = "mmap of a perf ring buffer (" + std::to_string(buffer.bytes) +
               " bytes): " + ErrnoMessage(errno);
      return std::nullopt;
    }
    for (size_t i = 1; i < buffer.fds.size(); ++i) {
      if (::ioctl(buffer.fds[i].get(), PERF_EVENT_IOC_SET_OUTPUT, buffer.fds[0].get()) != 0) {
        *error = std::string("PERF_EVENT_IOC_SET_OUTPUT: ") + ErrnoMessage(errno);
        ::munmap(buffer.base, buffer.bytes);
        return std::nullopt;
      }
    }
    tracer.buffers_.push_back(std::move(buffer));
  }
  return tracer;
}

LockWaitTracer::LockWaitTracer(LockWaitTracer&& other) noexcept
    : events_(other.events_), buffers_(std::move(other.buffers_)), page_size_(other.page_size_) {
  other.buffers_.clear();
}

LockWaitTracer& LockWaitTracer::operator=(LockWaitTracer&& other) noexcept {
  if (this != &other) {
    Unmap();
    events_ = other.events_;
    buffers_ = std::move(other.buffers_);
    other.buffers_.clear();
    page_size_ = other.page_size_;
  }
  return *this;
}

LockWaitTracer::~LockWaitTracer() {
  Unmap();
}

void LockWaitTracer::Unmap() {
  for (Buffer& b : buffers_) {
    if (b.base != nullptr) ::munmap(b.base, b.bytes);
    b.base = nullptr;
  }
}

bool LockWaitTracer::IoctlAll(unsigned long request, const char* name, std::string* error) {
  for (Buffer& b : buffers_) {
    for (const UniqueFd& fd : b.fds) {
      if (::ioctl(fd.get(), request, 0) != 0) {
        *error = std::string(name) + ": " + ErrnoMessage(errno);
        return false;
      }
    }
  }
  return true;
}

bool LockWaitTracer::Enable(std::string* error) {
  return IoctlAll(PERF_EVENT_IOC_ENABLE, "PERF_EVENT_IOC_ENABLE", error);
}

bool LockWaitTracer::Disable(std::string* error) {
  return IoctlAll(PERF_EVENT_IOC_DISABLE, "PERF_EVENT_IOC_DISABLE", error);
}

void LockWaitTracer::Drain(LockWaitAggregator& into) {
  std::string records;
  for (Buffer& b : buffers_) {
    auto* meta = static_cast<perf_event_mmap_page*>(b.base);
    const char* data = static_cast<const char*>(b.base) + page_size_;
    const uint64_t size = b.bytes - page_size_;
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    const uint64_t tail = meta->data_tail;
    if (head == tail) continue;
    records.clear();
    for (uint64_t at = tail; at < head;) {  // the region may wrap around the buffer's end
      const uint64_t offset = at % size;
      const uint64_t n = std::min(head - at, size - offset);
      records.append(data + offset, n);
      at += n;
    }
    DecodeLockRecords(records, events_, into);
    __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
  }
}

}  // namespace faultline::sys
