#pragma once
// Wakes this controller's dispatcher when any controller on the database queues work
// (a submitted job, a requeued or released run, an adaptive job's next block): the
// runs table's triggers NOTIFY faultline_work (migration 16), and this listener LISTENs
// on a connection of its own. A lost connection is reopened; meanwhile the dispatcher's
// 1 s tick still finds the work.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace faultline::controller {

class PgWorkListener {
 public:
  PgWorkListener(std::string database_url, std::function<void()> on_work);
  ~PgWorkListener();
  PgWorkListener(const PgWorkListener&) = delete;
  PgWorkListener& operator=(const PgWorkListener&) = delete;

  void Start();
  void Stop();
  // Notifications received so far (for tests and logs).
  uint64_t received() const { return received_.load(); }

  static constexpr const char* kChannel = "faultline_work";

 private:
  void Loop();

  std::string url_;
  std::function<void()> on_work_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<uint64_t> received_{0};
};

}  // namespace faultline::controller
