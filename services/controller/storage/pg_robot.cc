#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/storage/pg_pool.h"
#include "services/controller/storage/pg_store.h"

namespace faultline::controller {
namespace {

constexpr const char* kSeriesColumns = R"sql(
  id, thread_root, version, title, author, state, reason, previous, base, jobs::text,
  (extract(epoch FROM updated_at) * 1000)::bigint, patch_ids::text
)sql";

SeriesRecord SeriesFromRow(const pqxx::row& r) {
  SeriesRecord s;
  s.id = r[0].as<std::string>();
  s.thread_root = r[1].as<std::string>();
  s.version = r[2].as<int>();
  s.title = r[3].as<std::string>();
  s.from = r[4].as<std::string>();
  s.state = pg::ParseEnumOr(ParseSeriesState(r[5].as<std::string>()), SeriesState::kFailed);
  s.reason = r[6].as<std::string>();
  s.previous = r[7].as<std::string>();
  s.base = r[8].as<std::string>();
  for (const auto& job : nlohmann::json::parse(r[9].as<std::string>())) {
    s.jobs.push_back(job.get<int64_t>());
  }
  s.updated_ms = r[10].as<int64_t>();
  for (const auto& id : nlohmann::json::parse(r[11].as<std::string>())) {
    s.patch_ids.push_back(id.get<std::string>());
  }
  return s;
}

}  // namespace

absl::StatusOr<std::map<int, std::string>> PgRobotStore::Cursor(const std::string& archive) {
  return pool_->Query<std::map<int, std::string>>(
      [&](pqxx::connection& c, std::map<int, std::string>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        for (const auto& r : t.exec_params(
                 "SELECT epoch, last_commit FROM robot_cursors WHERE archive = $1", archive)) {
          out[r[0].as<int>()] = r[1].as<std::string>();
        }
        return absl::OkStatus();
      });
}

absl::Status PgRobotStore::KeepMails(const std::string& archive, const std::vector<KeptMail>& mails,
                                     const std::map<int, std::string>& cursor) {
  return pool_
      ->Query<bool>([&](pqxx::connection& c, bool&) -> absl::Status {
        pqxx::work w(c);
        for (const KeptMail& m : mails) {
          if (!m.skip_reason.empty()) {
            w.exec_params(R"sql(
        INSERT INTO robot_skipped_mails (archive, message_id, reason, raw)
        VALUES ($1, $2, $3, decode($4, 'hex')) ON CONFLICT DO NOTHING)sql",
                          archive, m.message_id, m.skip_reason, absl::BytesToHexString(m.raw));
            continue;
          }
          // A mail the archive holds twice (a resend with the same id) is kept once.
          w.exec_params(R"sql(
        INSERT INTO robot_mails (message_id, thread_root, version, raw)
        VALUES ($1, $2, $3, decode($4, 'hex'))
        ON CONFLICT (message_id) DO NOTHING)sql",
                        m.message_id, m.thread_root, m.version, absl::BytesToHexString(m.raw));
        }
        for (const auto& [epoch, commit] : cursor) {
          w.exec_params(R"sql(
        INSERT INTO robot_cursors (archive, epoch, last_commit) VALUES ($1, $2, $3)
        ON CONFLICT (archive, epoch) DO UPDATE SET last_commit = EXCLUDED.last_commit)sql",
                        archive, epoch, commit);
        }
        w.commit();
        return absl::OkStatus();
      })
      .status();
}

