#include "services/controller/orchestration/robot.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "kbuild/series.h"
#include "robot/mail.h"
#include "robot/public_inbox.h"
#include "robot/series.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/orchestration/submission.h"

namespace faultline::controller {
namespace {

// Chosen counts: a version posted with the one before it in the same read is submitted in
// the same pass, just after.
bool Tested(SeriesState s) {
  return s == SeriesState::kChosen || s == SeriesState::kSubmitted || s == SeriesState::kMeasured ||
         s == SeriesState::kReplied;
}

}  // namespace

absl::StatusOr<robot::Series> SeriesRobot::LoadSeries(const std::string& root, int version,
                                                      const std::string& id) const {
  absl::StatusOr<std::vector<std::string>> raws = stores_.robot->ThreadMails(root, version);
  if (!raws.ok()) return raws.status();
  std::vector<robot::Mail> mails;
  for (const std::string& raw : *raws) {
    if (absl::StatusOr<robot::Mail> mail = robot::ParseMail(raw); mail.ok()) {
      mails.push_back(*std::move(mail));
    }
  }
  for (robot::Series& series : robot::AssembleSeries(mails)) {
    if (id.empty() || series.id == id) return std::move(series);
    // Decided before its cover letter came: known by its first patch's id.
    for (const robot::Mail* mail : series.Mails()) {
      if (mail->message_id == id) {
        series.id = id;
        return std::move(series);
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("series ", id, ": its mails are not kept"));
}

absl::StatusOr<RobotPass> SeriesRobot::RunOnce() {
  if (stores_.robot == nullptr) return absl::FailedPreconditionError("no robot store");
  RobotPass pass;
  pass_deadline_ms_ = NowMs() + int64_t{options_.pass_seconds} * 1000;
  const bool replies = !options_.replies.from.empty();
  if (replies) {
    if (absl::Status s = SettleInterruptedReplies(); !s.ok()) return s;
  }
  std::vector<std::pair<std::string, int>> touched;
  if (absl::Status s = Ingest(pass, touched); !s.ok()) return s;
  // A step that fails for one series is logged and counted; the other series go on (the
  // failed one is tried again next pass).
  auto isolated = [&](const std::string& what, const std::string& id, const absl::Status& s) {
    if (s.ok()) return;
    ++pass.errors;
    log::warn("event=robot_series_step_failed step={} id=\"{}\" error=\"{}\"", what, id,
              std::string(s.message()));
  };
  for (const auto& [root, version] : touched) {
    isolated("decide", root, Decide(root, version, pass));
  }
  for (SeriesState state : {SeriesState::kChosen, SeriesState::kSubmitted}) {
    // Chosen series are submitted series_per_pass at a time, oldest first: a flood of
    // series waits its turn instead of filling the queue in one pass.
    absl::StatusOr<std::vector<SeriesRecord>> open = stores_.robot->ListSeries(
        state, state == SeriesState::kChosen ? options_.series_per_pass : 100);
    if (!open.ok()) return open.status();
    for (SeriesRecord& series : *open) {
      const std::string id = series.id;
      isolated(state == SeriesState::kChosen ? "submit" : "measured", id,
               state == SeriesState::kChosen ? Submit(std::move(series), pass)
                                             : CheckMeasured(std::move(series), pass));
    }
  }
  if (replies) {
    for (SeriesState state : {SeriesState::kMeasured, SeriesState::kDoesNotApply}) {
      absl::StatusOr<std::vector<SeriesRecord>> answerable = stores_.robot->ListSeries(state, 100);
      if (!answerable.ok()) return answerable.status();
      for (const SeriesRecord& series : *answerable)
        isolated("reply", series.id, QueueReply(series));
    }
    if (options_.replies.culprits) {
      if (absl::Status s = QueueCulpritMails(); !s.ok()) return s;
    }
    if (absl::Status s = SendQueuedReplies(pass); !s.ok()) return s;
  }
  if (absl::Status s = PostDueChecks(pass); !s.ok()) return s;
  if (options_.bisect_changes) {
    if (absl::Status s = BisectChangePoints(pass); !s.ok()) return s;
  }
  return pass;
}

absl::Status SeriesRobot::Ingest(RobotPass& pass,
                                 std::vector<std::pair<std::string, int>>& touched) {
  absl::StatusOr<std::map<int, std::string>> cursor = stores_.robot->Cursor(options_.archive);
  if (!cursor.ok()) return cursor.status();
  absl::StatusOr<robot::ArchiveRead> read =
      robot::ReadNewMails(options_.archive, *cursor,
                          {.mails = options_.mails_per_pass,
                           .mail_bytes = options_.max_mail_bytes,
                           .bytes = options_.max_pass_bytes});
  if (!read.ok()) return read.status();
  if (read->cursor == *cursor) return absl::OkStatus();
  std::vector<KeptMail> kept;
  std::set<std::pair<std::string, int>> seen;
  // One bad mail costs that mail only: kept apart as bytes, its reason logged and counted.
  auto skip = [&](const robot::ArchivedMail& archived, const std::string& id,
                  const std::string& reason) {
    ++pass.skipped;
    log::warn("event=robot_mail_skipped commit={} message_id=\"{}\" reason=\"{}\"", archived.commit,
              id, reason);
    kept.push_back({.message_id = id.empty() ? "commit:" + archived.commit : id,
                    .raw = archived.raw,
                    .skip_reason = reason});
  };
  for (const robot::ArchivedMail& archived : read->mails) {
    ++pass.mails;
    if (archived.size > options_.max_mail_bytes) {  // not read: the archive keeps it
      skip(archived, "",
           absl::StrCat("too large: ", archived.size, " bytes, over ", options_.max_mail_bytes,
                        " (not read; epoch ", archived.epoch, " commit ", archived.commit, ")"));
      continue;
    }
    absl::StatusOr<robot::Mail> mail = robot::ParseMail(archived.raw);
    if (!mail.ok()) {
      skip(archived, "", absl::StrCat("unreadable: ", mail.status().message()));
      continue;
    }
    if (mail->message_id.size() > 512 || mail->references.size() > 1000) {
      skip(archived, "", "unreadable: a Message-ID over 512 bytes or over 1000 References");
      continue;
    }
    if (!options_.replies.from.empty()) {
      if (absl::Status s = NoteArchived(*mail); !s.ok()) {
        ++pass.errors;
        log::warn("event=robot_note_failed message_id=\"{}\" error=\"{}\"", mail->message_id,
                  std::string(s.message()));
      }
    }
    std::optional<robot::SubjectTag> tag = robot::ParseSubject(mail->subject);
    if (!tag || tag->reply) continue;
    if (tag->total > options_.max_patches) {
      skip(archived, mail->message_id,
           absl::StrCat("too many patches: a series of ", tag->total, ", over ",
                        options_.max_patches));
      continue;
    }
    kept.push_back({.message_id = mail->message_id,
                    .thread_root = robot::ThreadRoot(*mail),
                    .version = tag->version,
                    .raw = archived.raw});
    if (seen.emplace(kept.back().thread_root, tag->version).second) {
      touched.emplace_back(kept.back().thread_root, tag->version);
    }
  }
  pass.kept = static_cast<int>(kept.size()) - pass.skipped;
  return stores_.robot->KeepMails(options_.archive, kept, read->cursor);
}

absl::Status SeriesRobot::Decide(const std::string& root, int version, RobotPass& pass) {
  absl::StatusOr<std::vector<std::string>> raws = stores_.robot->ThreadMails(root, version);
  if (!raws.ok()) return raws.status();
  std::vector<robot::Mail> mails;
  for (const std::string& raw : *raws) {
    if (absl::StatusOr<robot::Mail> mail = robot::ParseMail(raw); mail.ok()) {
      mails.push_back(*std::move(mail));
    }
  }
  for (const robot::Series& series : robot::AssembleSeries(mails)) {
    if (series.id.empty() || !series.complete()) continue;  // the rest comes later
    // Decided once, under whichever id it had then: a cover letter that comes after its
    // patches makes no second series.
    bool decided = false;
    for (const robot::Mail* mail : series.Mails()) {
      absl::StatusOr<std::optional<SeriesRecord>> known =
          stores_.robot->GetSeries(mail->message_id);
      if (!known.ok()) return known.status();
      decided = decided || known->has_value();
    }
    if (decided) continue;
    SeriesRecord record{.id = series.id,
                        .thread_root = root,
                        .version = series.version,
                        .title = series.title,
                        .from = series.from};
    robot::Choice choice = robot::Choose(series, options_.rules);
    if (const size_t bytes = series.Mbox().size();
        choice.chosen && bytes > options_.max_series_bytes) {
      choice = {false, absl::StrCat("too large a diff: ", bytes, " bytes of mbox, over ",
                                    options_.max_series_bytes)};
    }
    record.reason = choice.reason;
    record.state = choice.chosen ? SeriesState::kChosen : SeriesState::kSkipped;
    if (choice.chosen) {
      record.base = series.BaseCommit().empty() ? options_.branch : series.BaseCommit();
      // The earlier version it follows: the newest one it links to that was tested.
      const std::map<int, std::string> earlier = series.EarlierVersions();
      for (auto it = earlier.rbegin(); it != earlier.rend(); ++it) {
        absl::StatusOr<std::optional<SeriesRecord>> prev = stores_.robot->GetSeries(it->second);
        if (!prev.ok()) return prev.status();
        if (prev->has_value() && Tested((*prev)->state)) {
          record.previous = (*prev)->id;
          break;
        }
      }
      ++pass.chosen;
    }
    ++pass.decided;
    log::info("event=robot_series id={} version={} state={} reason=\"{}\" previous={}", record.id,
              record.version, ToString(record.state), record.reason, record.previous);
    if (absl::Status s = stores_.robot->PutSeries(record); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SeriesRobot::Arches() const {
  if (!options_.arches.empty()) return options_.arches;
  absl::StatusOr<std::vector<BoardRecord>> boards = stores_.boards->ListBoards();
  if (!boards.ok()) return boards.status();
  std::set<std::string> arches;
  for (const BoardRecord& b : *boards) {
    if (b.summary.boots_built_kernels) arches.insert(b.summary.arch);
  }
  return std::vector<std::string>(arches.begin(), arches.end());
}

std::vector<SeriesRobot::PlannedJob> SeriesRobot::PlanJobs(
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

absl::Status SeriesRobot::Submit(SeriesRecord series, RobotPass& pass) {
  auto fail = [&](const std::string& why) {
    series.state = SeriesState::kFailed;
    series.reason = why;
    log::warn("event=robot_series_failed id={} reason=\"{}\"", series.id, why);
    return stores_.robot->PutSeries(series);
  };
  if (series.base.empty()) {
    return fail("no base: the series has no base-commit: and the robot names no branch");
  }
  absl::StatusOr<robot::Series> mails = LoadSeries(series.thread_root, series.version, series.id);
  if (!mails.ok()) return fail(std::string(mails.status().message()));
  std::optional<SeriesRecord> previous;
  std::string previous_mbox;
  if (!series.previous.empty()) {
    absl::StatusOr<std::optional<SeriesRecord>> prev = stores_.robot->GetSeries(series.previous);
    if (!prev.ok()) return prev.status();
    if (prev->has_value()) {
      absl::StatusOr<robot::Series> prev_mails =
          LoadSeries((*prev)->thread_root, (*prev)->version, (*prev)->id);
      if (prev_mails.ok()) {
        previous = **prev;
        previous->base = series.base;  // both versions on this one's base
        previous_mbox = prev_mails->Mbox();
      }
    }
  }
  absl::StatusOr<std::vector<std::string>> arches = Arches();
  if (!arches.ok()) return arches.status();
  if (arches->empty()) return fail("no registered board boots built kernels");
  std::vector<int64_t> jobs;
  for (const PlannedJob& planned :
       PlanJobs(series, mails->Mbox(), previous ? &*previous : nullptr, previous_mbox, *arches)) {
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
  if (absl::Status s = QueueChecks(
          series, "pending", "pending",
          absl::StrCat(series.jobs.size(), " A/B jobs running (", arches->size(), " arches)"));
      !s.ok()) {
    return s;
  }
  log::info("event=robot_series_submitted id={} jobs={}", series.id, series.jobs.size());
  return stores_.robot->PutSeries(series);
}

absl::Status SeriesRobot::CheckMeasured(SeriesRecord series, RobotPass& pass) {
  // This version's series (PlanJobs names its mbox SeriesMboxName) failed to apply in a
  // build: the same tree and base on every arch, so nothing of it will be measured.
  const std::string mbox = robot::SeriesMboxName(series.version);
  bool final = true;
  for (int64_t id : series.jobs) {
    absl::StatusOr<JobRecord> job = stores_.jobs->GetJob(id);
    if (!job.ok()) return job.status();
    final = final && IsFinal(job->state);
    absl::StatusOr<std::vector<BuildRecord>> builds = stores_.builds->ListBuilds(id);
    if (!builds.ok()) return builds.status();
    for (const BuildRecord& build : *builds) {
      if (build.state != BuildState::kFailed) continue;
      std::optional<kbuild::ApplyFailure> f = kbuild::ParseApplyFailure(build.error);
      if (f && f->source == mbox) return DoesNotApply(std::move(series), build.error, pass);
    }
  }
  if (!final) return absl::OkStatus();
  series.state = SeriesState::kMeasured;
  ++pass.measured;
  log::info("event=robot_series_measured id={} jobs={}", series.id, series.jobs.size());
  return stores_.robot->PutSeries(series);
}

absl::Status SeriesRobot::DoesNotApply(SeriesRecord series, const std::string& error,
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

bool SeriesRobot::PastDeadline(const char* step) {
  if (NowMs() <= pass_deadline_ms_) return false;
  log::warn("event=robot_pass_deadline step={} pass_seconds={} note=\"the rest next pass\"", step,
            options_.pass_seconds);
  return true;
}

int64_t SeriesRobot::NowMs() const {
  return clock_ != nullptr ? clock_->NowMs() : SystemClock::Get()->NowMs();
}

}  // namespace faultline::controller
