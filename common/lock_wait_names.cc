#include "common/lock_wait_names.h"

namespace faultline {
namespace {

uint64_t DecadeStartUs(size_t decade) {
  uint64_t us = 0;
  if (decade == 0) return 0;
  us = 1;
  for (size_t i = 1; i < decade; ++i) us *= 10;
  return us;
}

}  // namespace

size_t WaitDecade(uint64_t wait_ns) {
  const uint64_t us = wait_ns / 1000;
  size_t decade = 0;
  for (uint64_t bound = 1; decade + 1 < kWaitDecades && us >= bound; bound *= 10) ++decade;
  return decade;
}

std::string WaitDecadeLabel(size_t decade) {
  const std::string start = std::to_string(DecadeStartUs(decade));
  if (decade + 1 >= kWaitDecades) return "[" + start + ", +)";
  return "[" + start + ", " + std::to_string(DecadeStartUs(decade + 1)) + ")";
}

std::string WaitDecadeCounter(size_t decade) {
  const std::string start = std::to_string(DecadeStartUs(decade));
  if (decade + 1 >= kWaitDecades) return "us_" + start + "_inf";
  return "us_" + start + "_" + std::to_string(DecadeStartUs(decade + 1));
}

}  // namespace faultline
