#pragma once
// The controller's clock seam: the dispatcher (parked calls' deadlines, background duty
// ticks), cron slots and the token cache read time through a Clock, so tests drive time with
// FakeClock instead of waiting for it.
#include <chrono>
#include <mutex>

namespace faultline::controller {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point Now() const = 0;
  int64_t NowMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Now().time_since_epoch()).count();
  }
};

class SystemClock final : public Clock {
 public:
  std::chrono::system_clock::time_point Now() const override {
    return std::chrono::system_clock::now();
  }
  static SystemClock* Get() {
    static SystemClock clock;
    return &clock;
  }
};

// Time stands still until a test moves it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point start) : now_(start) {}
  std::chrono::system_clock::time_point Now() const override {
    std::lock_guard lock(mu_);
    return now_;
  }
  void Advance(std::chrono::system_clock::duration d) {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  void Set(std::chrono::system_clock::time_point t) {
    std::lock_guard lock(mu_);
    now_ = t;
  }

 private:
  mutable std::mutex mu_;
  std::chrono::system_clock::time_point now_;
};

}  // namespace faultline::controller
