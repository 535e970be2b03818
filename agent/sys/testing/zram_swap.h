#pragma once
// Test-only: turns /dev/zram0 into a swap device for the lifetime of the object, so
// integration tests can run the swap benchmarks on machines without swap. A thin wrapper
// over the production sys::ZramSwap (the agent's zram_swap option).
#include <cstdint>
#include <optional>
#include <string>

#include "agent/sys/zram_swap.h"

namespace faultline::sys::testing {

class ScopedZramSwap {
 public:
  // Returns nullopt with *unavailable_reason set when the device is missing, already in
  // use, or we lack the rights; the caller GTEST_SKIPs.
  static std::optional<ScopedZramSwap> Start(uint64_t disksize_bytes,
                                             std::string* unavailable_reason) {
    ZramSwapOptions options;
    options.disksize_bytes = disksize_bytes;
    auto swap = ZramSwap::Start(options, unavailable_reason);
    if (!swap) return std::nullopt;
    return ScopedZramSwap(std::move(*swap));
  }

 private:
  explicit ScopedZramSwap(ZramSwap swap) : swap_(std::move(swap)) {}
  ZramSwap swap_;
};

}  // namespace faultline::sys::testing
