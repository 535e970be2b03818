#include "services/controller/api/duties.h"

#include <string>

#include "services/common/log.h"
#include "services/controller/api/history.h"
#include "services/controller/api/submission.h"

namespace faultline::controller {

DutyOutcome BackgroundDuties::RunOnce() {
  DutyOutcome out;
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
  // History change points: cheap enough to rescan every 30 passes (30 s).
  if (++passes_since_history_ >= kHistoryEvery) {
    passes_since_history_ = 0;
    auto found = DetectHistoryChangePoints(stores_.history, change_points_);
    if (found.ok() && *found > 0) log::warn("event=change_points_found count={}", *found);
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
