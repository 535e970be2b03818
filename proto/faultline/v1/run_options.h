#pragma once
// A job's run options (RunOptions) as one value, read from a spec or an assignment of any
// age: JobSpec.run_options / Assignment.options, or the older top-level fields (events,
// mmap_lock_waits, profile) that a spec, a stored job or a controller from before them
// carries. This is the one reader of the older fields: scripts/check-house.sh refuses
// them anywhere else.
#include <string>

#include "faultline/v1/agent.pb.h"
#include "faultline/v1/job.pb.h"
#include "google/protobuf/util/json_util.h"

namespace faultline::v1 {
namespace run_options_internal {

// `options` with each option it leaves unset taken from the older fields.
template <typename Older>
RunOptions WithOlder(RunOptions options, const Older& older) {
  if (options.events().empty()) *options.mutable_events() = older.events();
  if (!options.mmap_lock_waits()) options.set_mmap_lock_waits(older.mmap_lock_waits());
  if (!options.has_profile() && older.has_profile()) *options.mutable_profile() = older.profile();
  return options;
}

}  // namespace run_options_internal

inline RunOptions RunOptionsOf(const JobSpec& spec) {
  return run_options_internal::WithOlder(spec.run_options(), spec);
}

// An assignment's options (a profile of frequency 0 from an older controller means none).
inline RunOptions RunOptionsOf(const Assignment& a) {
  RunOptions options = run_options_internal::WithOlder(a.options(), a);
  if (options.has_profile() && options.profile().frequency_hz() == 0) options.clear_profile();
  return options;
}

// Run options as JSON with the proto's field names: what the controller stores
// (jobs.run_options) and what the agent gives the workload (--run-options). "{}": none.
inline std::string RunOptionsToJson(const RunOptions& options) {
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(options, &json, print).ok()) return "{}";
  return json;
}

}  // namespace faultline::v1
