#pragma once
// The series robot (issue #45), in rooms (#57): every pass the intake reads the list archive
// on from where it was, keeps the patch mails and decides each whole posted series once
// (robot/intake.h); the jobs room submits a chosen series' A/B jobs and sees them measured
// (robot/jobs.h); the outbox answers in the series' thread and on patchwork, each mail once
// (robot/outbox.h, robot/verdict.h). The nightly side — change points bisected — is a duty
// of its own (robot/change_points.h). A pass runs on its own thread
// (orchestration/periodic_duty.h), never inside the background duties, and its network I/O stops at
// a per-pass deadline.
#include "absl/status/statusor.h"
#include "services/controller/core/clock.h"
#include "services/controller/robot/intake.h"
#include "services/controller/robot/jobs.h"
#include "services/controller/robot/options.h"
#include "services/controller/robot/outbox.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class SeriesRobot {
 public:
  SeriesRobot(const Stores& stores, RobotOptions options, const Clock* clock = nullptr)
      : stores_(stores),
        options_(std::move(options)),
        clock_(clock),
        intake_(stores_, options_),
        outbox_(stores_, options_, clock_),
        jobs_(stores_, options_, outbox_) {}
  SeriesRobot(const SeriesRobot&) = delete;
  SeriesRobot& operator=(const SeriesRobot&) = delete;

  absl::StatusOr<RobotPass> RunOnce();

  const RobotOptions& options() const { return options_; }
  const RobotJobs& jobs() const { return jobs_; }

 private:
  Stores stores_;
  RobotOptions options_;
  const Clock* clock_;  // null: the system's
  RobotIntake intake_;
  RobotOutbox outbox_;
  RobotJobs jobs_;
};

}  // namespace faultline::controller
