#include "agent/sys/zram_swap.h"

#include <fcntl.h>
#include <sys/swap.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "agent/sys/file_io.h"
#include "agent/sys/unique_fd.h"
#include "agent/sys/vmstat.h"

// Older libc headers lack them; the values are the kernel's ABI.
#ifndef SWAP_FLAG_PREFER
#define SWAP_FLAG_PREFER 0x8000
#endif
#ifndef SWAP_FLAG_PRIO_MASK
#define SWAP_FLAG_PRIO_MASK 0x7fff
#endif

namespace faultline::sys {

bool FormatSwapHeader(unsigned char* page, size_t page_size, uint64_t size_bytes) {
  // union swap_header (include/linux/swap.h): bootbits[1024], version, last_page,
  // nr_badpages, sws_uuid[16], sws_volume[16], padding[117], badpages[1]; the magic
  // "SWAPSPACE2" ends the first page.
  if (page_size < 4096 || size_bytes / page_size < 10) return false;
  const uint64_t pages = size_bytes / page_size;
  const uint32_t version = 1;
  const uint32_t last_page = static_cast<uint32_t>(std::min<uint64_t>(pages - 1, 0xffffffffu));
  std::memcpy(page + 1024, &version, sizeof(version));
  std::memcpy(page + 1028, &last_page, sizeof(last_page));
  // uuid: any non-zero bytes; the kernel does not check it.
  for (int i = 0; i < 16; ++i) page[1036 + i] = static_cast<unsigned char>(0xa5 ^ (i * 37));
  std::memcpy(page + page_size - 10, "SWAPSPACE2", 10);
  return true;
}

std::optional<ZramSwap> ZramSwap::Start(const ZramSwapOptions& options, std::string* error) {
  const std::string device = "/dev/" + options.device;
  const std::string sys_dir = "/sys/block/" + options.device;
  if (!PathExists(device) || !PathExists(sys_dir + "/disksize")) {
    *error = device + " is not available (zram module not loaded? modprobe zram)";
    return std::nullopt;
  }
  if (auto swaps = ReadSwapDevices(nullptr)) {
    for (const auto& d : *swaps) {
      if (d.path == device) {
        *error = device + " is already used as swap";
        return std::nullopt;
      }
    }
  }
  auto current = ReadFileToString(sys_dir + "/disksize", error);
  if (!current) return std::nullopt;
  if (current->empty() || current->front() != '0') {
    *error = device + " is busy (disksize already set)";
    return std::nullopt;
  }
  if (!options.comp_algorithm.empty() &&
      !WriteToExistingFile(sys_dir + "/comp_algorithm", options.comp_algorithm, error)) {
    return std::nullopt;
  }
  if (!WriteToExistingFile(sys_dir + "/disksize", std::to_string(options.disksize_bytes), error)) {
    return std::nullopt;
  }
  ZramSwap swap;  // from here on the destructor resets the device
  swap.device_path_ = device;
  swap.sys_dir_ = sys_dir;

  const long page_size = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> header(static_cast<size_t>(page_size), 0);
  if (!FormatSwapHeader(header.data(), header.size(), options.disksize_bytes)) {
    *error = "zram_swap size " + std::to_string(options.disksize_bytes) + " is too small";
    return std::nullopt;
  }
  {
    UniqueFd fd(::open(device.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) {
      *error = device + ": " + ErrnoMessage(errno);
      return std::nullopt;
    }
    ssize_t n = ::pwrite(fd.get(), header.data(), header.size(), 0);
    if (n != static_cast<ssize_t>(header.size()) || ::fsync(fd.get()) != 0) {
      *error = "writing the swap header to " + device + ": " + ErrnoMessage(errno);
      return std::nullopt;
    }
  }
  const int flags = SWAP_FLAG_PREFER | (options.priority & SWAP_FLAG_PRIO_MASK);
  if (::swapon(device.c_str(), flags) != 0) {
    *error = "swapon " + device + ": " + ErrnoMessage(errno);
    return std::nullopt;
  }
  return swap;
}

ZramSwap::ZramSwap(ZramSwap&& other) noexcept
    : device_path_(std::exchange(other.device_path_, std::string())),
      sys_dir_(std::exchange(other.sys_dir_, std::string())) {}

ZramSwap::~ZramSwap() {
  std::string ignored;
  Stop(&ignored);
}

bool RemoveStaleZramSwap(const std::string& device, std::string* error) {
  const std::string path = "/dev/" + device;
  auto swaps = ReadSwapDevices(error);
  if (!swaps) return false;
  bool active = false;
  for (const auto& d : *swaps) active = active || d.path == path;
  if (!active) return true;
  if (::swapoff(path.c_str()) != 0) {
    *error = "swapoff " + path + ": " + ErrnoMessage(errno);
    return false;
  }
  return WriteToExistingFile("/sys/block/" + device + "/reset", "1", error);
}

bool ZramSwap::Stop(std::string* error) {
  if (device_path_.empty()) return true;
  bool ok = true;
  // swapoff pulls every swapped page back in: with a run's memcg gone that is only the
  // pages of other processes. EINVAL: swapon never happened.
  if (::swapoff(device_path_.c_str()) != 0 && errno != EINVAL) {
    *error = "swapoff " + device_path_ + ": " + ErrnoMessage(errno);
    ok = false;
  }
  if (ok && !WriteToExistingFile(sys_dir_ + "/reset", "1", error)) ok = false;
  if (ok) {
    device_path_.clear();
    sys_dir_.clear();
  }
  return ok;
}

}  // namespace faultline::sys
