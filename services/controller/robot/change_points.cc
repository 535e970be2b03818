// The change-point bisector (robot/change_points.h).
#include "services/controller/robot/change_points.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bisect/request.h"
#include "common/log.h"
#include "faultline/v1/values.h"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/bisection.h"

namespace faultline::controller {
namespace {

struct JobAndBuilds {
  v1::Job job;
  std::vector<v1::Build> builds;
};

absl::StatusOr<JobAndBuilds> LoadJob(const Stores& stores, int64_t id) {
  JobAndBuilds out;
  absl::StatusOr<JobRecord> job = stores.jobs->GetJob(id);
  if (!job.ok()) return job.status();
  JobToProto(*job, &out.job);
  if (stores.builds == nullptr) return out;
  absl::StatusOr<std::vector<BuildRecord>> builds = stores.builds->ListBuilds(id);
  if (!builds.ok()) return builds.status();
  for (const BuildRecord& b : *builds) BuildToProto(b, &out.builds.emplace_back());
  return out;
}

// Whether the job builds the change point's kernel from `tree` (its label, or the label of a
// schedule's slot: "LABEL@<hash>+<slot>").
bool BuildsFrom(const v1::Job& job, const std::string& kernel, const std::string& tree) {
  for (const auto& [label, source] : job.spec().kernel_sources()) {
    if ((label == kernel || absl::StartsWith(label, kernel + "+")) && source.tree() == tree) {
      return true;
    }
  }
  return false;
}

// A refusal of this change point (it cannot be bisected), not a store that failed.
bool Refusal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument ||
         s.code() == absl::StatusCode::kFailedPrecondition ||
         s.code() == absl::StatusCode::kNotFound || s.code() == absl::StatusCode::kOutOfRange;
}

}  // namespace

absl::StatusOr<int> ChangePointBisector::RunOnce() {
  int started_now = 0;
  if (stores_.history == nullptr || stores_.bisections == nullptr) return started_now;
  absl::StatusOr<std::vector<ChangePointRecord>> open =
      stores_.history->ListChangePoints(/*include_closed=*/false);
  if (!open.ok()) return open.status();
  std::vector<const ChangePointRecord*> fresh;
  for (const ChangePointRecord& cp : *open) {
    if (done_.count(cp.id) > 0) continue;
    if (cp.relative_change >= 0) {  // faster: nothing to blame
      done_.insert(cp.id);
      continue;
    }
    fresh.push_back(&cp);
  }
  if (fresh.empty()) return started_now;
  // A change point someone already bisects (the CLI's --from-change, or this robot before a
  // restart) is left to that bisection.
  std::set<int64_t> bisected;
  absl::StatusOr<std::vector<BisectionRecord>> bisections =
      stores_.bisections->ListBisections(1000, /*running_only=*/false);
  if (!bisections.ok()) return bisections.status();
  for (const BisectionRecord& record : *bisections) {
    if (absl::StatusOr<Bisection> b = BisectionFromRecord(record); b.ok()) {
      bisected.insert(v1::ChangePointOf(b->request));
    }
  }
  for (const ChangePointRecord* cp : fresh) {
    if (bisected.count(cp->id) > 0) {
      done_.insert(cp->id);
      continue;
    }
    absl::StatusOr<JobAndBuilds> after = LoadJob(stores_, cp->job_id);
    if (!after.ok()) return after.status();
    if (!BuildsFrom(after->job, cp->kernel, options_.tree)) {  // not a kernel of the robot's tree
      done_.insert(cp->id);
      continue;
    }
    JobAndBuilds before;
    if (cp->previous_job_id != 0) {
      absl::StatusOr<JobAndBuilds> loaded = LoadJob(stores_, cp->previous_job_id);
      if (!loaded.ok()) return loaded.status();
      before = *std::move(loaded);
    }
    v1::ChangePoint proto;
    ChangePointToProto(*cp, &proto);
    bisect::BisectArgs args;
    args.from_change = cp->id;
    args.fragment_texts = options_.fragments;
    std::vector<std::string> names;
    for (const v1::SourceFile& f : options_.fragments) names.push_back("--fragment " + f.name());
    args.command = absl::StrJoin(
        {absl::StrCat("faultline bisect --from-change ", cp->id), absl::StrJoin(names, " ")}, " ");
    v1::JobSpec spec;
    absl::Status refused =
        bisect::FromChange(proto, before.job, before.builds, after->job, after->builds, args, spec);
    absl::StatusOr<v1::BisectRequest> request =
        refused.ok() ? bisect::MakeBisectRequest(args, std::move(spec))
                     : absl::StatusOr<v1::BisectRequest>(refused);
    absl::StatusOr<v1::Bisection> started =
        request.ok()
            ? StartBisection(stores_, *std::move(request), absl::StrCat("robot-change-", cp->id))
            : absl::StatusOr<v1::Bisection>(request.status());
    if (!started.ok() && !Refusal(started.status())) return started.status();
    done_.insert(cp->id);
    if (!started.ok()) {
      log::warn("event=robot_change_not_bisected change_point={} reason=\"{}\"", cp->id,
                std::string(started.status().message()));
      continue;
    }
    ++started_now;
    log::info("event=robot_change_bisected change_point={} bisection={} commits={} board={}",
              cp->id, started->id(), started->request().commits_size() - 1,
              started->request().board());
  }
  return started_now;
}

}  // namespace faultline::controller
