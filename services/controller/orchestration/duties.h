#pragma once
// The controller's background duties, run once per dispatcher tick and kept apart from
// serving agents: lapsed leases back to the queue, lapsed kernel switches to needs-check,
// history change points (every 30th pass), and due schedule slots submitted as jobs.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"
#include "stats/changepoint.h"

namespace faultline::controller {

struct DutyOutcome {
  std::set<int64_t> changed_jobs;  // watchers of these need an update
  bool work_available = false;     // runs were requeued or jobs submitted
};

class BackgroundDuties {
 public:
  BackgroundDuties(const Stores& stores, const Clock* clock,
                   stats::ChangePointOptions change_points = {},
                   std::string holder = DefaultHolder())
      : stores_(stores), clock_(clock), change_points_(change_points), holder_(std::move(holder)) {}

  // One pass of every duty; a failing duty is logged and the others still run. With several
  // controllers (stores.duty_lease set) only the one holding the lease runs them; the others
  // try to take it on every pass.
  DutyOutcome RunOnce();
  // Gives the lease up (the controller is stopping).
  void Release();
  bool holding() const { return holding_; }
  // True when this controller runs the duties: it holds the lease, or there is no lease
  // (one controller). Safe from any thread.
  bool runs_duties() const { return stores_.duty_lease == nullptr || holding_; }
  const std::string& holder() const { return holder_; }

  // This controller's name in the lease: host, pid and a random part.
  static std::string DefaultHolder();

  static constexpr int kHistoryEvery = 30;  // passes between change-point scans
  // Renewed every pass (1 s); a dead holder's lease lapses after this, and another
  // controller runs the duties on its next pass.
  static constexpr std::chrono::seconds kLeaseTtl{15};

 private:
  Stores stores_;
  const Clock* clock_;
  stats::ChangePointOptions change_points_;
  std::string holder_;
  std::atomic<bool> holding_ = false;
  bool announced_ = false;
  int passes_since_history_ = kHistoryEvery - 1;  // first scan on the first pass
};

}  // namespace faultline::controller
