#pragma once
// The robot's jobs: for a chosen series, its A/B jobs — for every study the config names and
// every arch with boards that boot built kernels, the base (the series' base-commit:, else
// the config's branch) against base + series, and against the earlier version too when that
// one was tested — submitted with a request id per (series, study, arch, baseline), so a pass
// cut short by a crash submits nothing twice; then watched until every job is final or a
// build says the series does not apply.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/controller/robot/options.h"
#include "services/controller/robot/outbox.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class RobotJobs {
 public:
  // `outbox`: where the pending checks of a submitted series go.
  RobotJobs(const Stores& stores, const RobotOptions& options, const RobotOutbox& outbox)
      : stores_(stores), options_(options), outbox_(outbox) {}

  // A chosen series' jobs submitted (or it failed, with the reason).
  absl::Status Submit(SeriesRecord series, RobotPass& pass);
  // A submitted series measured once its jobs are final, or answered as not applying.
  absl::Status CheckMeasured(SeriesRecord series, RobotPass& pass);

  // The job specs for one series (exposed for tests): per study and arch, the base and the
  // series (and the earlier version when `previous_mbox` is not empty).
  struct PlannedJob {
    std::string request_id;
    v1::JobSpec spec;
  };
  std::vector<PlannedJob> PlanJobs(const SeriesRecord& series, const std::string& mbox,
                                   const SeriesRecord* previous, const std::string& previous_mbox,
                                   const std::vector<std::string>& arches) const;

 private:
  absl::StatusOr<std::vector<std::string>> Arches() const;
  // The series as one mbox: as the intake stored it, else assembled again.
  absl::StatusOr<std::string> Mbox(const SeriesRecord& series) const;
  // A series whose build says it does not apply: its jobs cancelled, answered once.
  absl::Status DoesNotApply(SeriesRecord series, const std::string& error, RobotPass& pass);

  Stores stores_;
  const RobotOptions& options_;
  const RobotOutbox& outbox_;
};

}  // namespace faultline::controller
