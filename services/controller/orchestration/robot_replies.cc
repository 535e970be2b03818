// The robot's answers (orchestration/robot.h): the reply mail in the series' thread through
// an outbox that never sends one twice, and the patchwork checks through an outbox that
// retries until patchwork takes them.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/kernel_label.h"
#include "common/log.h"
#include "common/strings.h"
#include "kbuild/series.h"
#include "report/bisect.h"
#include "robot/mail.h"
#include "robot/patchwork.h"
#include "robot/reply.h"
#include "robot/series.h"
#include "robot/smtp.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/orchestration/bisection.h"
#include "services/controller/orchestration/report_message.h"
#include "services/controller/orchestration/robot.h"

namespace faultline::controller {
namespace {

constexpr int kCheckAttempts = 8;  // then the check is failed (logged)
constexpr const char* kSignature =
    "\n-- \nfaultline series robot: one reply per version of a series.\n";

// "-12.0%": a ratio as the change it is.
std::string Percent(double ratio) {
  return absl::StrFormat("%+.1f%%", (ratio - 1) * 100);
}

}  // namespace

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
  if (!robot::IsReplyMessageId(mail.message_id)) return absl::OkStatus();
  absl::StatusOr<bool> moved =
      stores_.robot->MoveReply(mail.message_id, ReplyState::kUncertain, ReplyState::kSent);
  if (!moved.ok()) return moved.status();
  if (*moved) log::info("event=robot_reply_archived message_id={}", mail.message_id);
  return absl::OkStatus();
}

SeriesRobot::Verdict SeriesRobot::Judge(const SeriesRecord& series) const {
  Verdict v;
  int measured = 0, regressions = 0, comparisons = 0, inconclusive = 0;
  // Kernels that did not build: said once each (by label and arch), never hidden behind
  // "no regression".
  std::vector<std::string> failed_builds;
  std::set<std::string> failed_seen;
  for (int64_t id : series.jobs) {
    absl::StatusOr<std::vector<BuildRecord>> builds = stores_.builds->ListBuilds(id);
    if (!builds.ok()) continue;
    for (const BuildRecord& b : *builds) {
      // A build stopped because its job was cancelled did not fail (pg_jobs.cc's reason).
      if (b.state != BuildState::kFailed || b.error.rfind("cancelled: ", 0) == 0 ||
          !failed_seen.insert(b.label + "/" + b.arch).second) {
        continue;
      }
      std::string first(absl::StripAsciiWhitespace(b.error.substr(0, b.error.find('\n'))));
      std::string line = absl::StrCat("  ", KernelLabel::Parse(b.label).name, " (", b.arch,
                                      ") did not build: ", first);
      if (line.size() > 78) line = line.substr(0, 75) + "...";
      failed_builds.push_back(ValidUtf8(line));
    }
  }
  for (int64_t id : series.jobs) {
    v1::GetReportRequest request;
    request.set_job_id(id);
    absl::StatusOr<v1::GetReportResponse> report =
        ReportResponse(stores_.jobs, stores_.builds, request);
    if (!report.ok()) continue;
    if (!report->comparisons().empty()) ++measured;
    for (const v1::Comparison& c : report->comparisons()) {
      ++comparisons;
      if (c.verdict() == "inconclusive") ++inconclusive;
      if (c.verdict() != "regression" && c.verdict() != "collapse") continue;
      ++regressions;
      std::vector<std::string> cell;
      for (const std::string& key : report->matrix_keys()) {
        if (auto it = c.cell().find(key); it != c.cell().end()) {
          cell.push_back(absl::StrCat(key, "=", it->second));
        }
      }
      std::string line =
          absl::StrCat("  ", report->job().spec().benchmark(), " on ", c.board(),
                       cell.empty() ? "" : absl::StrCat(" (", absl::StrJoin(cell, " "), ")"), ": ",
                       c.candidate(), " vs ", c.baseline(), " ", Percent(c.ratio()), " [",
                       Percent(c.ci_low()), ", ", Percent(c.ci_high()), "]");
      if (line.size() > 78) line = line.substr(0, 75) + "...";
      v.lines.push_back(std::move(line));
    }
  }
  if (regressions > 0) {
    for (std::string& f : failed_builds) v.lines.push_back(std::move(f));
  }
  if (!failed_builds.empty() && regressions == 0) {
    v.state = "fail";
    v.description = absl::StrCat(failed_builds.size(), " kernel build(s) failed: see the reply");
    v.headline = absl::StrCat("Not tested: ", failed_builds.size(), " kernel build(s) failed:");
    v.lines = std::move(failed_builds);
    if (comparisons > 0) {
      v.lines.push_back(
          absl::StrCat("(the ", comparisons, " comparisons that ran show none slower)"));
    }
  } else if (measured == 0) {
    v.state = "fail";
    v.description = absl::StrCat("no job of ", series.jobs.size(), " measured: see the reply");
    v.headline = absl::StrCat("Nothing measured: no job of ", series.jobs.size(),
                              " compared its kernels (see below).");
  } else if (regressions > 0) {
    v.state = "warning";
    v.description =
        absl::StrCat(regressions, " of ", comparisons, " comparisons regress: see the reply");
    v.headline = absl::StrCat("Regression: ", regressions, " of ", comparisons,
                              " comparisons say slower (95% CI):");
  } else {
    // "No regression" from runs too few to tell says so.
    const std::string unsure =
        inconclusive == 0 ? "" : absl::StrCat(" (", inconclusive, " inconclusive)");
    v.state = "success";
    v.description =
        absl::StrCat(comparisons, " comparisons", unsure, ", no regression: see the reply");
    v.headline = absl::StrCat("No regression in ", comparisons, " comparisons", unsure, ".");
  }
  return v;
}

