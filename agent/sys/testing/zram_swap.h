#pragma once
// Test-only: turns /dev/zram0 into a swap device for the lifetime of the object, so
// integration tests can run the swap benchmarks on machines without swap.
#include <cstdint>
#include <optional>
#include <string>

namespace faultline::sys::testing {

class ScopedZramSwap {
 public:
  // Sizes zram0, mkswaps it and swaps on. Returns nullopt with *unavailable_reason set when
  // the device is missing, already in use, or we lack the rights; the caller GTEST_SKIPs.
  static std::optional<ScopedZramSwap> Start(uint64_t disksize_bytes,
                                             std::string* unavailable_reason);

  ScopedZramSwap(ScopedZramSwap&& other) noexcept;
  ScopedZramSwap& operator=(ScopedZramSwap&&) = delete;
  ScopedZramSwap(const ScopedZramSwap&) = delete;
  ScopedZramSwap& operator=(const ScopedZramSwap&) = delete;
  // swapoff and reset the device.
  ~ScopedZramSwap();

 private:
  ScopedZramSwap() = default;
  bool active_ = false;
};

}  // namespace faultline::sys::testing
