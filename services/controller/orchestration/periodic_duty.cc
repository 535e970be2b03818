#include "services/controller/orchestration/periodic_duty.h"

#include <utility>

namespace faultline::controller {

PeriodicDuty::PeriodicDuty(std::function<bool()> pass, std::chrono::milliseconds every,
                           std::function<bool()> may_run)
    : pass_(std::move(pass)), every_(every), may_run_(std::move(may_run)) {}

void PeriodicDuty::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicDuty::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeriodicDuty::Loop() {
  while (true) {
    const bool runs = may_run_();
    const bool backlog = runs && pass_();
    // After a pass, the next one `every` later (at once with a backlog); on standby, the
    // lease looked at again soon (the duties take it on their first tick).
    std::unique_lock lock(mu_);
    const std::chrono::milliseconds wait =
        backlog ? std::chrono::milliseconds(0)
        : runs  ? every_
                : std::chrono::duration_cast<std::chrono::milliseconds>(kStandbyPoll);
    if (cv_.wait_for(lock, wait, [this] { return stopping_; })) return;
  }
}

}  // namespace faultline::controller
