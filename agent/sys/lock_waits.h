#pragma once
// mmap_lock waits as the seed series reports them (issue #27): every acquisition's wait is
// the time from mmap_lock:mmap_lock_start_locking to mmap_lock:mmap_lock_acquire_returned
// of the same task, split read / write, summed, and counted in decades of microseconds
// ([0,1), [1,10), ... [1000000,+)). This file is the pure part: events in, counters out.
// The events come from the kernel's tracepoints (a reader in the workload); unit tests feed
// them by hand.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "common/lock_wait_names.h"

namespace faultline::sys {

// One tracepoint hit, as the reader decoded it.
struct LockEvent {
  // mmap_lock:mmap_lock_start_locking, mmap_lock:mmap_lock_acquire_returned, and
  // lock:contention_begin / lock:contention_end (any lock the task had to wait for).
  enum class Kind { kStartLocking, kAcquireReturned, kContentionBegin, kContentionEnd };
  Kind kind = Kind::kStartLocking;
  uint32_t tid = 0;
  uint64_t time_ns = 0;  // the kernel's perf clock
  bool write = false;
  bool success = true;     // acquire_returned: false when a trylock or a killable wait failed
  uint64_t mm = 0;         // start_locking: the mm_struct whose mmap_lock is taken
  uint64_t lock_addr = 0;  // contention_*: the lock
  uint32_t flags = 0;      // contention_begin: LCB_F_* (kLockFlag*)
};

// lock:contention_begin's flags (include/trace/events/lock.h).
inline constexpr uint32_t kLockFlagSpin = 1U << 0;
inline constexpr uint32_t kLockFlagRead = 1U << 1;
inline constexpr uint32_t kLockFlagWrite = 1U << 2;
// The mmap_lock is a field of the mm_struct (its offset depends on the kernel's config): a
// rwsem contention inside [mm, mm + kMmStructSpan) while the task is taking that mm's
// mmap_lock is the mmap_lock's. The rwsem's own wait_lock (a spinlock inside it) reports
// SPIN and is not counted.
inline constexpr uint64_t kMmStructSpan = 4096;

// True contention, as `perf lock contention` reports it: acquisitions that had to sleep or
// spin in the rwsem's slow path (contention_begin -> contention_end), and how long.
struct LockContentionSide {
  uint64_t contended = 0;
  uint64_t wait_ns = 0;
  uint64_t max_wait_ns = 0;
};

using ::faultline::kWaitDecades;
using ::faultline::WaitDecade;
using ::faultline::WaitDecadeCounter;
using ::faultline::WaitDecadeLabel;

struct LockWaitSide {
  uint64_t acquisitions = 0;   // acquire_returned with success (without_start: a wait of 0)
  uint64_t failed = 0;         // acquire_returned without success (not in the waits)
  uint64_t without_start = 0;  // answered with no start: a trylock or a downgrade
  uint64_t wait_ns = 0;        // summed over acquisitions
  std::array<uint64_t, kWaitDecades> decades{};
  LockContentionSide contention;
};

class LockWaitAggregator {
 public:
  void Add(const LockEvent& event);
  // A record lost by the reader (ring buffer overrun): pairs across it are dropped.
  void Lost(uint64_t records);
  // The events include lock:contention_begin/end: Counters() then reports the contention.
  void TraceContention() { contention_traced_ = true; }

  const LockWaitSide& read() const { return read_; }
  const LockWaitSide& write() const { return write_; }
  // Starts never answered (a task still waiting at the end, or an answer lost), and an
  // answer that does not fit its task's start (read vs write).
  uint64_t unpaired() const { return unpaired_ + open_.size(); }
  uint64_t lost() const { return lost_; }

  // The run's counters: mmap_lock_wait.{read,write}.{count,failed,without_start,total_us,
  // us_0_1,us_1_10,...,us_1000000_inf}, mmap_lock_wait.unpaired and .lost_records; with
  // TraceContention also mmap_lock_contention.{read,write}.{count,total_us,max_us}.
  std::map<std::string, double> Counters() const;

 private:
  struct Open {
    uint64_t time_ns;
    bool write;
    uint64_t mm = 0;
    uint64_t contention_lock = 0;  // the mmap_lock contention begun in this wait, if any
    uint64_t contention_ns = 0;
  };
  void AddContention(const LockEvent& event);
  LockWaitSide read_, write_;
  std::unordered_map<uint32_t, Open> open_;  // tid -> its start_locking
  uint64_t unpaired_ = 0;
  uint64_t lost_ = 0;
  bool contention_traced_ = false;
};

}  // namespace faultline::sys
