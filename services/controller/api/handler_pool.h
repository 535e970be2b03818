#pragma once
// Threads for the gRPC handlers' database work. gRPC's callback API runs handlers on a few
// threads of its own; a handler that waits there for PostgreSQL (a result's transaction,
// ~10 ms; a burst of 5,000 results at the end of a fleet's runs) keeps those threads from
// reading the other connections, and at 5,000 boards heartbeats missed their deadlines and
// uploads failed with "recvmsg: Connection timed out". Handlers hand their work to this
// pool instead; it is bounded, so a burst beyond it is answered at once with UNAVAILABLE
// (agents retry with backoff) rather than queued without limit.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace faultline::controller {

// `threads` threads that each take up to `max_batch` waiting items at once, in arrival
// order, and hand them to `run` together: work that is cheaper done together (results in
// one transaction: one commit, one COPY) is grouped exactly when it queues up, and costs
// no wait when it does not. Bounded: Submit refuses beyond `max_waiting` items.
template <typename Item>
class BatchPool {
 public:
  using Run = std::function<void(std::vector<Item>&)>;
  BatchPool(int threads, size_t max_waiting, size_t max_batch, Run run)
      : max_waiting_(max_waiting),
        max_batch_(std::max<size_t>(1, max_batch)),
        run_(std::move(run)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~BatchPool() {  // runs what was queued, then joins
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  BatchPool(const BatchPool&) = delete;
  BatchPool& operator=(const BatchPool&) = delete;

  // Queues `item`; false (and `item` dropped) when max_waiting items already wait.
  bool Submit(Item item) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || queue_.size() >= max_waiting_) return false;
      queue_.push_back(std::move(item));
    }
    cv_.notify_one();
    return true;
  }
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  void Work() {
    std::vector<Item> batch;
    while (true) {
      batch.clear();
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left
        while (!queue_.empty() && batch.size() < max_batch_) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      run_(batch);
    }
  }

  const size_t max_waiting_;
  const size_t max_batch_;
  const Run run_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started once the rest is built
};

// A BatchPool of independent tasks, one at a time.
class HandlerPool : public BatchPool<std::function<void()>> {
 public:
  HandlerPool(int threads, size_t max_waiting)
      : BatchPool(threads, max_waiting, 1, [](std::vector<std::function<void()>>& tasks) {
          for (auto& task : tasks) task();
        }) {}
};

}  // namespace faultline::controller