absl::StatusOr<std::vector<std::string>> PgRobotStore::ThreadMails(const std::string& thread_root,
                                                                   int version) {
  return pool_->Query<std::vector<std::string>>([&](pqxx::connection& c,
                                                    std::vector<std::string>& out) -> absl::Status {
    pqxx::read_transaction t(c);
    for (const auto& r : t.exec_params(
             "SELECT encode(raw, 'hex') FROM robot_mails WHERE thread_root = $1 AND version = $2 "
             "ORDER BY seq",
             thread_root, version)) {
      // The bytes as they came (bytea: a mail in no charset at all is kept too).
      out.push_back(absl::HexStringToBytes(r[0].as<std::string>()));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<SeriesRecord>> PgRobotStore::GetSeries(const std::string& id) {
  return pool_->Query<std::optional<SeriesRecord>>(
      [&](pqxx::connection& c, std::optional<SeriesRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(
            absl::StrCat("SELECT ", kSeriesColumns, " FROM robot_series WHERE id = $1"), id);
        if (!rows.empty()) out = SeriesFromRow(rows[0]);
        return absl::OkStatus();
      });
}

absl::Status PgRobotStore::PutSeries(const SeriesRecord& s) {
  return pool_
      ->Query<bool>([&](pqxx::connection& c, bool&) -> absl::Status {
        pqxx::work w(c);
        w.exec_params(R"sql(
      INSERT INTO robot_series (id, thread_root, version, title, author, state, reason,
                                previous, base, jobs, patch_ids)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb)
      ON CONFLICT (id) DO UPDATE SET
        thread_root = EXCLUDED.thread_root, version = EXCLUDED.version,
        title = EXCLUDED.title, author = EXCLUDED.author, state = EXCLUDED.state,
        reason = EXCLUDED.reason, previous = EXCLUDED.previous, base = EXCLUDED.base,
        jobs = EXCLUDED.jobs, patch_ids = EXCLUDED.patch_ids, updated_at = now())sql",
                      s.id, s.thread_root, s.version, s.title, s.from,
                      std::string(ToString(s.state)), s.reason, s.previous, s.base,
                      nlohmann::json(s.jobs).dump(), nlohmann::json(s.patch_ids).dump());
        w.commit();
        return absl::OkStatus();
      })
      .status();
}

absl::Status PgRobotStore::PutSeriesMbox(const std::string& id, const std::string& mbox) {
  return pool_
      ->Query<bool>([&](pqxx::connection& c, bool&) -> absl::Status {
        pqxx::work w(c);
        const pqxx::result r =
            w.exec_params("UPDATE robot_series SET mbox = decode($2, 'hex') WHERE id = $1", id,
                          absl::BytesToHexString(mbox));
        if (r.affected_rows() == 0) {
          return absl::NotFoundError(absl::StrCat("series ", id, ": not stored"));
        }
        w.commit();
        return absl::OkStatus();
      })
      .status();
}

absl::StatusOr<std::string> PgRobotStore::SeriesMbox(const std::string& id) {
  return pool_->Query<std::string>([&](pqxx::connection& c, std::string& out) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(
        "SELECT coalesce(encode(mbox, 'hex'), '') FROM robot_series WHERE id = $1", id);
    // The bytes as assembled (bytea: a stranger's series may be in no charset at all).
    if (!rows.empty()) out = absl::HexStringToBytes(rows[0][0].as<std::string>());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<SeriesRecord>> PgRobotStore::ListSeries(std::optional<SeriesState> state,
                                                                   int limit) {
  return pool_->Query<std::vector<SeriesRecord>>(
      [&](pqxx::connection& c, std::vector<SeriesRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        const std::string where = state ? " WHERE state = $2" : " WHERE $2 = $2";
        for (const auto& r :
             t.exec_params(absl::StrCat("SELECT ", kSeriesColumns, " FROM robot_series", where,
                                        " ORDER BY created_at, id LIMIT $1"),
                           limit, state ? std::string(ToString(*state)) : std::string())) {
          out.push_back(SeriesFromRow(r));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgRobotStore::QueueReply(const ReplyRecord& reply) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& created) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      INSERT INTO robot_replies (series_id, kind, message_id, state, recipients, text)
      VALUES ($1, $2, $3, 'queued', $4::jsonb, $5)
      ON CONFLICT DO NOTHING RETURNING 1)sql",
                              reply.series_id, std::string(ToString(reply.kind)), reply.message_id,
                              nlohmann::json(reply.recipients).dump(), reply.text);
    created = !rows.empty();
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<ReplyRecord>> PgRobotStore::ListReplies(ReplyState state, int limit) {
  return pool_->Query<std::vector<ReplyRecord>>(
      [&](pqxx::connection& c, std::vector<ReplyRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        for (const auto& r : t.exec_params(R"sql(
            SELECT series_id, kind, message_id, state, recipients::text, text,
                   coalesce((extract(epoch FROM sent_at) * 1000)::bigint, 0)
              FROM robot_replies WHERE state = $1 ORDER BY created_at, message_id LIMIT $2)sql",
                                           std::string(ToString(state)), limit)) {
          ReplyRecord reply;
          reply.series_id = r[0].as<std::string>();
          reply.kind = pg::ParseEnumOr(ParseReplyKind(r[1].as<std::string>()), ReplyKind::kResults);
          reply.message_id = r[2].as<std::string>();
          reply.state =
              pg::ParseEnumOr(ParseReplyState(r[3].as<std::string>()), ReplyState::kUncertain);
          for (const auto& to : nlohmann::json::parse(r[4].as<std::string>())) {
            reply.recipients.push_back(to.get<std::string>());
          }
          reply.text = r[5].as<std::string>();
          reply.sent_ms = r[6].as<int64_t>();
          out.push_back(std::move(reply));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgRobotStore::MoveReply(const std::string& message_id, ReplyState from,
                                             ReplyState to) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& moved) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      UPDATE robot_replies SET state = $3,
             sent_at = CASE WHEN $3 = 'queued' THEN NULL WHEN $3 = 'sending' THEN now()
                            ELSE coalesce(sent_at, now()) END
       WHERE message_id = $1 AND state = $2 RETURNING 1)sql",
                              message_id, std::string(ToString(from)), std::string(ToString(to)));
    moved = !rows.empty();
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PgRobotStore::RepliesSentSince(int64_t since_ms) {
  return pool_->Query<int>([&](pqxx::connection& c, int& count) -> absl::Status {
    pqxx::read_transaction t(c);
    count = t.exec_params1(R"sql(
      SELECT count(*) FROM robot_replies
       WHERE state IN ('sending', 'sent', 'uncertain')
         AND sent_at >= to_timestamp($1 / 1000.0))sql",
                           since_ms)[0]
                .as<int>();
    return absl::OkStatus();
  });
}

absl::Status PgRobotStore::QueueChecks(const std::vector<CheckRecord>& checks) {
  return pool_
      ->Query<bool>([&](pqxx::connection& c, bool&) -> absl::Status {
        pqxx::work w(c);
        for (const CheckRecord& k : checks) {
          w.exec_params(R"sql(
        INSERT INTO robot_checks (series_id, patch_message_id, kind, state, description, status,
                                  next_ms)
        VALUES ($1, $2, $3, $4, $5, 'queued', $6) ON CONFLICT DO NOTHING)sql",
                        k.series_id, k.patch_message_id, std::string(ToString(k.kind)),
                        std::string(ToString(k.state)), k.description, k.next_ms);
          if (k.kind == CheckKind::kVerdict) {
            w.exec_params(R"sql(
        UPDATE robot_checks SET status = 'superseded'
         WHERE patch_message_id = $1 AND kind = 'pending' AND status = 'queued')sql",
                          k.patch_message_id);
          }
        }
        w.commit();
        return absl::OkStatus();
      })
      .status();
}

absl::StatusOr<std::vector<CheckRecord>> PgRobotStore::DueChecks(int64_t now_ms, int limit) {
  return pool_->Query<std::vector<CheckRecord>>([&](pqxx::connection& c,
                                                    std::vector<CheckRecord>& out) -> absl::Status {
    pqxx::read_transaction t(c);
    for (const auto& r : t.exec_params(R"sql(
            SELECT series_id, patch_message_id, kind, state, description, status, attempts,
                   error, next_ms
              FROM robot_checks WHERE status = 'queued' AND next_ms <= $1
             ORDER BY seq LIMIT $2)sql",
                                       now_ms, limit)) {
      CheckRecord k;
      k.series_id = r[0].as<std::string>();
      k.patch_message_id = r[1].as<std::string>();
      k.kind = pg::ParseEnumOr(ParseCheckKind(r[2].as<std::string>()), CheckKind::kPending);
      k.state = pg::ParseEnumOr(ParseCheckState(r[3].as<std::string>()), CheckState::kFail);
      k.description = r[4].as<std::string>();
      k.status = pg::ParseEnumOr(ParseCheckStatus(r[5].as<std::string>()), CheckStatus::kFailed);
      k.attempts = r[6].as<int>();
      k.error = r[7].as<std::string>();
      k.next_ms = r[8].as<int64_t>();
      out.push_back(std::move(k));
    }
    return absl::OkStatus();
  });
}

absl::Status PgRobotStore::SettleCheck(const CheckRecord& k) {
  return pool_
      ->Query<bool>([&](pqxx::connection& c, bool&) -> absl::Status {
        pqxx::work w(c);
        // Only a queued check moves: one superseded meanwhile stays so.
        w.exec_params(R"sql(
        UPDATE robot_checks SET status = $3, attempts = $4, error = $5, next_ms = $6
         WHERE patch_message_id = $1 AND kind = $2 AND status = 'queued')sql",
                      k.patch_message_id, std::string(ToString(k.kind)),
                      std::string(ToString(k.status)), k.attempts, k.error, k.next_ms);
        w.commit();
        return absl::OkStatus();
      })
      .status();
}

}  // namespace faultline::controller
