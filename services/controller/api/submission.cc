#include "services/controller/api/submission.h"

#include <chrono>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "services/controller/api/convert.h"
#include "services/controller/core/cron.h"
#include "services/controller/core/validation.h"

namespace faultline::controller {

absl::StatusOr<ValidatedJob> ValidateAgainstFleet(PgStore* store, const v1::JobSpec& spec) {
  auto boards = store->ListBoards();
  if (!boards.ok()) return boards.status();
  std::vector<BoardSummary> summaries;
  for (const auto& b : *boards) summaries.push_back(b.summary);
  return ValidateJobSpec(SpecFromProto(spec), summaries);
}

absl::StatusOr<Submitted> SubmitSpec(PgStore* store, v1::JobSpec spec,
                                     const std::string& request_id) {
  // The shuffle seed is recorded with the job, so its run order can be reproduced. A retry
  // under a request id must produce the same spec, so its seed derives from the id.
  if (spec.shuffle_seed() == 0) {
    spec.set_shuffle_seed(request_id.empty() ? (std::random_device{}() | 1ull << 32)
                                             : (std::hash<std::string>{}(request_id) | 1ull << 32));
  }
  auto job = ValidateAgainstFleet(store, spec);
  if (!job.ok()) return job.status();
  auto created = store->CreateJob(*job, spec.name(), SpecToJson(spec), request_id);
  if (!created.ok()) return created.status();
  return Submitted{*created, job->runs.size(), job->benchmark};
}

absl::StatusOr<int> FireDueSchedules(PgStore* store) {
  using std::chrono::system_clock;
  auto fire = [&](const ScheduleRecord& s) -> absl::StatusOr<int64_t> {
    v1::JobSpec spec;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(s.spec_json, &spec, options).ok()) {
      return absl::InternalError("stored schedule spec is unreadable");
    }
    if (spec.name().empty()) spec.set_name(s.name);
    auto submitted = SubmitSpec(store, spec, absl::StrCat("schedule-", s.id, "-", s.next_run_ms));
    if (!submitted.ok()) return submitted.status();
    int64_t job_id = submitted->created.job_id;
    if (auto tagged = store->TagJobWithSchedule(job_id, s.id); !tagged.ok()) return tagged;
    return job_id;
  };
  auto next = [](const ScheduleRecord& s) -> int64_t {
    auto cron = CronSchedule::Parse(s.cron);
    auto now = system_clock::now();
    auto t = cron.ok() ? cron->NextAfter(now) : now + std::chrono::hours(24 * 365);
    if (t == system_clock::time_point::max()) t = now + std::chrono::hours(24 * 365);
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  };
  return store->FireDueSchedules(fire, next);
}

}  // namespace faultline::controller
