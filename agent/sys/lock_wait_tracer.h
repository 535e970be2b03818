#pragma once
// mmap_lock waits of this process's threads, from the kernel's tracepoints
// mmap_lock:mmap_lock_start_locking and mmap_lock:mmap_lock_acquire_returned (issue #27):
// perf_event_open in sampling mode (every hit, PERF_SAMPLE_TID | TIME | RAW), one ring
// buffer per thread that both events of the thread write into (PERF_EVENT_IOC_SET_OUTPUT),
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

// Where a tracepoint's `write` and `success` fields are in its raw record, from the
// format file (events/mmap_lock/NAME/format): kernels moved them (memcg_path -> memcg_id).
struct LockTracepointLayout {
  uint64_t id = 0;
  int write_offset = -1;
  int success_offset = -1;  // -1: the event has no success field (start_locking)
};

// Parses a tracefs format file's text; nullopt with *error naming the missing field.
std::optional<LockTracepointLayout> ParseLockTracepointFormat(const std::string& format,
                                                              bool needs_success,
                                                              std::string* error);

// Decodes one ring-buffer region of records (PERF_RECORD_SAMPLE of the two events,
// PERF_RECORD_LOST) into `into`. Exposed for tests; `records` is whole records.
void DecodeLockRecords(const std::string& records, const LockTracepointLayout& start,
                       const LockTracepointLayout& acquired, LockWaitAggregator& into);

class LockWaitTracer {
 public:
  // Opens disabled events on each thread of `tids` (the benchmark's threads), each thread
  // with a ring buffer of `pages` pages (a power of two). nullopt with *error saying what is
  // unsupported ("no tracepoint system 'mmap_lock' on this kernel", perf_event_open's
  // refusal, ...).
  static std::optional<LockWaitTracer> Open(const std::string& tracefs_root,
                                            const std::vector<pid_t>& tids, size_t pages,
                                            std::string* error);
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
  void Unmap();
  // The ioctl on every event; false with *error naming it.
  bool IoctlAll(unsigned long request, const char* name, std::string* error);

  struct Buffer {
    UniqueFd start;     // owns the buffer
    UniqueFd acquired;  // writes into start's buffer
    void* base = nullptr;
    size_t bytes = 0;  // the mapping: one meta page + the data pages
  };
  LockTracepointLayout start_layout_, acquired_layout_;
  std::vector<Buffer> buffers_;
  size_t page_size_ = 0;
};

}  // namespace faultline::sys
