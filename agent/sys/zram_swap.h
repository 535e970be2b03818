#pragma once
// A zram device used as swap for the lifetime of the object: the agent provisions one for
// each run of a benchmark that needs swap on boards that opt in (agent.yaml zram_swap), and
// the integration tests use it on machines without swap. Linux only; needs root.
#include <cstdint>
#include <optional>
#include <string>

namespace faultline::sys {

struct ZramSwapOptions {
  uint64_t disksize_bytes = 0;
  std::string device = "zram0";  // /dev/<device>, /sys/block/<device>
  std::string comp_algorithm;    // "" = the kernel's default
  int priority = 32767;          // highest: the run uses this device first
};

class ZramSwap {
 public:
  // Sizes the device, mkswaps it (by writing the swap header itself: no mkswap binary
  // needed on a board) and swaps on. Returns nullopt with *error when the device is
  // missing (zram not loaded), in use (disksize set, or already swap), or on no rights.
  static std::optional<ZramSwap> Start(const ZramSwapOptions& options, std::string* error);

  ZramSwap(ZramSwap&& other) noexcept;
  ZramSwap& operator=(ZramSwap&&) = delete;
  ZramSwap(const ZramSwap&) = delete;
  ZramSwap& operator=(const ZramSwap&) = delete;
  // Stop(), errors ignored.
  ~ZramSwap();

  // swapoff and reset the device (its memory is freed). Idempotent.
  bool Stop(std::string* error);

  const std::string& device_path() const { return device_path_; }

 private:
  ZramSwap() = default;
  std::string device_path_;  // empty once stopped
  std::string sys_dir_;
};

// Takes a zram device left as swap by an agent that died mid-run out of service again
// (swapoff, reset). Returns true when there was nothing to do or it was removed.
bool RemoveStaleZramSwap(const std::string& device, std::string* error);

// Writes a Linux swap header (version 1, "SWAPSPACE2") for a device of `size_bytes` into
// `page` (one page of `page_size` bytes, zeroed by the caller). Pure; unit-tested.
bool FormatSwapHeader(unsigned char* page, size_t page_size, uint64_t size_bytes);

}  // namespace faultline::sys
