#include "services/controller/orchestration/robot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/read_file.h"
#include "faultline/v1/robot.pb.h"
#include "robot/mail.h"
#include "robot/patchwork.h"
#include "robot/public_inbox.h"
#include "robot/reply.h"
#include "robot/series.h"
#include "robot/smtp.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/orchestration/report_message.h"
#include "services/controller/orchestration/submission.h"
#include "spec/spec_file.h"

namespace faultline::controller {
namespace {

// The series `id` among the mails kept for its thread and version.
absl::StatusOr<robot::Series> LoadSeries(RobotStore* store, const std::string& root, int version,
                                         const std::string& id) {
  absl::StatusOr<std::vector<std::string>> raws = store->ThreadMails(root, version);
  if (!raws.ok()) return raws.status();
  std::vector<robot::Mail> mails;
  for (const std::string& raw : *raws) {
    if (absl::StatusOr<robot::Mail> mail = robot::ParseMail(raw); mail.ok()) {
      mails.push_back(*std::move(mail));
    }
  }
  for (robot::Series& series : robot::AssembleSeries(mails)) {
    if (id.empty() || series.id == id) return std::move(series);
  }
  return absl::NotFoundError(absl::StrCat("series ", id, ": its mails are not kept"));
}

bool Tested(SeriesState s) {
  return s == SeriesState::kSubmitted || s == SeriesState::kMeasured || s == SeriesState::kReplied;
}

}  // namespace

absl::StatusOr<RobotPass> SeriesRobot::RunOnce() {
  if (stores_.robot == nullptr) return absl::FailedPreconditionError("no robot store");
  RobotPass pass;
  const bool replies = !options_.replies.from.empty();
  if (replies) {
    if (absl::Status s = SettleInterruptedReplies(); !s.ok()) return s;
  }
  std::vector<std::pair<std::string, int>> touched;
  if (absl::Status s = Ingest(pass, touched); !s.ok()) return s;
  for (const auto& [root, version] : touched) {
    if (absl::Status s = Decide(root, version, pass); !s.ok()) return s;
  }
  for (SeriesState state : {SeriesState::kChosen, SeriesState::kSubmitted}) {
    absl::StatusOr<std::vector<SeriesRecord>> open = stores_.robot->ListSeries(state, 100);
    if (!open.ok()) return open.status();
    for (SeriesRecord& series : *open) {
      absl::Status s = state == SeriesState::kChosen ? Submit(std::move(series), pass)
                                                     : CheckMeasured(std::move(series), pass);
      if (!s.ok()) return s;
    }
  }
  if (replies) {
    absl::StatusOr<std::vector<SeriesRecord>> measured =
        stores_.robot->ListSeries(SeriesState::kMeasured, 100);
    if (!measured.ok()) return measured.status();
    for (const SeriesRecord& series : *measured) {
      if (absl::Status s = QueueReply(series); !s.ok()) return s;
    }
    if (absl::Status s = SendQueuedReplies(pass); !s.ok()) return s;
  }
  return pass;
}

absl::Status SeriesRobot::Ingest(RobotPass& pass,
                                 std::vector<std::pair<std::string, int>>& touched) {
  absl::StatusOr<std::map<int, std::string>> cursor = stores_.robot->Cursor(options_.archive);
  if (!cursor.ok()) return cursor.status();
  absl::StatusOr<robot::ArchiveRead> read =
      robot::ReadNewMails(options_.archive, *cursor, options_.mails_per_pass);
  if (!read.ok()) return read.status();
  if (read->cursor == *cursor) return absl::OkStatus();
  std::vector<KeptMail> kept;
  std::set<std::pair<std::string, int>> seen;
  for (const robot::ArchivedMail& archived : read->mails) {
    ++pass.mails;
    absl::StatusOr<robot::Mail> mail = robot::ParseMail(archived.raw);
    if (!mail.ok()) {
      log::warn("event=robot_mail_unreadable commit={} error=\"{}\"", archived.commit,
                std::string(mail.status().message()));
      continue;
    }
    if (!options_.replies.from.empty()) {
      if (absl::Status s = NoteArchived(*mail); !s.ok()) return s;
    }
    std::optional<robot::SubjectTag> tag = robot::ParseSubject(mail->subject);
    if (!tag || tag->reply) continue;
    kept.push_back({.message_id = mail->message_id,
                    .thread_root = robot::ThreadRoot(*mail),
                    .version = tag->version,
                    .raw = archived.raw});
    if (seen.emplace(kept.back().thread_root, tag->version).second) {
      touched.emplace_back(kept.back().thread_root, tag->version);
    }
  }
  pass.kept = static_cast<int>(kept.size());
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
    absl::StatusOr<std::optional<SeriesRecord>> known = stores_.robot->GetSeries(series.id);
    if (!known.ok()) return known.status();
    if (known->has_value()) continue;  // decided once
    SeriesRecord record{.id = series.id,
                        .thread_root = root,
                        .version = series.version,
                        .title = series.title,
                        .from = series.from};
    const robot::Choice choice = robot::Choose(series, options_.rules);
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
            against_previous ? source(prev_label + ".mbox", previous_mbox) : source("", "");
        (*spec.mutable_kernel_sources())[label] = source(label + ".mbox", mbox);
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
  absl::StatusOr<robot::Series> mails =
      LoadSeries(stores_.robot, series.thread_root, series.version, series.id);
  if (!mails.ok()) return fail(std::string(mails.status().message()));
  std::optional<SeriesRecord> previous;
  std::string previous_mbox;
  if (!series.previous.empty()) {
    absl::StatusOr<std::optional<SeriesRecord>> prev = stores_.robot->GetSeries(series.previous);
    if (!prev.ok()) return prev.status();
    if (prev->has_value()) {
      absl::StatusOr<robot::Series> prev_mails =
          LoadSeries(stores_.robot, (*prev)->thread_root, (*prev)->version, (*prev)->id);
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
  PostChecks(series, "pending",
             absl::StrCat(series.jobs.size(), " A/B jobs running (", arches->size(), " arches)"));
  log::info("event=robot_series_submitted id={} jobs={}", series.id, series.jobs.size());
  return stores_.robot->PutSeries(series);
}

absl::Status SeriesRobot::CheckMeasured(SeriesRecord series, RobotPass& pass) {
  for (int64_t id : series.jobs) {
    absl::StatusOr<JobRecord> job = stores_.jobs->GetJob(id);
    if (!job.ok()) return job.status();
    if (!IsFinal(job->state)) return absl::OkStatus();
  }
  series.state = SeriesState::kMeasured;
  ++pass.measured;
  log::info("event=robot_series_measured id={} jobs={}", series.id, series.jobs.size());
  return stores_.robot->PutSeries(series);
}

int64_t SeriesRobot::NowMs() const {
  return clock_ != nullptr ? clock_->NowMs() : SystemClock::Get()->NowMs();
}

// A reply left "sending" went out or not: the controller died between writing "sending" and
// "sent" (only the duty holder sends, one pass at a time). Never sent again.
absl::Status SeriesRobot::SettleInterruptedReplies() {
  absl::StatusOr<std::vector<ReplyRecord>> left =
      stores_.robot->ListReplies(ReplyState::kSending, 100);
  if (!left.ok()) return left.status();
  for (const ReplyRecord& reply : *left) {
    log::warn(
        "event=robot_reply_uncertain message_id={} series={} note=\"interrupted while "
        "sending: not sent again; the archive will tell\"",
        reply.message_id, reply.series_id);
    absl::StatusOr<bool> moved =
        stores_.robot->MoveReply(reply.message_id, ReplyState::kSending, ReplyState::kUncertain);
    if (!moved.ok()) return moved.status();
  }
  return absl::OkStatus();
}

// The robot's own reply, read back from the archive: it went out.
absl::Status SeriesRobot::NoteArchived(const robot::Mail& mail) {
  if (mail.message_id.rfind("faultline-", 0) != 0) return absl::OkStatus();
  absl::StatusOr<bool> moved =
      stores_.robot->MoveReply(mail.message_id, ReplyState::kUncertain, ReplyState::kSent);
  if (!moved.ok()) return moved.status();
  if (*moved) log::info("event=robot_reply_archived message_id={}", mail.message_id);
  return absl::OkStatus();
}

absl::StatusOr<std::string> SeriesRobot::ReplyBody(const SeriesRecord& series) const {
  std::string body = absl::StrCat(
      "faultline measured this series (v", series.version, ") against its base",
      series.previous.empty() ? "" : absl::StrCat(" and against v", series.version - 1), ":\n",
      series.jobs.size(), " jobs, the kernels built with and without the series from\n",
      options_.tree, "\nat ", series.base, "\n(config ", options_.config_base,
      options_.fragments.empty() ? "" : " + fragments", ").\n");
  if (!series.previous.empty()) {
    absl::StrAppend(&body, "The earlier version: <", series.previous, ">.\n");
  }
  for (int64_t id : series.jobs) {
    absl::StatusOr<std::string> report =
        RenderJobReport(stores_.jobs, stores_.builds, id, report::ReportFormat::kMail);
    if (!report.ok()) return report.status();
    absl::StrAppend(&body, "\n", std::string(78, '='), "\n", *report);
  }
  absl::StrAppend(&body,
                  "\n-- \nfaultline series robot: one reply per version of a series. Each job's\n"
                  "report again: faultline report JOB --format mail.\n");
  return body;
}

absl::Status SeriesRobot::QueueReply(const SeriesRecord& series) {
  absl::StatusOr<robot::Series> mails =
      LoadSeries(stores_.robot, series.thread_root, series.version, series.id);
  if (!mails.ok()) return mails.status();
  const robot::Mail& answered = mails->cover ? *mails->cover : mails->patches.begin()->second;
  const std::string message_id =
      robot::ReplyMessageId(answered.message_id, "results", options_.replies.from);
  absl::StatusOr<std::string> body = ReplyBody(series);
  if (!body.ok()) return body.status();
  const absl::Time now = absl::FromUnixMillis(NowMs());
  robot::Reply reply = robot::ComposeReply(
      answered, "results", *body,
      {.from = options_.replies.from,
       .cc = options_.replies.cc,
       .date = absl::FormatTime("%a, %d %b %Y %H:%M:%S +0000", now, absl::UTCTimeZone())});
  if (const size_t width = robot::MaxLineWidth(reply.text); width > 80) {
    log::warn("event=robot_reply_wide series={} columns={}", series.id, width);
  }
  absl::StatusOr<bool> queued = stores_.robot->QueueReply({.series_id = series.id,
                                                           .kind = "results",
                                                           .message_id = reply.message_id,
                                                           .recipients = reply.recipients,
                                                           .text = reply.text});
  if (!queued.ok()) return queued.status();
  if (*queued) log::info("event=robot_reply_queued series={} message_id={}", series.id, message_id);
  if (*queued) {
    const auto [state, description] = Verdict(series);
    PostChecks(series, state, description);
  }
  SeriesRecord replied = series;
  replied.state = SeriesState::kReplied;
  return stores_.robot->PutSeries(replied);
}

void SeriesRobot::PostChecks(const SeriesRecord& series, const std::string& state,
                             const std::string& description) const {
  const RobotReplyOptions& o = options_.replies;
  if (o.patchwork.empty()) return;
  absl::StatusOr<robot::Series> mails =
      LoadSeries(stores_.robot, series.thread_root, series.version, series.id);
  if (!mails.ok()) return;
  const robot::Patchwork patchwork(o.patchwork, o.patchwork_token);
  int posted = 0;
  for (const auto& [index, mail] : mails->patches) {
    absl::StatusOr<std::vector<int64_t>> ids = patchwork.PatchIds(mail.message_id);
    if (!ids.ok()) {
      log::warn("event=patchwork_failed series={} error=\"{}\"", series.id,
                std::string(ids.status().message()));
      return;
    }
    for (int64_t id : *ids) {
      absl::Status s = patchwork.PostCheck(
          id, {.state = state, .context = "faultline", .description = description});
      if (!s.ok()) {
        log::warn("event=patchwork_failed series={} patch={} error=\"{}\"", series.id, id,
                  std::string(s.message()));
        continue;
      }
      ++posted;
    }
  }
  log::info("event=patchwork_checks series={} state={} patches={}", series.id, state, posted);
}

std::pair<std::string, std::string> SeriesRobot::Verdict(const SeriesRecord& series) const {
  int measured = 0, regressions = 0, comparisons = 0;
  for (int64_t id : series.jobs) {
    v1::GetReportRequest request;
    request.set_job_id(id);
    absl::StatusOr<v1::GetReportResponse> report =
        ReportResponse(stores_.jobs, stores_.builds, request);
    if (!report.ok()) continue;
    if (!report->comparisons().empty()) ++measured;
    for (const v1::Comparison& c : report->comparisons()) {
      ++comparisons;
      if (c.verdict() == "regression" || c.verdict() == "collapse") ++regressions;
    }
  }
  if (measured == 0) {
    return {"fail", absl::StrCat("no job of ", series.jobs.size(), " measured: see the reply")};
  }
  if (regressions > 0) {
    return {"warning",
            absl::StrCat(regressions, " of ", comparisons, " comparisons regress: see the reply")};
  }
  return {"success", absl::StrCat(comparisons, " comparisons, no regression: see the reply")};
}

absl::Status SeriesRobot::Deliver(const ReplyRecord& reply, bool* maybe_delivered) const {
  const RobotReplyOptions& o = options_.replies;
  if (!o.dry_run_dir.empty()) {
    // Written whole under its Message-ID: a second write is the same file.
    std::error_code ec;
    std::filesystem::create_directories(o.dry_run_dir, ec);
    const std::string path = absl::StrCat(o.dry_run_dir, "/", reply.message_id, ".eml");
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << reply.text;
      if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ec.message()));
    *maybe_delivered = true;
    return absl::OkStatus();
  }
  if (o.smtp.empty()) return absl::FailedPreconditionError("replies: neither smtp nor dry_run_dir");
  robot::SmtpResult sent =
      robot::SendMail(o.smtp, robot::AddressOf(o.from), reply.recipients, reply.text);
  *maybe_delivered = sent.maybe_delivered;
  return sent.status;
}

absl::Status SeriesRobot::SendQueuedReplies(RobotPass& pass) {
  absl::StatusOr<std::vector<ReplyRecord>> queued =
      stores_.robot->ListReplies(ReplyState::kQueued, 100);
  if (!queued.ok()) return queued.status();
  for (const ReplyRecord& reply : *queued) {
    absl::StatusOr<int> recent = stores_.robot->RepliesSentSince(NowMs() - 3600 * 1000);
    if (!recent.ok()) return recent.status();
    if (*recent >= static_cast<int>(options_.replies.per_hour)) {
      log::info("event=robot_reply_rate_limited message_id={} sent_last_hour={}", reply.message_id,
                *recent);
      return absl::OkStatus();
    }
    absl::StatusOr<bool> claimed =
        stores_.robot->MoveReply(reply.message_id, ReplyState::kQueued, ReplyState::kSending);
    if (!claimed.ok()) return claimed.status();
    if (!*claimed) continue;
    bool maybe_delivered = false;
    absl::Status delivered = Deliver(reply, &maybe_delivered);
    ReplyState next = ReplyState::kSent;
    if (!delivered.ok()) {
      // Refused before the mail was handed over: try again next pass. After that: it may
      // have gone out, so never again.
      next = maybe_delivered ? ReplyState::kUncertain : ReplyState::kQueued;
      log::warn("event=robot_reply_failed message_id={} next={} error=\"{}\"", reply.message_id,
                ToString(next), std::string(delivered.message()));
    } else {
      ++pass.replied;
      log::info("event=robot_reply_sent message_id={} series={} recipients={}", reply.message_id,
                reply.series_id, reply.recipients.size());
    }
    absl::StatusOr<bool> moved =
        stores_.robot->MoveReply(reply.message_id, ReplyState::kSending, next);
    if (!moved.ok()) return moved.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<RobotOptions> LoadRobotConfig(const std::string& path) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", why));
  };
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  v1::RobotConfig config;
  if (absl::Status s = spec::LoadMessageFromYaml(*text, path, &config); !s.ok()) return s;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto resolve = [&](const std::string& file) {
    const std::filesystem::path p(file);
    return (p.is_absolute() || dir.empty() ? p : dir / p).string();
  };
  RobotOptions o;
  if (config.archive().empty()) return bad("archive", "the list's public-inbox directory");
  o.archive = resolve(config.archive());
  if (config.tree().empty() || config.tree().front() != '/') {
    return bad("tree", "an absolute path of the kernel git tree on the builders");
  }
  o.tree = config.tree();
  o.branch = config.branch();
  if (!config.paths().empty()) o.rules.paths.assign(config.paths().begin(), config.paths().end());
  if (!config.opt_in_tag().empty()) o.rules.opt_in_tag = config.opt_in_tag();
  if (config.studies().empty()) return bad("studies", "at least one job spec file");
  for (int i = 0; i < config.studies_size(); ++i) {
    absl::StatusOr<v1::JobSpec> study = spec::LoadJobSpecFile(resolve(config.studies(i)));
    if (!study.ok()) return study.status();
    if (!study->kernels().empty() || !study->kernel_sources().empty()) {
      return bad(absl::StrCat("studies[", i, "]"),
                 "names kernels; the robot sets them (base and the series)");
    }
    o.studies.push_back(*std::move(study));
  }
  o.arches.assign(config.arches().begin(), config.arches().end());
  if (!config.config_base().empty()) o.config_base = config.config_base();
  for (int i = 0; i < config.fragments_size(); ++i) {
    absl::StatusOr<std::string> fragment = ReadFile(resolve(config.fragments(i)));
    if (!fragment.ok())
      return bad(absl::StrCat("fragments[", i, "]"), fragment.status().ToString());
    v1::SourceFile f;
    f.set_name(std::filesystem::path(config.fragments(i)).filename().string());
    f.set_content(*fragment);
    o.fragments.push_back(std::move(f));
  }
  if (config.poll_seconds() > 0) o.poll_seconds = config.poll_seconds();
  const v1::RobotReplies& r = config.replies();
  o.replies.from = r.from();
  o.replies.smtp = r.smtp();
  o.replies.dry_run_dir = r.dry_run_dir().empty() ? "" : resolve(r.dry_run_dir());
  if (r.per_hour() > 0) o.replies.per_hour = r.per_hour();
  o.replies.cc.assign(r.cc().begin(), r.cc().end());
  o.replies.patchwork = r.patchwork();
  if (!r.patchwork().empty()) {
    if (r.patchwork_token_file().empty()) {
      return bad("replies.patchwork_token_file", "a file with the API token that posts checks");
    }
    absl::StatusOr<std::string> token = ReadFile(resolve(r.patchwork_token_file()));
    if (!token.ok()) return bad("replies.patchwork_token_file", token.status().ToString());
    o.replies.patchwork_token = std::string(absl::StripAsciiWhitespace(*token));
  }
  if (!o.replies.from.empty() && robot::AddressOf(o.replies.from).find('@') == std::string::npos) {
    return bad("replies.from", "a mailbox (\"faultline robot <robot@example.org>\")");
  }
  if (!o.replies.from.empty() && o.replies.smtp.empty() && o.replies.dry_run_dir.empty()) {
    return bad("replies", "smtp (host:port) or dry_run_dir, to send or write the mails");
  }
  return o;
}

}  // namespace faultline::controller
