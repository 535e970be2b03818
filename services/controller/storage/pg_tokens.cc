#include "services/controller/storage/pg_store.h"

#include "absl/strings/str_cat.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {

absl::Status PgTokenStore::CreateToken(const std::string& name, TokenRole role,
                                       const std::string& board, const std::string& token_sha256) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      INSERT INTO api_tokens (name, role, board, token_sha256)
      VALUES ($1, $2, nullif($3, ''), $4)
      ON CONFLICT (name) DO NOTHING
      RETURNING id)sql",
                              name, std::string(ToString(role)), board, token_sha256);
    if (rows.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("a token named '", name, "' exists"));
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<TokenRecord>> PgTokenStore::FindToken(
    const std::string& token_sha256) {
  return pool_->Query<std::optional<TokenRecord>>(
      [&](pqxx::connection& c, std::optional<TokenRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(R"sql(
      SELECT name, role, coalesce(board, ''), (extract(epoch FROM created_at) * 1000)::bigint
        FROM api_tokens WHERE token_sha256 = $1 AND revoked_at IS NULL)sql",
                                  token_sha256);
        if (rows.empty()) return absl::OkStatus();
        TokenRecord r;
        r.name = rows[0][0].as<std::string>();
        auto role = ParseTokenRole(rows[0][1].as<std::string>());
        if (!role) return absl::OkStatus();  // a role this controller does not know grants nothing
        r.role = *role;
        r.board = rows[0][2].as<std::string>();
        r.created_at_ms = rows[0][3].as<int64_t>();
        out = std::move(r);
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgTokenStore::RevokeToken(const std::string& name) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& revoked) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params(
        "UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL", name);
    w.commit();
    revoked = r.affected_rows() > 0;
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<TokenRecord>> PgTokenStore::ListTokens() {
  return pool_->Query<std::vector<TokenRecord>>(
      [&](pqxx::connection& c, std::vector<TokenRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec(R"sql(
      SELECT name, role, coalesce(board, ''), (extract(epoch FROM created_at) * 1000)::bigint,
             revoked_at IS NOT NULL
        FROM api_tokens ORDER BY name)sql");
        for (const auto& row : rows) {
          TokenRecord r;
          r.name = row[0].as<std::string>();
          r.role = pg::ParseEnumOr(ParseTokenRole(row[1].as<std::string>()), TokenRole::kUser);
          r.board = row[2].as<std::string>();
          r.created_at_ms = row[3].as<int64_t>();
          r.revoked = row[4].as<bool>();
          out.push_back(std::move(r));
        }
        return absl::OkStatus();
      });
}

}  // namespace faultline::controller
