#include "services/controller/robot/intake.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "robot/mail.h"
#include "robot/public_inbox.h"
#include "robot/reply.h"
#include "services/controller/core/lifecycle.h"

namespace faultline::controller {
namespace {

// Chosen counts: a version posted with the one before it in the same read is submitted in
// the same pass, just after.
bool Tested(SeriesState s) {
  return s == SeriesState::kChosen || s == SeriesState::kSubmitted || s == SeriesState::kMeasured ||
         s == SeriesState::kReplied;
}

// The series the kept mails of a thread root and version make.
absl::StatusOr<std::vector<robot::Series>> Assemble(RobotStore& store, const std::string& root,
                                                    int version) {
  absl::StatusOr<std::vector<std::string>> raws = store.ThreadMails(root, version);
  if (!raws.ok()) return raws.status();
  std::vector<robot::Mail> mails;
  for (const std::string& raw : *raws) {
    if (absl::StatusOr<robot::Mail> mail = robot::ParseMail(raw); mail.ok()) {
      mails.push_back(*std::move(mail));
    }
  }
  return robot::AssembleSeries(mails);
}

}  // namespace

absl::StatusOr<robot::Series> LoadSeriesMails(RobotStore& store, const SeriesRecord& record) {
  absl::StatusOr<std::vector<robot::Series>> all =
      Assemble(store, record.thread_root, record.version);
  if (!all.ok()) return all.status();
  for (robot::Series& series : *all) {
    if (series.id == record.id) return std::move(series);
    // Decided before its cover letter came: known by its first patch's id.
    for (const robot::Mail* mail : series.Mails()) {
      if (mail->message_id == record.id) {
        series.id = record.id;
        return std::move(series);
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("series ", record.id, ": its mails are not kept"));
}

absl::StatusOr<RobotIntake::Read> RobotIntake::ReadArchive(RobotPass& pass) {
  Read out;
  absl::StatusOr<std::map<int, std::string>> cursor = stores_.robot->Cursor(options_.archive);
  if (!cursor.ok()) return cursor.status();
  absl::StatusOr<robot::ArchiveRead> read =
      robot::ReadNewMails(options_.archive, *cursor,
                          {.mails = options_.mails_per_pass,
                           .mail_bytes = options_.max_mail_bytes,
                           .bytes = options_.max_pass_bytes});
  if (!read.ok()) return read.status();
  if (read->cursor == *cursor) return out;
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
    if (robot::IsReplyMessageId(mail->message_id)) out.own.push_back(mail->message_id);
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
      out.touched.emplace_back(kept.back().thread_root, tag->version);
    }
  }
  pass.kept = static_cast<int>(kept.size()) - pass.skipped;
  if (absl::Status s = stores_.robot->KeepMails(options_.archive, kept, read->cursor); !s.ok()) {
    return s;
  }
  return out;
}

absl::Status RobotIntake::Decide(const std::string& root, int version, RobotPass& pass) {
  absl::StatusOr<std::vector<robot::Series>> all = Assemble(*stores_.robot, root, version);
  if (!all.ok()) return all.status();
  for (const robot::Series& series : *all) {
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
    for (const auto& [index, mail] : series.patches) record.patch_ids.push_back(mail.message_id);
    robot::Choice choice = robot::Choose(series, options_.rules);
    std::string mbox = series.Mbox();
    if (choice.chosen && mbox.size() > options_.max_series_bytes) {
      choice = {false, absl::StrCat("too large a diff: ", mbox.size(), " bytes of mbox, over ",
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
    // What its kernels are built from, assembled once (a crash before this line: the rooms
    // after assemble it again from the kept mails).
    if (choice.chosen) {
      if (absl::Status s = stores_.robot->PutSeriesMbox(record.id, mbox); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace faultline::controller
