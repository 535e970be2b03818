#include "agent/sys/testing/zram_swap.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "agent/sys/file_io.h"
#include "agent/sys/vmstat.h"

extern char** environ;

namespace faultline::sys::testing {
namespace {

constexpr char kDevice[] = "/dev/zram0";
constexpr char kDisksize[] = "/sys/block/zram0/disksize";
constexpr char kReset[] = "/sys/block/zram0/reset";

bool RunQuietly(const char* program, const char* argument, std::string* error) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  char* argv[] = {const_cast<char*>(program), const_cast<char*>(argument), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, program, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *error = std::string(program) + ": " + ErrnoMessage(rc);
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = std::string(program) + " " + argument + " failed";
    return false;
  }
  return true;
}

}  // namespace

std::optional<ScopedZramSwap> ScopedZramSwap::Start(uint64_t disksize_bytes,
                                                    std::string* unavailable_reason) {
  if (!PathExists(kDevice) || !PathExists(kDisksize)) {
    *unavailable_reason = std::string(kDevice) + " is not available (zram module not loaded?)";
    return std::nullopt;
  }
  if (auto swaps = ReadSwapDevices(nullptr)) {
    for (const auto& d : *swaps) {
      if (d.path == kDevice) {
        *unavailable_reason = std::string(kDevice) + " is already used as swap";
        return std::nullopt;
      }
    }
  }
  auto current = ReadFileToString(kDisksize, unavailable_reason);
  if (!current) return std::nullopt;
  if (current->empty() || current->front() != '0') {
    *unavailable_reason = std::string(kDevice) + " is busy (disksize already set)";
    return std::nullopt;
  }
  if (!WriteToExistingFile(kDisksize, std::to_string(disksize_bytes), unavailable_reason)) {
    return std::nullopt;
  }
  ScopedZramSwap swap;  // from here on the destructor resets the device
  swap.active_ = true;
  if (!RunQuietly("mkswap", kDevice, unavailable_reason)) return std::nullopt;
  if (::swapon(kDevice, 0) != 0) {
    *unavailable_reason = std::string("swapon ") + kDevice + ": " + ErrnoMessage(errno);
    return std::nullopt;
  }
  return swap;
}

ScopedZramSwap::ScopedZramSwap(ScopedZramSwap&& other) noexcept
    : active_(std::exchange(other.active_, false)) {}

ScopedZramSwap::~ScopedZramSwap() {
  if (!active_) return;
  ::swapoff(kDevice);  // fails harmlessly when swapon never happened
  std::string ignored;
  WriteToExistingFile(kReset, "1", &ignored);
}

}  // namespace faultline::sys::testing
