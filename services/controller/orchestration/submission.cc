#include "services/controller/orchestration/submission.h"

#include <chrono>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "services/controller/convert/convert.h"
#include "services/controller/convert/run_options.h"
#include "services/controller/core/cron.h"
#include "services/controller/core/validation.h"
#include "services/controller/orchestration/kernel_sources.h"

namespace faultline::controller {
namespace {

// FNV-1a (64 bit): the same on every build and platform, unlike std::hash, so a retry
// reaching another controller replica derives the same seed (and finds the first job).
uint64_t StableHash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

absl::StatusOr<ValidatedJob> ValidateAgainstFleet(BoardStore* boards, const v1::JobSpec& spec) {
  auto listed = boards->ListBoards();
  if (!listed.ok()) return listed.status();
  std::vector<BoardSummary> summaries;
  for (const auto& b : *listed) summaries.push_back(b.summary);
  auto input = SpecFromProto(spec);
  if (!input.ok()) return input.status();
  return ValidateJobSpec(*input, summaries);
}

absl::StatusOr<PreparedJob> PrepareSpec(BoardStore* boards, v1::JobSpec spec,
                                        const std::string& request_id, const std::string& slot) {
  // The shuffle seed is recorded with the job, so its run order can be reproduced. A retry
  // under a request id must produce the same spec, so its seed derives from the id.
  if (spec.shuffle_seed() == 0) {
    spec.set_shuffle_seed(request_id.empty() ? (std::random_device{}() | 1ull << 32)
                                             : (StableHash(request_id) | 1ull << 32));
  }
  // Kernels the job brings get their unique labels before anything else reads the spec.
  auto sources = ResolveKernelSources(spec, {}, slot);
  if (!sources.ok()) return sources.status();
  auto listed = boards->ListBoards();
  if (!listed.ok()) return listed.status();
  std::vector<BoardSummary> summaries;
  for (const auto& b : *listed) summaries.push_back(b.summary);
  auto builds = PlanBuilds(*sources, spec, summaries);
  if (!builds.ok()) return builds.status();
  // A board that boots built kernels can serve every label the job brings (once built).
  for (auto& b : summaries) {
    if (!b.boots_built_kernels) continue;
    for (const auto& [label, source] : *sources) {
      b.kernel_labels.push_back(label);
      b.bootable_kernel_labels.push_back(label);
    }
  }
  auto input = SpecFromProto(spec);
  if (!input.ok()) return input.status();
  auto job = ValidateJobSpec(*input, summaries);
  if (!job.ok()) return job.status();
  // Stored in one spelling: the options as checked, in run_options (run_options.h).
  auto options = RunOptionsFromJson(job->run_options);
  if (!options.ok()) return options.status();
  SetRunOptions(*options, &spec);
  job->builds = std::move(*builds);
  return PreparedJob{std::move(spec), std::move(*job)};
}

absl::StatusOr<Submitted> SubmitSpec(BoardStore* boards, JobStore* jobs, v1::JobSpec spec,
                                     const std::string& request_id, const std::string& slot) {
  auto prepared = PrepareSpec(boards, std::move(spec), request_id, slot);
  if (!prepared.ok()) return prepared.status();
  auto created = jobs->CreateJob(prepared->job, prepared->spec.name(),
                                 SpecToJson(WithoutFileContents(prepared->spec)), request_id);
  if (!created.ok()) return created.status();
  return Submitted{*created, prepared->job.runs.size(), prepared->job.benchmark};
}

int64_t NextSlotMs(const std::string& cron, std::chrono::system_clock::time_point now) {
  using std::chrono::system_clock;
  auto parsed = CronSchedule::Parse(cron);
  auto t = parsed.ok() ? parsed->NextAfter(now) : system_clock::time_point::max();
  if (t == system_clock::time_point::max()) t = now + std::chrono::hours(24 * 365);
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

absl::StatusOr<int> FireDueSchedules(const Stores& stores, const Clock& clock) {
  auto fire = [&](const ScheduleRecord& s) -> absl::StatusOr<int64_t> {
    v1::JobSpec spec;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(s.spec_json, &spec, options).ok()) {
      return absl::InternalError("stored schedule spec is unreadable");
    }
    if (spec.name().empty()) spec.set_name(s.name);
    // Kernels on a branch are built as the branch is at this slot (kernel_sources.h).
    auto submitted =
        SubmitSpec(stores.boards, stores.jobs, spec,
                   absl::StrCat("schedule-", s.id, "-", s.next_run_ms), SlotTag(s.next_run_ms));
    if (!submitted.ok()) return submitted.status();
    int64_t job_id = submitted->created.job_id;
    if (auto tagged = stores.schedules->TagJobWithSchedule(job_id, s.id); !tagged.ok()) {
      return tagged;
    }
    return job_id;
  };
  const auto now = clock.Now();
  auto next = [&](const ScheduleRecord& s) { return NextSlotMs(s.cron, now); };
  return stores.schedules->FireDueSchedules(clock.NowMs(), fire, next);
}

}  // namespace faultline::controller
