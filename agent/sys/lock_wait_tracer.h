#pragma once
// mmap_lock waits of this process's threads, from the kernel's tracepoints
// mmap_lock:mmap_lock_start_locking and mmap_lock:mmap_lock_acquire_returned (issue #27),
// and where the kernel has them lock:contention_begin/end (true contention):
// perf_event_open in sampling mode (every hit, PERF_SAMPLE_TID | TIME | RAW), one ring
// buffer per thread that all events of the thread write into (PERF_EVENT_IOC_SET_OUTPUT),
// so a thread's start and its acquisition arrive in order in one buffer and are paired
// without merging CPUs. A reader drains the buffers while the run goes on (Drain) into a
// LockWaitAggregator; records the kernel had to drop (a full buffer) are counted, never
// silently missing.
#include <sys/types.h>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/sys/lock_waits.h"
#include "agent/sys/unique_fd.h"

namespace faultline::sys {

// Where a tracepoint's fields are in its raw record, from the format file
// (events/SYSTEM/NAME/format): kernels moved them (memcg_path -> memcg_id). -1: absent.
struct LockTracepointLayout {
  uint64_t id = 0;
  int write_offset = -1;      // bool (mmap_lock events)
  int success_offset = -1;    // bool (acquire_returned)
  int mm_offset = -1;         // struct mm_struct * (mmap_lock events)
  int lock_addr_offset = -1;  // void * (contention_begin/end)
  int flags_offset = -1;      // unsigned int (contention_begin)
};

// The four tracepoints the tracer reads; contention_begin.id == 0 when the kernel has no
// lock:contention_begin/end (then only the mmap_lock waits are traced).
struct LockTracepoints {
  LockTracepointLayout start, acquired, contention_begin, contention_end;
  bool contention() const { return contention_begin.id != 0 && contention_end.id != 0; }
};

// Parses a tracefs format file's text: an mmap_lock event (fields write, mm; success when
// needs_success) or a lock:contention_* event (lock_addr; flags when `begin`). nullopt with
// *error naming the missing field.
std::optional<LockTracepointLayout> ParseLockTracepointFormat(const std::string& format,
                                                              bool needs_success,
                                                              std::string* error);
std::optional<LockTracepointLayout> ParseContentionFormat(const std::string& format, bool begin,
                                                          std::string* error);

// Decodes one ring-buffer region of records (PERF_RECORD_SAMPLE of the events,
// PERF_RECORD_LOST) into `into`. Exposed for tests; `records` is whole records.
void DecodeLockRecords(const std::string& records, const LockTracepoints& events,
                       LockWaitAggregator& into);

class LockWaitTracer {
 public:
  // Opens disabled events on each thread of `tids` (the benchmark's threads), each thread
  // with a ring buffer of `pages` pages (a power of two). nullopt with *error saying what is
  // unsupported ("no tracepoint system 'mmap_lock' on this kernel", perf_event_open's
  // refusal, ...). Where the kernel has lock:contention_begin/end they are opened too (on
  // the same buffer); when it has not, *contention_error says why and the rest goes on.
  static std::optional<LockWaitTracer> Open(const std::string& tracefs_root,
                                            const std::vector<pid_t>& tids, size_t pages,
                                            std::string* error,
                                            std::string* contention_error = nullptr);
  bool traces_contention() const { return events_.contention(); }
  LockWaitTracer(LockWaitTracer&& other) noexcept;
  LockWaitTracer& operator=(LockWaitTracer&& other) noexcept;
  LockWaitTracer(const LockWaitTracer&) = delete;
  LockWaitTracer& operator=(const LockWaitTracer&) = delete;
  ~LockWaitTracer();

  bool Enable(std::string* error);
  bool Disable(std::string* error);
  // Reads what every buffer holds into `into` and frees the space. Call it often enough that
  // buffers do not fill (what they drop is counted as lost records).
  void Drain(LockWaitAggregator& into);

 private:
  LockWaitTracer() = default;
  // Open's work; with_contention false leaves lock:contention_* out (*contention_error says
  // why, and is set when they cannot be opened).
  static std::optional<LockWaitTracer> OpenEvents(const std::string& tracefs_root,
                                                  const std::vector<pid_t>& tids, size_t pages,
                                                  bool with_contention, std::string* error,
                                                  std::string* contention_error);
  void Unmap();
  // The ioctl on every event; false with *error naming it.
  bool IoctlAll(unsigned long request, const char* name, std::string* error);

  struct Buffer {
    // start_locking (owns the buffer), acquire_returned, and contention_begin/end when
    // traced: fds[1..] write into fds[0]'s buffer.
    std::vector<UniqueFd> fds;
    void* base = nullptr;
    size_t bytes = 0;  // the mapping: one meta page + the data pages
  };
  LockTracepoints events_;
  std::vector<Buffer> buffers_;
  size_t page_size_ = 0;
};

}  // namespace faultline::sys
