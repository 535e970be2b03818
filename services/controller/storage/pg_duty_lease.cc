// The background duties' lease in PostgreSQL: one row, taken when free or lapsed, renewed by
// its holder. Times are the database's, so the controllers' clocks need not agree.
#include <pqxx/pqxx>

#include "services/controller/storage/pg_pool.h"
#include "services/controller/storage/pg_store.h"

namespace faultline::controller {

absl::StatusOr<bool> PgDutyLeaseStore::HoldDutyLease(const std::string& holder,
                                                     std::chrono::seconds ttl) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& held) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      INSERT INTO duty_leases AS l (name, holder, expires_at, acquired_at)
      VALUES ('duties', $1, now() + make_interval(secs => $2), now())
      ON CONFLICT (name) DO UPDATE
        SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
            acquired_at = CASE WHEN l.holder = EXCLUDED.holder THEN l.acquired_at ELSE now() END
        WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
      RETURNING holder)sql",
                              holder, static_cast<int>(ttl.count()));
    w.commit();
    held = !rows.empty();
    return absl::OkStatus();
  });
}

absl::Status PgDutyLeaseStore::ReleaseDutyLease(const std::string& holder) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("DELETE FROM duty_leases WHERE name = 'duties' AND holder = $1", holder);
    w.commit();
    return absl::OkStatus();
  });
}

}  // namespace faultline::controller
