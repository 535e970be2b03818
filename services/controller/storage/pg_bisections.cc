#include "absl/strings/str_cat.h"
#include "services/controller/storage/pg_pool.h"
#include "services/controller/storage/pg_store.h"

namespace faultline::controller {
namespace {

constexpr const char* kColumns = R"sql(
  id, state, doc::text, coalesce(current_job, 0),
  (extract(epoch FROM created_at) * 1000)::bigint, (extract(epoch FROM updated_at) * 1000)::bigint
)sql";

BisectionRecord FromRow(const pqxx::row& r) {
  BisectionRecord b;
  b.id = r[0].as<int64_t>();
  b.state = pg::ParseEnumOr(ParseBisectionState(r[1].as<std::string>()), BisectionState::kFailed);
  b.doc_json = r[2].as<std::string>();
  b.current_job = r[3].as<int64_t>();
  b.created_ms = r[4].as<int64_t>();
  b.updated_ms = r[5].as<int64_t>();
  return b;
}

}  // namespace

absl::StatusOr<BisectionStore::Created> PgBisectionStore::CreateBisection(
    const std::string& request_id, const std::string& doc_json) {
  return pool_->Query<Created>([&](pqxx::connection& c, Created& out) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(absl::StrCat(R"sql(
      INSERT INTO bisections (request_id, doc) VALUES (NULLIF($1, ''), $2::jsonb)
      ON CONFLICT (request_id) DO NOTHING
      RETURNING )sql",
                                           kColumns),
                              request_id, doc_json);
    if (rows.empty()) {
      rows = w.exec_params(
          absl::StrCat("SELECT ", kColumns, " FROM bisections WHERE request_id = $1"), request_id);
      if (rows.empty()) return absl::InternalError("bisection request id vanished");
      out = {FromRow(rows[0]), false};
    } else {
      out = {FromRow(rows[0]), true};
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<BisectionRecord> PgBisectionStore::GetBisection(int64_t id) {
  return pool_->Query<BisectionRecord>(
      [&](pqxx::connection& c, BisectionRecord& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows =
            t.exec_params(absl::StrCat("SELECT ", kColumns, " FROM bisections WHERE id = $1"), id);
        if (rows.empty()) return absl::NotFoundError(absl::StrCat("bisection ", id, " not found"));
        out = FromRow(rows[0]);
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<BisectionRecord>> PgBisectionStore::ListBisections(int limit,
                                                                              bool running_only) {
  return pool_->Query<std::vector<BisectionRecord>>(
      [&](pqxx::connection& c, std::vector<BisectionRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(absl::StrCat("SELECT ", kColumns, " FROM bisections",
                                               running_only ? " WHERE state = 'running'" : "",
                                               " ORDER BY id DESC LIMIT $1"),
                                  limit);
        for (const auto& r : rows) out.push_back(FromRow(r));
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgBisectionStore::UpdateBisection(int64_t id, BisectionState state,
                                                       const std::string& doc_json,
                                                       int64_t current_job) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& out) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      UPDATE bisections SET state = $2, doc = $3::jsonb, current_job = NULLIF($4, 0),
             updated_at = now()
       WHERE id = $1 AND state = 'running'
      RETURNING id)sql",
                              id, std::string(ToString(state)), doc_json, current_job);
    out = !rows.empty();
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<BisectionRecord> PgBisectionStore::CancelBisection(int64_t id) {
  return pool_->Query<BisectionRecord>(
      [&](pqxx::connection& c, BisectionRecord& out) -> absl::Status {
        pqxx::work w(c);
        w.exec_params(
            "UPDATE bisections SET state = 'cancelled', updated_at = now() "
            "WHERE id = $1 AND state = 'running'",
            id);
        auto rows =
            w.exec_params(absl::StrCat("SELECT ", kColumns, " FROM bisections WHERE id = $1"), id);
        if (rows.empty()) return absl::NotFoundError(absl::StrCat("bisection ", id, " not found"));
        out = FromRow(rows[0]);
        w.commit();
        return absl::OkStatus();
      });
}

}  // namespace faultline::controller
