#pragma once
// How mmap_lock waits are bucketed and named, for the agent that counts them
// (agent/sys/lock_waits.h) and the controller that tables them
// (services/controller/core/lock_wait_tables.h): decades of microseconds, as the seed
// series reports them.
#include <cstddef>
#include <cstdint>
#include <string>

namespace faultline {

// The decade a wait falls in: 0 for [0,1) us, ..., 7 for [1000000,+) us.
inline constexpr size_t kWaitDecades = 8;
size_t WaitDecade(uint64_t wait_ns);
// "[0, 1)", "[1, 10)", ... "[1000000, +)": the seed's row labels.
std::string WaitDecadeLabel(size_t decade);
// "us_0_1", ..., "us_1000000_inf": the counter suffix of a decade
// (mmap_lock_wait.read.us_0_1).
std::string WaitDecadeCounter(size_t decade);

}  // namespace faultline
