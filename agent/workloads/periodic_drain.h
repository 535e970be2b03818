#pragma once
// The reader thread of a tracing that fills ring buffers while a run is measured (the
// mmap_lock wait tracing's, the profile's): calls `drain` at once and then every `period`
// until Stop(), which wakes it without waiting out the period and joins it. The events are
// opened per thread before this thread exists, so its own work is neither traced nor sampled.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace faultline::workloads {

class PeriodicDrain {
 public:
  PeriodicDrain() = default;
  PeriodicDrain(const PeriodicDrain&) = delete;
  PeriodicDrain& operator=(const PeriodicDrain&) = delete;
  ~PeriodicDrain() { Stop(); }

  void Start(std::chrono::milliseconds period, std::function<void()> drain) {
    Stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = false;
    }
    thread_ = std::thread([this, period, drain = std::move(drain)] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stop_) {
        lock.unlock();
        drain();
        lock.lock();
        wake_.wait_for(lock, period, [this] { return stop_; });
      }
    });
  }

  // Idempotent; after it returns `drain` runs no more.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace faultline::workloads
