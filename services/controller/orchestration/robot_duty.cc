#include "services/controller/orchestration/robot_duty.h"

#include <utility>

namespace faultline::controller {

RobotDuty::RobotDuty(std::function<void()> pass, std::chrono::seconds every,
                     std::function<bool()> may_run)
    : pass_(std::move(pass)), every_(every), may_run_(std::move(may_run)) {}

void RobotDuty::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void RobotDuty::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RobotDuty::Loop() {
  while (true) {
    const bool runs = may_run_();
    if (runs) pass_();
    // After a pass, the next one `every` later; on standby, the lease looked at again soon
    // (the duties take it on their first tick).
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, runs ? every_ : std::chrono::seconds(kStandbyPoll),
                 [this] { return stopping_; });
    if (stopping_) return;
  }
}

}  // namespace faultline::controller
