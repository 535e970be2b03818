#pragma once
// The controller's background duties, run once per dispatcher tick and kept apart from
// serving agents: lapsed leases back to the queue, lapsed kernel switches to needs-check,
// history change points (every 30th pass), and due schedule slots submitted as jobs.
#include <cstdint>
#include <set>

#include "services/controller/core/changepoint.h"
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

struct DutyOutcome {
  std::set<int64_t> changed_jobs;  // watchers of these need an update
  bool work_available = false;     // runs were requeued or jobs submitted
};

class BackgroundDuties {
 public:
  BackgroundDuties(const Stores& stores, const Clock* clock, ChangePointOptions change_points = {})
      : stores_(stores), clock_(clock), change_points_(change_points) {}

  // One pass of every duty; a failing duty is logged and the others still run.
  DutyOutcome RunOnce();

  static constexpr int kHistoryEvery = 30;  // passes between change-point scans

 private:
  Stores stores_;
  const Clock* clock_;
  ChangePointOptions change_points_;
  int passes_since_history_ = kHistoryEvery - 1;  // first scan on the first pass
};

}  // namespace faultline::controller
