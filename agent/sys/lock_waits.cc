#include "agent/sys/lock_waits.h"

#include <algorithm>

namespace faultline::sys {

void LockWaitAggregator::AddContention(const LockEvent& event) {
  // Only inside a wait for an mmap_lock: the task's other locks are not this lock's story.
  auto it = open_.find(event.tid);
  if (it == open_.end()) return;
  Open& open = it->second;
  if (event.kind == LockEvent::Kind::kContentionBegin) {
    const bool rwsem =
        (event.flags & (kLockFlagRead | kLockFlagWrite)) != 0 && (event.flags & kLockFlagSpin) == 0;
    const bool in_mm = event.lock_addr >= open.mm && event.lock_addr - open.mm < kMmStructSpan;
    if (rwsem && in_mm && open.mm != 0 && open.contention_lock == 0) {
      open.contention_lock = event.lock_addr;
      open.contention_ns = event.time_ns;
    }
    return;
  }
  if (open.contention_lock == 0 || event.lock_addr != open.contention_lock ||
      event.time_ns < open.contention_ns) {
    return;
  }
  LockContentionSide& side = (open.write ? write_ : read_).contention;
  const uint64_t wait = event.time_ns - open.contention_ns;
  ++side.contended;
  side.wait_ns += wait;
  side.max_wait_ns = std::max(side.max_wait_ns, wait);
  open.contention_lock = 0;
}

void LockWaitAggregator::Add(const LockEvent& event) {
  if (event.kind == LockEvent::Kind::kContentionBegin ||
      event.kind == LockEvent::Kind::kContentionEnd) {
    AddContention(event);
    return;
  }
  if (event.kind == LockEvent::Kind::kStartLocking) {
    // A start with one already open for the task: the first was never answered.
    const Open open{event.time_ns, event.write, event.mm};
    if (!open_.emplace(event.tid, open).second) {
      ++unpaired_;
      open_[event.tid] = open;
    }
    return;
  }
  LockWaitSide& side = event.write ? write_ : read_;
  auto it = open_.find(event.tid);
  if (it == open_.end()) {
    // Answered without a start: a trylock, or mmap_write_downgrade (read, success): no wait.
    ++side.without_start;
    if (!event.success) {
      ++side.failed;
    } else {
      ++side.acquisitions;
      ++side.decades[0];
    }
    return;
  }
  if (it->second.write != event.write || it->second.time_ns > event.time_ns) {
    ++unpaired_;
    open_.erase(it);
    return;
  }
  if (!event.success) {
    ++side.failed;
  } else {
    const uint64_t wait = event.time_ns - it->second.time_ns;
    ++side.acquisitions;
    side.wait_ns += wait;
    ++side.decades[WaitDecade(wait)];
  }
  open_.erase(it);
}

void LockWaitAggregator::Lost(uint64_t records) {
  lost_ += records;
  // Any open start may have lost its answer (or a later start): pair nothing across a gap.
  unpaired_ += open_.size();
  open_.clear();
}

std::map<std::string, double> LockWaitAggregator::Counters() const {
  std::map<std::string, double> out;
  for (const auto& [name, side] : {std::pair<std::string, const LockWaitSide*>{"read", &read_},
                                   std::pair<std::string, const LockWaitSide*>{"write", &write_}}) {
    const std::string prefix = "mmap_lock_wait." + name + ".";
    out[prefix + "count"] = static_cast<double>(side->acquisitions);
    out[prefix + "failed"] = static_cast<double>(side->failed);
    out[prefix + "without_start"] = static_cast<double>(side->without_start);
    out[prefix + "total_us"] = static_cast<double>(side->wait_ns) / 1000.0;
    for (size_t d = 0; d < kWaitDecades; ++d) {
      out[prefix + WaitDecadeCounter(d)] = static_cast<double>(side->decades[d]);
    }
  }
  if (contention_traced_) {
    for (const auto& [name, side] :
         {std::pair<std::string, const LockWaitSide*>{"read", &read_},
          std::pair<std::string, const LockWaitSide*>{"write", &write_}}) {
      const std::string prefix = "mmap_lock_contention." + name + ".";
      out[prefix + "count"] = static_cast<double>(side->contention.contended);
      out[prefix + "total_us"] = static_cast<double>(side->contention.wait_ns) / 1000.0;
      out[prefix + "max_us"] = static_cast<double>(side->contention.max_wait_ns) / 1000.0;
    }
  }
  out["mmap_lock_wait.unpaired"] = static_cast<double>(unpaired());
  out["mmap_lock_wait.lost_records"] = static_cast<double>(lost_);
  return out;
}

}  // namespace faultline::sys
