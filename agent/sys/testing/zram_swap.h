#pragma once
// Test-only: turns /dev/zram0 into a swap device for the lifetime of the object, so
// integration tests can run the swap benchmarks on machines without swap. A thin wrapper
// over the production sys::ZramSwap (the agent's zram_swap option).
#include <cstdint>
#include <fstream>
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

  // What the machine must offer before our own code is on the hook: /dev/zram0 present
  // (the module loaded), not swap already and not configured by someone else. False with
  // *reason set: the test skips. When this holds, a failing Start() is our bug: it fails.
  static bool DeviceFree(std::string* reason) {
    std::ifstream disksize("/sys/block/zram0/disksize");
    uint64_t bytes = 0;
    if (!(disksize >> bytes)) {
      *reason = "/dev/zram0 is not available (zram module not loaded? modprobe zram)";
      return false;
    }
    std::ifstream swaps("/proc/swaps");
    for (std::string line; std::getline(swaps, line);) {
      if (line.rfind("/dev/zram0", 0) == 0) {
        *reason = "/dev/zram0 is already used as swap";
        return false;
      }
    }
    if (bytes != 0) {
      *reason = "/dev/zram0 is configured by someone else (disksize " + std::to_string(bytes) + ")";
      return false;
    }
    return true;
  }

 private:
  explicit ScopedZramSwap(ZramSwap swap) : swap_(std::move(swap)) {}
  ZramSwap swap_;
};

}  // namespace faultline::sys::testing

// In a test body: `var` holds /dev/zram0 as swap of `bytes` until the end of the scope.
// Skips when the machine has no free zram device; fails when setting up a free one fails.
#define FAULTLINE_ZRAM_SWAP_OR_SKIP(var, bytes)                                        \
  std::string var##_reason;                                                            \
  if (!::faultline::sys::testing::ScopedZramSwap::DeviceFree(&var##_reason)) {         \
    GTEST_SKIP() << "zram swap unavailable: " << var##_reason;                         \
  }                                                                                    \
  auto var = ::faultline::sys::testing::ScopedZramSwap::Start((bytes), &var##_reason); \
  ASSERT_TRUE(var.has_value()) << "setting up zram swap on a free /dev/zram0 failed: " \
                               << var##_reason
