#include "services/controller/robot/jobs.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "robot/series.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/orchestration/submission.h"
#include "services/controller/robot/intake.h"
#include "services/controller/robot/verdict.h"

namespace faultline::controller {

absl::StatusOr<std::string> RobotJobs::Mbox(const SeriesRecord& series) const {
  absl::StatusOr<std::string> stored = stores_.robot->SeriesMbox(series.id);
  if (!stored.ok() || !stored->empty()) return stored;
  absl::StatusOr<robot::Series> mails = LoadSeriesMails(*stores_.robot, series);
  if (!mails.ok()) return mails.status();
  return mails->Mbox();
}

absl::StatusOr<std::vector<std::string>> RobotJobs::Arches() const {
  if (!options_.arches.empty()) return options_.arches;
  absl::StatusOr<std::vector<BoardRecord>> boards = stores_.boards->ListBoards();
  if (!boards.ok()) return boards.status();
  std::set<std::string> arches;
  for (const BoardRecord& b : *boards) {
    if (b.summary.boots_built_kernels) arches.insert(b.summary.arch);
  }
  return std::vector<std::string>(arches.begin(), arches.end());
}

std::vector<RobotJobs::PlannedJob> RobotJobs::PlanJobs(
    const SeriesRecord& series, const std::string& mbox, const SeriesRecord* previous,
    const std::string& previous_mbox, const std::vector<std::string>& arches) const {
  auto source = [&](const std::string& series_name, const std::string& series_mbox) {
    v1::KernelSource k;
    k.set_tree(options_.tree);
    k.set_ref(series.base);
    k.set_config_base(options_.config_base);
    for (const v1::SourceFile& f : options_.fragments) *k.add_fragments() = f;
    if (!series_mbox.empty()) {
      v1::SourceFile* f = k.add_series();
      f->set_name(series_name);
      f->set_content(series_mbox);
      for (const std::string& path : options_.include) k.add_include(path);
      k.set_untrusted(true);  // a stranger's series: the builder's sandbox, or refused
    }
    return k;
  };
  const std::string label = absl::StrCat("v", series.version);
  const std::string prev_label =
      previous != nullptr ? absl::StrCat("v", previous->version) : std::string();
  std::vector<PlannedJob> out;
  for (size_t i = 0; i < options_.studies.size(); ++i) {
    const v1::JobSpec& study = options_.studies[i];
    const std::string study_name = study.name().empty() ? study.benchmark() : study.name();
    for (const std::string& arch : arches) {
      // The series against its base, and against the version before it.
      for (bool against_previous : {false, true}) {
        if (against_previous && previous == nullptr) continue;
        v1::JobSpec spec = study;
        spec.clear_kernels();
        spec.clear_kernel_sources();
        spec.clear_arches();
        spec.add_arches(arch);
        const std::string baseline = against_previous ? prev_label : "base";
        spec.add_kernels(baseline);
        spec.add_kernels(label);
        spec.set_baseline(baseline);
        (*spec.mutable_kernel_sources())[baseline] =
            against_previous ? source(robot::SeriesMboxName(previous->version), previous_mbox)
                             : source("", "");
        (*spec.mutable_kernel_sources())[label] =
            source(robot::SeriesMboxName(series.version), mbox);
        spec.set_name(absl::StrCat("robot: ", series.title, " ", label, " vs ", baseline, " (",
                                   study_name, ", ", arch, ")"));
        out.push_back({absl::StrCat("robot/", series.id, "/", i, "/", arch, "/",
                                    against_previous ? prev_label : "base"),
                       std::move(spec)});
      }
    }
  }
  return out;
}

absl::Status RobotJobs::Submit(SeriesRecord series, RobotPass& pass) {
  auto fail = [&](const std::string& why) {
    series.state = SeriesState::kFailed;
    series.reason = why;
    log::warn("event=robot_series_failed id={} reason=\"{}\"", series.id, why);
    return stores_.robot->PutSeries(series);
  };
  if (series.base.empty()) {
    return fail("no base: the series has no base-commit: and the robot names no branch");
  }
  absl::StatusOr<std::string> mbox = Mbox(series);
  if (!mbox.ok()) return fail(std::string(mbox.status().message()));
  std::optional<SeriesRecord> previous;
  std::string previous_mbox;
  if (!series.previous.empty()) {
    absl::StatusOr<std::optional<SeriesRecord>> prev = stores_.robot->GetSeries(series.previous);
    if (!prev.ok()) return prev.status();
    if (prev->has_value()) {
      if (absl::StatusOr<std::string> prev_mbox = Mbox(**prev); prev_mbox.ok()) {
        previous = **prev;
        previous->base = series.base;  // both versions on this one's base
        previous_mbox = *std::move(prev_mbox);
      }
    }
  }
  absl::StatusOr<std::vector<std::string>> arches = Arches();
  if (!arches.ok()) return arches.status();
  if (arches->empty()) return fail("no registered board boots built kernels");
  std::vector<int64_t> jobs;
  for (const PlannedJob& planned :
       PlanJobs(series, *mbox, previous ? &*previous : nullptr, previous_mbox, *arches)) {
    absl::StatusOr<Submitted> job =
        SubmitSpec(stores_.boards, stores_.jobs, planned.spec, planned.request_id);
    if (!job.ok()) {
      if (job.status().code() != absl::StatusCode::kInvalidArgument) return job.status();
      return fail(absl::StrCat("job ", planned.spec.name(), " refused: ", job.status().message()));
    }
    jobs.push_back(job->created.job_id);
  }
  series.jobs = std::move(jobs);
  series.state = SeriesState::kSubmitted;
  ++pass.submitted;
  if (absl::Status s = outbox_.QueueChecks(
          series, CheckKind::kPending, CheckState::kPending,
          absl::StrCat(series.jobs.size(), " A/B jobs running (", arches->size(), " arches)"));
      !s.ok()) {
    return s;
  }
  log::info("event=robot_series_submitted id={} jobs={}", series.id, series.jobs.size());
  return stores_.robot->PutSeries(series);
}

absl::Status RobotJobs::CheckMeasured(SeriesRecord series, RobotPass& pass) {
  // A build says this version does not apply: the same tree and base on every arch, so
  // nothing of it will be measured.
  absl::StatusOr<std::optional<SeriesApplyFailure>> failed = FindApplyFailure(stores_, series);
  if (!failed.ok()) return failed.status();
  if (*failed) return DoesNotApply(std::move(series), (*failed)->error, pass);
  bool final = true;
  for (int64_t id : series.jobs) {
    absl::StatusOr<JobRecord> job = stores_.jobs->GetJob(id);
    if (!job.ok()) return job.status();
    final = final && IsFinal(job->state);
  }
  if (!final) return absl::OkStatus();
  series.state = SeriesState::kMeasured;
  ++pass.measured;
  log::info("event=robot_series_measured id={} jobs={}", series.id, series.jobs.size());
  return stores_.robot->PutSeries(series);
}

absl::Status RobotJobs::DoesNotApply(SeriesRecord series, const std::string& error,
                                     RobotPass& pass) {
  for (int64_t id : series.jobs) {
    absl::StatusOr<JobRecord> job = stores_.jobs->GetJob(id);
    if (!job.ok()) return job.status();
    if (IsFinal(job->state)) continue;
    if (absl::StatusOr<JobRecord> c = stores_.jobs->CancelJob(id); !c.ok()) return c.status();
  }
  series.state = SeriesState::kDoesNotApply;
  series.reason = error;
  ++pass.measured;
  log::info("event=robot_series_does_not_apply id={} error=\"{}\"", series.id, error);
  return stores_.robot->PutSeries(series);
}

}  // namespace faultline::controller