absl::StatusOr<std::string> SeriesRobot::ReplyBody(const SeriesRecord& series,
                                                   const Verdict& verdict) const {
  // What it says first: the verdict, then how it was measured, then every job's report.
  std::string body = absl::StrCat(verdict.headline, "\n");
  for (const std::string& line : verdict.lines) absl::StrAppend(&body, line, "\n");
  // The earlier version it was compared with: the newest tested one, not always N-1.
  std::string against_earlier;
  if (!series.previous.empty()) {
    absl::StatusOr<std::optional<SeriesRecord>> earlier = stores_.robot->GetSeries(series.previous);
    if (!earlier.ok()) return earlier.status();
    against_earlier = earlier->has_value() ? absl::StrCat(" and against v", (*earlier)->version)
                                           : " and against an earlier version";
  }
  absl::StrAppend(&body, "\nfaultline measured this series (v", series.version,
                  ") against its base", against_earlier, ":\n", series.jobs.size(),
                  " jobs, the kernels built with and without the series from\n", options_.tree,
                  "\nat ", series.base, "\n(config ", options_.config_base,
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
  absl::StrAppend(&body, kSignature,
                  "Each job's report again: faultline report JOB --format mail.\n");
  return body;
}

std::string SeriesRobot::ApplyFailureBody(const SeriesRecord& series,
                                          const robot::Series& mails) const {
  std::optional<kbuild::ApplyFailure> f = kbuild::ParseApplyFailure(series.reason);
  std::string body =
      absl::StrCat("faultline could not test this series (v", series.version,
                   "): it does not apply to\n", options_.tree, "\nat ", series.base, ".\n\n");
  if (!f) {
    absl::StrAppend(&body, series.reason, "\n");
  } else {
    absl::StrAppend(&body, "Patch ", f->index, " of ", mails.total, " fails",
                    f->file.empty() ? "" : absl::StrCat(" in ", f->file),
                    f->hunk.empty() ? "" : absl::StrCat(", the hunk ", f->hunk), ":\n  ",
                    f->subject, "\n");
    if (!f->reason.empty()) absl::StrAppend(&body, "because ", f->reason, ".\n");
    auto patch = mails.patches.find(f->index);
    const std::vector<std::string> hunk = patch == mails.patches.end()
                                              ? std::vector<std::string>{}
                                              : robot::HunkLines(patch->second, f->file, f->hunk);
    if (!hunk.empty()) {
      absl::StrAppend(&body, "\n");
      for (const std::string& line : hunk) {
        std::string quoted = absl::StrCat("> ", line);
        if (robot::MaxLineWidth(quoted) > 80) quoted = quoted.substr(0, 77) + "...";
        absl::StrAppend(&body, quoted, "\n");
      }
    }
  }
  absl::StrAppend(&body,
                  "\nNothing was measured. A version that applies there gets its A/B on every\n"
                  "arch the lab has.\n",
                  kSignature);
  return body;
}

absl::Status SeriesRobot::QueueReply(const SeriesRecord& series) {
  absl::StatusOr<robot::Series> mails = LoadSeries(series.thread_root, series.version, series.id);
  if (!mails.ok()) return mails.status();
  const robot::Mail& answered = mails->cover ? *mails->cover : mails->patches.begin()->second;
  const bool applies = series.state != SeriesState::kDoesNotApply;
  const std::string kind = applies ? "results" : "apply";
  Verdict verdict;
  std::string body;
  if (applies) {
    verdict = Judge(series);
    absl::StatusOr<std::string> text = ReplyBody(series, verdict);
    if (!text.ok()) return text.status();
    body = *std::move(text);
  } else {
    verdict.state = "fail";
    std::optional<kbuild::ApplyFailure> f = kbuild::ParseApplyFailure(series.reason);
    verdict.description = absl::StrCat("does not apply to ", series.base.substr(0, 12),
                                       f ? absl::StrCat(": patch ", f->index) : "");
    body = ApplyFailureBody(series, *mails);
  }
  robot::Reply reply = robot::ComposeReply(answered, kind, body, MailOptions());
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
    log::info("event=robot_reply_queued series={} kind={} message_id={}", series.id, kind,
              reply.message_id);
  }
  // The verdict check (once per patch, whatever a repeat of this does).
  if (absl::Status s = QueueChecks(series, "verdict", verdict.state, verdict.description);
      !s.ok()) {
    return s;
  }
  SeriesRecord replied = series;
  replied.state = SeriesState::kReplied;
  return stores_.robot->PutSeries(replied);
}

