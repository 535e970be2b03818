#include "services/controller/storage/pg_listener.h"

#include <chrono>
#include <pqxx/pqxx>
#include <utility>

#include "common/log.h"

namespace faultline::controller {
namespace {

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection& c, const std::function<void()>& on_work,
           std::atomic<uint64_t>& received)
      : pqxx::notification_receiver(c, PgWorkListener::kChannel),
        on_work_(on_work),
        received_(received) {}
  void operator()(const std::string& /*payload*/, int /*backend_pid*/) override {
    received_++;
    on_work_();
  }

 private:
  const std::function<void()>& on_work_;
  std::atomic<uint64_t>& received_;
};

}  // namespace

PgWorkListener::PgWorkListener(std::string database_url, std::function<void()> on_work)
    : url_(std::move(database_url)), on_work_(std::move(on_work)) {}

PgWorkListener::~PgWorkListener() {
  Stop();
}

void PgWorkListener::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void PgWorkListener::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PgWorkListener::Loop() {
  bool warned = false;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    try {
      pqxx::connection c(url_);
      Receiver receiver(c, on_work_, received_);
      c.get_notifs();  // issues the LISTEN
      if (warned) log::info("event=work_listener_reconnected");
      warned = false;
      while (true) {
        {
          std::lock_guard lock(mu_);
          if (stopping_) return;
        }
        c.await_notification(0, 250000);  // wakes at least every 250 ms to see a stop
      }
    } catch (const std::exception& e) {
      if (!warned) {
        log::warn("event=work_listener_lost error=\"{}\" note=\"the 1 s tick still finds work\"",
                  e.what());
        warned = true;
      }
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
  }
}

}  // namespace faultline::controller
