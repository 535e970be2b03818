#pragma once
// Validating and storing a job spec: shared by SubmitJob and the schedules.
#include <string>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/storage/store.h"

namespace faultline::controller {

struct Submitted {
  PgStore::Created created;
  size_t runs = 0;
  std::string benchmark;
};

// Validates `spec` against the catalogue, the limits and the boards registered now.
absl::StatusOr<ValidatedJob> ValidateAgainstFleet(PgStore* store, const v1::JobSpec& spec);

// Validates `spec` against the registered boards and stores it (idempotent per request id).
absl::StatusOr<Submitted> SubmitSpec(PgStore* store, v1::JobSpec spec,
                                     const std::string& request_id);

// Fires the schedules whose slot has come; returns how many jobs were submitted.
absl::StatusOr<int> FireDueSchedules(PgStore* store);

}  // namespace faultline::controller
