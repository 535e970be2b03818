#pragma once
// What the API's job states mean, for every client of the API (the controller's watch
// streams, the CLI's --wait): one definition beside the generated code.
#include "faultline/v1/job.pb.h"

namespace faultline::v1 {

// Succeeded, failed or cancelled: the job will not change again.
inline bool IsFinal(JobState state) {
  return state == JOB_STATE_SUCCEEDED || state == JOB_STATE_FAILED || state == JOB_STATE_CANCELLED;
}

}  // namespace faultline::v1
