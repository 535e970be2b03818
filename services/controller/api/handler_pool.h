#pragma once
// Threads for the gRPC handlers' database work. gRPC's callback API runs handlers on a few
// threads of its own; a handler that waits there for PostgreSQL (a result's transaction,
// ~10 ms; a burst of 5,000 results at the end of a fleet's runs) keeps those threads from
// reading the other connections, and at 5,000 boards heartbeats missed their deadlines and
// uploads failed with "recvmsg: Connection timed out". Handlers hand their work to this
// pool instead; it is bounded, so a burst beyond it is answered at once with UNAVAILABLE
// (agents retry with backoff) rather than queued without limit.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace faultline::controller {

class HandlerPool {
 public:
  HandlerPool(int threads, size_t max_waiting);
  ~HandlerPool();  // runs what was queued, then joins
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Queues `task`; false (and `task` dropped) when max_waiting tasks already wait.
  bool Submit(std::function<void()> task);
  size_t waiting() const;

 private:
  void Work();

  const size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace faultline::controller
