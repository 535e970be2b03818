#include "agent/sys/lock_waits.h"

namespace faultline::sys {

void LockWaitAggregator::Add(const LockEvent& event) {
  if (event.kind == LockEvent::Kind::kStartLocking) {
    // A start with one already open for the task: the first was never answered.
    if (!open_.emplace(event.tid, Open{event.time_ns, event.write}).second) {
      ++unpaired_;
      open_[event.tid] = Open{event.time_ns, event.write};
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
  out["mmap_lock_wait.unpaired"] = static_cast<double>(unpaired());
  out["mmap_lock_wait.lost_records"] = static_cast<double>(lost_);
  return out;
}

}  // namespace faultline::sys
