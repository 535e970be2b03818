#include "agent/clock.h"

#include <algorithm>
#include <random>

namespace faultline::agent {

std::chrono::steady_clock::time_point SystemClock::Now() {
  return std::chrono::steady_clock::now();
}

int64_t SystemClock::UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool SystemClock::WaitFor(std::chrono::milliseconds d, const std::function<bool()>& done) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, d, done);
}

void SystemClock::Wake() {
  // Under the mutex: a waiter is either before its look at done() or already waiting.
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

std::chrono::milliseconds BackoffDelay(int failures, std::chrono::milliseconds min,
                                       std::chrono::milliseconds max) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const int64_t cap = std::min<int64_t>(max.count(), min.count() << std::min(failures, 10));
  std::uniform_int_distribution<int64_t> dist(min.count() / 2,
                                              std::max<int64_t>(cap, min.count() / 2));
  return std::chrono::milliseconds(dist(rng));
}

}  // namespace faultline::agent
