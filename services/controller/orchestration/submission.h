#pragma once
// Validating and storing a job spec: shared by SubmitJob and the schedules.
#include <string>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

struct Submitted {
  JobStore::Created created;
  size_t runs = 0;
  std::string benchmark;
};

// Validates `spec` against the catalogue, the limits and the boards registered now.
absl::StatusOr<ValidatedJob> ValidateAgainstFleet(BoardStore* boards, const v1::JobSpec& spec);

// A spec made ready to store: its kernels named by their sources, checked against the
// boards registered now, its builds planned. Nothing is stored.
struct PreparedJob {
  v1::JobSpec spec;
  ValidatedJob job;
};
// `slot`: a schedule's firing (SlotTag), which gives kernels on a branch a build of their own.
absl::StatusOr<PreparedJob> PrepareSpec(BoardStore* boards, v1::JobSpec spec,
                                        const std::string& request_id,
                                        const std::string& slot = "");

// Validates `spec` against the registered boards and stores it (idempotent per request id).
absl::StatusOr<Submitted> SubmitSpec(BoardStore* boards, JobStore* jobs, v1::JobSpec spec,
                                     const std::string& request_id, const std::string& slot = "");

// The first cron slot after `now` in ms since the epoch (a year ahead for a schedule
// that never fires again or whose cron no longer parses).
int64_t NextSlotMs(const std::string& cron, std::chrono::system_clock::time_point now);
// Fires the schedules whose slot has come by `clock` (uses stores.schedules, .boards and
// .jobs); returns how many jobs were submitted.
absl::StatusOr<int> FireDueSchedules(const Stores& stores, const Clock& clock);

}  // namespace faultline::controller
