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

// "\tfield:bool write;\toffset:24;\tsize:1;\tsigned:0;" -> offset of `name` (size 1).
int FieldOffset(const std::string& format, const std::string& name) {
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
    if (std::atoi(line.c_str() + size + 5) != 1) return -1;
    return std::atoi(line.c_str() + off + 7);
  }
  return -1;
}

int PerfEventOpen(perf_event_attr* attr, pid_t tid) {
  return static_cast<int>(::syscall(SYS_perf_event_open, attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

std::optional<LockTracepointLayout> ParseLockTracepointFormat(const std::string& format,
                                                              bool needs_success,
                                                              std::string* error) {
  LockTracepointLayout layout;
  const auto id = format.find("\nID: ");
  if (id == std::string::npos) {
    *error = "no ID line in the tracepoint's format";
    return std::nullopt;
  }
  layout.id = std::strtoull(format.c_str() + id + 5, nullptr, 10);
  layout.write_offset = FieldOffset(format, "write");
  if (layout.write_offset < 0) {
    *error = "the tracepoint has no one-byte field 'write'";
    return std::nullopt;
  }
  if (needs_success) {
    layout.success_offset = FieldOffset(format, "success");
    if (layout.success_offset < 0) {
      *error = "the tracepoint has no one-byte field 'success'";
      return std::nullopt;
    }
  }
  return layout;
}

void DecodeLockRecords(const std::string& records, const LockTracepointLayout& start,
                       const LockTracepointLayout& acquired, LockWaitAggregator& into) {
  size_t at = 0;
  while (at + sizeof(perf_event_header) <= records.size()) {
    perf_event_header header;
    std::memcpy(&header, records.data() + at, sizeof(header));
    if (header.size < sizeof(header) || at + header.size > records.size()) break;
    const char* body = records.data() + at + sizeof(header);
    const size_t body_size = header.size - sizeof(header);
    at += header.size;
    if (header.type == PERF_RECORD_LOST && body_size >= 16) {
      uint64_t lost = 0;
      std::memcpy(&lost, body + 8, sizeof(lost));
      into.Lost(lost);
      continue;
    }
    // PERF_SAMPLE_TID | TIME | RAW: u32 pid, tid; u64 time; u32 size; raw[size].
    if (header.type != PERF_RECORD_SAMPLE || body_size < 20) continue;
    uint32_t tid = 0;
    uint64_t time = 0;
    uint32_t raw_size = 0;
    std::memcpy(&tid, body + 4, sizeof(tid));
    std::memcpy(&time, body + 8, sizeof(time));
    std::memcpy(&raw_size, body + 16, sizeof(raw_size));
    const char* raw = body + 20;
    if (20 + static_cast<size_t>(raw_size) > body_size || raw_size < 2) continue;
    uint16_t type = 0;
    std::memcpy(&type, raw, sizeof(type));
    LockEvent event;
    event.tid = tid;
    event.time_ns = time;
    const LockTracepointLayout* layout = nullptr;
    if (type == start.id) {
      layout = &start;
      event.kind = LockEvent::Kind::kStartLocking;
    } else if (type == acquired.id) {
      layout = &acquired;
      event.kind = LockEvent::Kind::kAcquireReturned;
    } else {
      continue;
    }
    if (layout->write_offset >= static_cast<int>(raw_size)) continue;
    event.write = raw[layout->write_offset] != 0;
    if (layout->success_offset >= 0) {
      if (layout->success_offset >= static_cast<int>(raw_size)) continue;
      event.success = raw[layout->success_offset] != 0;
    }
    into.Add(event);
  }
}

std::optional<LockWaitTracer> LockWaitTracer::Open(const std::string& tracefs_root,
                                                   const std::vector<pid_t>& tids, size_t pages,
                                                   std::string* error) {
  if (pages == 0 || (pages & (pages - 1)) != 0) {
    *error = "ring buffer pages must be a power of two";
    return std::nullopt;
  }
  LockWaitTracer tracer;
  const std::string dir = tracefs_root + "/events/mmap_lock/";
  for (const auto& [name, needs_success, layout] :
       {std::tuple<std::string, bool, LockTracepointLayout*>{"mmap_lock_start_locking", false,
                                                             &tracer.start_layout_},
        std::tuple<std::string, bool, LockTracepointLayout*>{"mmap_lock_acquire_returned", true,
                                                             &tracer.acquired_layout_}}) {
    std::string read_error;
    auto format = ReadFileToString(dir + name + "/format", &read_error);
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
  tracer.page_size_ = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (pid_t tid : tids) {
    Buffer buffer;
    for (auto [layout, fd] :
         {std::pair<const LockTracepointLayout*, UniqueFd*>{&tracer.start_layout_, &buffer.start},
          {&tracer.acquired_layout_, &buffer.acquired}}) {
      perf_event_attr attr{};
      attr.size = sizeof(attr);
      attr.type = PERF_TYPE_TRACEPOINT;
      attr.config = layout->id;
      attr.sample_period = 1;
      attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
      attr.disabled = 1;
      attr.wakeup_events = 0;
      const int opened = PerfEventOpen(&attr, tid);
      if (opened < 0) {
        if (errno == ESRCH) break;  // the thread has exited
        *error = "perf_event_open(mmap_lock tracepoint, sampling) for thread " +
                 std::to_string(tid) + ": " + ErrnoMessage(errno);
        return std::nullopt;
      }
      *fd = UniqueFd(opened);
    }
    if (!buffer.start || !buffer.acquired) continue;
    buffer.bytes = (pages + 1) * tracer.page_size_;
    buffer.base =
        ::mmap(nullptr, buffer.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, buffer.start.get(), 0);
    if (buffer.base == MAP_FAILED) {
      buffer.base = nullptr;
      *error = "mmap of a perf ring buffer (" + std::to_string(buffer.bytes) +
               " bytes): " + ErrnoMessage(errno);
      return std::nullopt;
    }
    if (::ioctl(buffer.acquired.get(), PERF_EVENT_IOC_SET_OUTPUT, buffer.start.get()) != 0) {
      *error = std::string("PERF_EVENT_IOC_SET_OUTPUT: ") + ErrnoMessage(errno);
      ::munmap(buffer.base, buffer.bytes);
      return std::nullopt;
    }
    tracer.buffers_.push_back(std::move(buffer));
  }
  return tracer;
}

LockWaitTracer::LockWaitTracer(LockWaitTracer&& other) noexcept
    : start_layout_(other.start_layout_),
      acquired_layout_(other.acquired_layout_),
      buffers_(std::move(other.buffers_)),
      page_size_(other.page_size_) {
  other.buffers_.clear();
}

LockWaitTracer& LockWaitTracer::operator=(LockWaitTracer&& other) noexcept {
  if (this != &other) {
    Unmap();
    start_layout_ = other.start_layout_;
    acquired_layout_ = other.acquired_layout_;
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
    for (const UniqueFd* fd : {&b.start, &b.acquired}) {
      if (::ioctl(fd->get(), request, 0) != 0) {
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
    DecodeLockRecords(records, start_layout_, acquired_layout_, into);
    __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
  }
}

}  // namespace faultline::sys
