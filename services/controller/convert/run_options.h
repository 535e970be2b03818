#pragma once
// A job's run options (JobSpec.run_options): checked here, once, for every path a spec
// takes in (submit, validate, schedules, bisection steps, the robot's jobs), and kept as one
// JSON value from then on: core carries it unread, storage keeps it in jobs.run_options,
// the assignment sends it whole (Assignment.options). A new option is a RunOptions field,
// its check in ValidateRunOptions and its probe in the workload.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"

namespace faultline::controller {

// RunOptions.profile's frequency: the limit and the default.
inline constexpr uint32_t kMaxProfileHz = 10000;
inline constexpr uint32_t kDefaultProfileHz = 99;

// The spec's run options (run_options, or the older top-level fields) checked, with their
// defaults made explicit (a profile samples at 99 Hz unless it says otherwise). An error is
// INVALID_ARGUMENT naming the field as the spec spelled it (spec.events[2] or
// spec.run_options.events[2]) and the limit; an option given both ways, differently, is
// refused.
absl::StatusOr<v1::RunOptions> ValidateRunOptions(const v1::JobSpec& spec);

// The spec as stored: `options` (validated) in run_options, the older fields cleared.
void SetRunOptions(const v1::RunOptions& options, v1::JobSpec* spec);

// Run options from JSON with the proto's field names (what jobs.run_options holds, written
// by v1::RunOptionsToJson, faultline/v1/run_options.h). Fields this controller does not
// know (a newer one's) are skipped; JSON that is no RunOptions is an error.
absl::StatusOr<v1::RunOptions> RunOptionsFromJson(const std::string& json);

}  // namespace faultline::controller