robot::ReplyOptions SeriesRobot::MailOptions() const {
  return {.from = options_.replies.from,
          .cc = options_.replies.cc,
          .date = absl::FormatTime("%a, %d %b %Y %H:%M:%S +0000", absl::FromUnixMillis(NowMs()),
                                   absl::UTCTimeZone())};
}

absl::Status SeriesRobot::QueueCulpritMails() {
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
    if (b->culprit() < 0 || b->culprit() >= r.commits_size() || b->confirmation() != "bad" ||
        r.origin().rfind("change point", 0) != 0) {
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
        robot::ComposeMail(culprit.author(), subject, key, "culprit", body, MailOptions());
    absl::StatusOr<bool> queued = stores_.robot->QueueReply({.series_id = key,
                                                             .kind = "culprit",
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

absl::Status SeriesRobot::QueueChecks(const SeriesRecord& series, const std::string& kind,
                                      const std::string& state,
                                      const std::string& description) const {
  if (options_.replies.patchwork.empty()) return absl::OkStatus();
  absl::StatusOr<robot::Series> mails = LoadSeries(series.thread_root, series.version, series.id);
  if (!mails.ok()) return mails.status();
  std::vector<CheckRecord> checks;
  for (const auto& [index, mail] : mails->patches) {
    checks.push_back({.series_id = series.id,
                      .patch_message_id = mail.message_id,
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

absl::Status SeriesRobot::PostDueChecks(RobotPass& pass) {
  const RobotReplyOptions& o = options_.replies;
  if (o.patchwork.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<CheckRecord>> due = stores_.robot->DueChecks(NowMs(), 200);
  if (!due.ok()) return due.status();
  const robot::Patchwork patchwork(o.patchwork, o.patchwork_token);
  for (CheckRecord& check : *due) {
    if (PastDeadline("checks")) break;
    // Patchwork may not have taken the mail yet (it reads the list too): then later.
    absl::Status posted = absl::OkStatus();
    absl::StatusOr<std::vector<int64_t>> ids = patchwork.PatchIds(check.patch_message_id);
    if (!ids.ok()) {
      posted = ids.status();
    } else if (ids->empty()) {
      posted = absl::NotFoundError("patchwork has no patch of that Message-ID yet");
    }
    for (size_t i = 0; posted.ok() && i < ids->size(); ++i) {
      posted = patchwork.PostCheck(
          (*ids)[i],
          {.state = check.state, .context = "faultline", .description = check.description});
    }
    ++check.attempts;
    if (posted.ok()) {
      check.status = CheckStatus::kPosted;
      check.error.clear();
      ++pass.checks;
      log::info("event=patchwork_check series={} patch={} state={}", check.series_id,
                check.patch_message_id, check.state);
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
    if (PastDeadline("replies")) break;
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
