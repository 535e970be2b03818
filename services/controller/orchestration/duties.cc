#include "services/controller/orchestration/duties.h"

#include <unistd.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"

#include "common/log.h"
#include "services/controller/orchestration/bisection.h"
#include "services/controller/orchestration/history.h"
#include "services/controller/orchestration/submission.h"

namespace faultline::controller {

std::string BackgroundDuties::DefaultHolder() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device random;
  return absl::StrCat(host, ":", getpid(), ":", absl::Hex(random(), absl::kZeroPad8));
}

void BackgroundDuties::Release() {
  if (stores_.duty_lease == nullptr || !holding_) return;
  holding_ = false;
  if (auto released = stores_.duty_lease->ReleaseDutyLease(holder_); !released.ok()) {
    log::warn("event=duty_lease_release_failed error=\"{}\"", std::string(released.message()));
    return;
  }
  log::info("event=duties_released holder={}", holder_);
}

DutyOutcome BackgroundDuties::RunOnce() {
  DutyOutcome out;
  if (stores_.duty_lease != nullptr) {
    auto held = stores_.duty_lease->HoldDutyLease(holder_, kLeaseTtl);
    if (!held.ok()) {
      log::warn("event=duty_lease_failed error=\"{}\"", std::string(held.status().message()));
    }
    const bool now_holding = held.ok() && *held;
    if (now_holding != holding_ || !announced_) {  // the first pass says which it is
      announced_ = true;
      holding_ = now_holding;
      if (holding_) {
        log::info("event=duties_taken holder={}", holder_);
      } else {
        log::warn("event=duties_standby holder={} note=\"another controller holds the lease\"",
                  holder_);
      }
    }
    if (!holding_) return out;
  }
  if (auto reaped = stores_.work->ReapExpiredLeases(); !reaped.ok()) {
    log::warn("event=reap_failed error=\"{}\"", std::string(reaped.status().message()));
  } else if (!reaped->empty()) {
    log::warn("event=leases_expired jobs={}", reaped->size());
    out.changed_jobs.insert(reaped->begin(), reaped->end());
    out.work_available = true;
  }
  if (auto lapsed = stores_.work->ExpireKernelSwitches(); lapsed.ok()) {
    for (const auto& board : *lapsed) {
      log::error("event=kernel_switch_lapsed board={} health=needs-check", board);
    }
  }
  if (stores_.builds != nullptr) {
    // Builds whose builder went quiet go to another builder (or fail after 3 attempts).
    if (auto lapsed = stores_.builds->ExpireBuildLeases(3); !lapsed.ok()) {
      log::warn("event=build_expiry_failed error=\"{}\"", std::string(lapsed.status().message()));
    } else if (*lapsed > 0) {
      log::warn("event=build_leases_expired builds={}", *lapsed);
    }
  }
  // History change points: cheap enough to rescan every 30 passes (30 s).
  if (++passes_since_history_ >= kHistoryEvery) {
    passes_since_history_ = 0;
    auto found = DetectHistoryChangePoints(stores_.history, change_points_);
    if (found.ok() && *found > 0) log::warn("event=change_points_found count={}", *found);
  }
  // Bisections: finished step jobs taken, the next ones submitted.
  if (auto advanced = AdvanceBisections(stores_); !advanced.ok()) {
    log::warn("event=bisections_failed error=\"{}\"", std::string(advanced.status().message()));
  } else if (*advanced > 0) {
    out.work_available = true;
  }
  auto fired = FireDueSchedules(stores_, *clock_);
  if (!fired.ok()) {
    log::warn("event=schedules_failed error=\"{}\"", std::string(fired.status().message()));
  } else if (*fired > 0) {
    log::info("event=schedules_fired jobs={}", *fired);
    out.work_available = true;
  }
  return out;
}

}  // namespace faultline::controller
