#pragma once
// A gate test code (a handler, a pool task) waits on until the test opens it.
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace faultline::testing_support {

class Gate {
 public:
  void Wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void WaitForWaiters(int n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return waiting_ >= n; });
  }
  // Waits until the gate is open, at most `timeout` (which only guards against a hung test).
  bool WaitFor(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

}  // namespace faultline::testing_support
