#pragma once
// The change-point bisector, a duty of its own (robot.yaml `bisect_changes`): a change point
// toward slower on a kernel a schedule builds from the robot's tree starts the bisection
// `faultline bisect --from-change` would, with the robot's config fragments (the jobs keep
// them by name only), once per change point (request id "robot-change-<id>"). One that
// cannot be bisected (same commit on both sides, no finished build) is logged once. The
// culprit mail follows from the outbox when the bisection confirms its first bad commit.
#include <cstdint>
#include <set>

#include "absl/status/statusor.h"
#include "services/controller/robot/options.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class ChangePointBisector {
 public:
  // The duty's name in the logs (event=change_bisect_pass).
  static constexpr const char* kName = "change-point-bisector";

  ChangePointBisector(const Stores& stores, const RobotOptions& options)
      : stores_(stores), options_(options) {}

  // One pass over the open change points: the bisections it started.
  absl::StatusOr<int> RunOnce();

 private:
  Stores stores_;
  const RobotOptions& options_;
  std::set<int64_t> done_;  // started or refused, this process
};

}  // namespace faultline::controller
