// The robot's outbox (robot/outbox.h): the reply mail in the series' thread through an
// outbox that never sends one twice, and the patchwork checks through an outbox that
// retries until patchwork takes them.
#include "services/controller/robot/outbox.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "faultline/v1/values.h"
#include "report/bisect.h"
#include "robot/mail.h"
#include "robot/patchwork.h"
#include "robot/series.h"
#include "robot/smtp.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/orchestration/bisection.h"
#include "services/controller/robot/intake.h"
#include "services/controller/robot/verdict.h"

namespace faultline::controller {
namespace {

constexpr int kCheckAttempts = 8;  // then the check is failed (logged)

// When the series was posted: the earliest Date of its mails (0: none says).
int64_t PostedMs(const robot::Series& mails) {
  int64_t first = 0;
  for (const robot::Mail* m : mails.Mails()) {
    if (m->date_ms > 0 && (first == 0 || m->date_ms < first)) first = m->date_ms;
  }
  return first;
}

}  // namespace

// A reply left "sending" went out or not: the controller died between writing "sending" and
// "sent" (only the duty holder sends, one pass at a time). Never sent again.
absl::Status RobotOutbox::SettleInterrupted() {
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

absl::Status RobotOutbox::NoteArchived(const std::string& message_id) {
  absl::StatusOr<bool> moved =
      stores_.robot->MoveReply(message_id, ReplyState::kUncertain, ReplyState::kSent);
  if (!moved.ok()) return moved.status();
  if (*moved) log::info("event=robot_reply_archived message_id={}", message_id);
  return absl::OkStatus();
}

absl::Status RobotOutbox::QueueReply(const SeriesRecord& series) {
  // The mail answered (and its thread, addresses, subject): the series assembled again, once.
  absl::StatusOr<robot::Series> mails = LoadSeriesMails(*stores_.robot, series);
  if (!mails.ok()) return mails.status();
  const robot::Mail& answered = mails->cover ? *mails->cover : mails->patches.begin()->second;
  const bool applies = series.state != SeriesState::kDoesNotApply;
  const ReplyKind kind = applies ? ReplyKind::kResults : ReplyKind::kApply;
  SeriesVerdict verdict;
  std::string body;
  if (applies) {
    verdict = JudgeSeries(stores_, series);
    absl::StatusOr<std::string> text =
        ResultsBody(stores_, options_, series, verdict, PostedMs(*mails), NowMs());
    if (!text.ok()) return text.status();
    body = *std::move(text);
  } else {
    verdict.state = CheckState::kFail;
    absl::StatusOr<std::optional<SeriesApplyFailure>> failed = FindApplyFailure(stores_, series);
    if (!failed.ok()) return failed.status();
    const ApplyFailureRecord* f = *failed ? &(*failed)->failure : nullptr;
    verdict.description = absl::StrCat("does not apply to ", series.base.substr(0, 12),
                                       f ? absl::StrCat(": patch ", f->patch) : "");
    body = ApplyFailureBody(options_, series, f, *mails);
  }
  robot::Reply reply =
      robot::ComposeReply(answered, std::string(ToString(kind)), body, MailOptions());
  if (const size_t width = robot::MaxLineWidth(reply.text); width > 80) {
    log::warn("event=robot_reply_wide series={} columns={}", series.id, width);
  }
  absl::StatusOr<bool> queued = stores_.robot->QueueReply({.series_id = series.id,
                                                           .kind = kind,
                                                           .message_id = reply.message_id,
                                                           .recipients = reply.recipients,
                                                           .text = reply.text});
  if (!queued.ok()) return queued.status();
  if (*queued) {
    log::info("event=robot_reply_queued series={} kind={} message_id={}", series.id, ToString(kind),
              reply.message_id);
  }
  // The verdict check (once per patch, whatever a repeat of this does).
  if (absl::Status s = QueueChecks(series, CheckKind::kVerdict, verdict.state, verdict.description);
      !s.ok()) {
    return s;
  }
  SeriesRecord replied = series;
  replied.state = SeriesState::kReplied;
  return stores_.robot->PutSeries(replied);
}

robot::ReplyOptions RobotOutbox::MailOptions() const {
  return {.from = options_.replies.from,
          .cc = options_.replies.cc,
          .date = absl::FormatTime("%a, %d %b %Y %H:%M:%S +0000", absl::FromUnixMillis(NowMs()),
                                   absl::UTCTimeZone())};
}

absl::Status RobotOutbox::QueueCulpritMails() {
  if (stores_.bisections == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<BisectionRecord>> recent =
      stores_.bisections->ListBisections(50, /*running_only=*/false);
  if (!recent.ok()) return recent.status();
  for (const BisectionRecord& record : *recent) {
    if (record.state != BisectionState::kDone) continue;
    absl::StatusOr<v1::Bisection> b = LoadBisection(stores_, record.id);
    if (!b.ok()) return b.status();
    const v1::BisectRequest& r = b->request();
    // Found from a change point (the nightly side), and confirmed against its parent.
    if (b->culprit() < 0 || b->culprit() >= r.commits_size() ||
        v1::ConfirmationOf(*b) != v1::BISECT_MARK_BAD || v1::ChangePointOf(r) == 0) {
      continue;
    }
    const v1::BisectCommit& culprit = r.commits(b->culprit());
    if (robot::AddressOf(culprit.author()).find('@') == std::string::npos) continue;
    const std::string key = absl::StrCat("bisection/", record.id);
    std::string body = absl::StrCat(
        "faultline bisected a change in ", r.spec().benchmark(), "'s ", report::BisectMetricName(r),
        ",\nfound by the nightly runs of ", r.tree(), " (", r.origin(), "),\nto your commit:\n\n  ",
        culprit.sha().substr(0, 12), " ", culprit.subject(),
        "\n\nIt was confirmed against its parent. The bisection, and the command that runs "
        "it\nagain:\n\n",
        report::RenderBisection(*b, /*steps=*/true),
        "\n-- \nfaultline series robot: one mail per confirmed culprit of a nightly change.\n");
    std::string subject = absl::StrCat("[faultline] first bad commit: ", culprit.subject());
    if (subject.size() > 78) subject = subject.substr(0, 75) + "...";
    robot::Reply mail =
        robot::ComposeMail(culprit.author(), subject, key,
                           std::string(ToString(ReplyKind::kCulprit)), body, MailOptions());
    absl::StatusOr<bool> queued = stores_.robot->QueueReply({.series_id = key,
                                                             .kind = ReplyKind::kCulprit,
                                                             .message_id = mail.message_id,
                                                             .recipients = mail.recipients,
                                                             .text = mail.text});
    if (!queued.ok()) return queued.status();
    if (*queued) {
      log::info("event=robot_culprit_mail_queued bisection={} commit={} to=\"{}\"", record.id,
                culprit.sha(), culprit.author());
    }
  }
  return absl::OkStatus();
}

absl::Status RobotOutbox::QueueChecks(const SeriesRecord& series, CheckKind kind, CheckState state,
                                      const std::string& description) const {
  if (options_.replies.patchwork.empty()) return absl::OkStatus();
  std::vector<std::string> patches = series.patch_ids;
  if (patches.empty()) {  // decided before the intake stored them
    absl::StatusOr<robot::Series> mails = LoadSeriesMails(*stores_.robot, series);
    if (!mails.ok()) return mails.status();
    for (const auto& [index, mail] : mails->patches) patches.push_back(mail.message_id);
  }
  std::vector<CheckRecord> checks;
  for (const std::string& patch : patches) {
    checks.push_back({.series_id = series.id,
                      .patch_message_id = patch,
                      .kind = kind,
                      .state = state,
                      .description = description,
                      .status = CheckStatus::kQueued,
                      .attempts = 0,
                      .error = "",
                      .next_ms = NowMs()});
  }
  return stores_.robot->QueueChecks(checks);
}

absl::Status RobotOutbox::PostDueChecks(const PassDeadline& deadline, RobotPass& pass) {
  const RobotReplyOptions& o = options_.replies;
  if (o.patchwork.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<CheckRecord>> due = stores_.robot->DueChecks(NowMs(), 200);
  if (!due.ok()) return due.status();
  const robot::Patchwork patchwork(o.patchwork, o.patchwork_token);
  for (CheckRecord& check : *due) {
    if (deadline.Past("checks")) break;
    // Patchwork may not have taken the mail yet (it reads the list too): then later.
    absl::Status posted = absl::OkStatus();
    absl::StatusOr<std::vector<int64_t>> ids = patchwork.PatchIds(check.patch_message_id);
    if (!ids.ok()) {
      posted = ids.status();
    } else if (ids->empty()) {
      posted = absl::NotFoundError("patchwork has no patch of that Message-ID yet");
    }
    for (size_t i = 0; posted.ok() && i < ids->size(); ++i) {
      posted = patchwork.PostCheck((*ids)[i], {.state = std::string(ToString(check.state)),
                                               .context = "faultline",
                                               .description = check.description});
    }
    ++check.attempts;
    if (posted.ok()) {
      check.status = CheckStatus::kPosted;
      check.error.clear();
      ++pass.checks;
      log::info("event=patchwork_check series={} patch={} state={}", check.series_id,
                check.patch_message_id, ToString(check.state));
    } else {
      check.error = std::string(posted.message());
      // Again after poll_seconds, doubling up to an hour; given up after kCheckAttempts.
      const int64_t wait_s = std::min<int64_t>(
          int64_t{options_.poll_seconds} << std::min(check.attempts - 1, 16), 3600);
      check.next_ms = NowMs() + wait_s * 1000;
      if (check.attempts >= kCheckAttempts) check.status = CheckStatus::kFailed;
      log::warn("event=patchwork_failed series={} patch={} attempts={} status={} error=\"{}\"",
                check.series_id, check.patch_message_id, check.attempts, ToString(check.status),
                check.error);
    }
    if (absl::Status s = stores_.robot->SettleCheck(check); !s.ok()) return s;
    // Patchwork down or not answering: the rest waits for a later pass, untried (a pass
    // must not wait kTimeoutSeconds per check).
    if (posted.code() == absl::StatusCode::kUnavailable) break;
  }
  return absl::OkStatus();
}

absl::Status RobotOutbox::Deliver(const ReplyRecord& reply, bool* maybe_delivered) const {
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

absl::Status RobotOutbox::SendQueuedReplies(const PassDeadline& deadline, RobotPass& pass) {
  absl::StatusOr<std::vector<ReplyRecord>> queued =
      stores_.robot->ListReplies(ReplyState::kQueued, 100);
  if (!queued.ok()) return queued.status();
  for (const ReplyRecord& reply : *queued) {
    if (deadline.Past("replies")) break;
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

}  // namespace faultline::controller
