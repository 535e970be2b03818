#pragma once
// Time for the agent's flows, and waits that end early when something changes: a seam, so
// the unit tests of the run and kernel-switch flows run without sleeping (tests/unit
// agent_fakes.h has a clock that only pretends to wait).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace faultline::agent {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point Now() = 0;
  virtual int64_t UnixSeconds() = 0;
  // Waits up to `d`, or less once `done()` holds (looked at again after every Wake()).
  // Returns done().
  virtual bool WaitFor(std::chrono::milliseconds d, const std::function<bool()>& done) = 0;
  // Makes every WaitFor look at its condition again; call after changing what it looks at.
  virtual void Wake() = 0;
};

// The steady and system clocks, waits on a condition variable.
class SystemClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override;
  int64_t UnixSeconds() override;
  bool WaitFor(std::chrono::milliseconds d, const std::function<bool()>& done) override;
  void Wake() override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

// How long to wait before the `failures`-th retry: exponential from `min` up to `max`, with
// full jitter so a fleet does not reconnect in lock-step.
std::chrono::milliseconds BackoffDelay(int failures, std::chrono::milliseconds min,
                                       std::chrono::milliseconds max);

}  // namespace faultline::agent
