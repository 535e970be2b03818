#include "services/controller/storage/pg_store.h"

#include "absl/strings/str_cat.h"
#include "services/controller/storage/migrations.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

// Arbitrary but fixed: serialises migrations across controller replicas.
constexpr int64_t kMigrationLockKey = 0x66617574'6c696e65;  // "faultline"

}  // namespace

PgStore::PgStore(StoreOptions options)
    : options_(std::move(options)),
      pool_(std::make_unique<pg::Pool>(options_.database_url, options_.pool_size)),
      jobs_(pool_.get(), options_),
      work_(pool_.get(), options_),
      boards_(pool_.get(), options_),
      schedules_(pool_.get()),
      history_(pool_.get(), options_.database_url),
      tokens_(pool_.get()),
      duty_lease_(pool_.get()),
      builds_(pool_.get(), options_),
      bisections_(pool_.get()),
      robot_(pool_.get()) {}

PgStore::~PgStore() = default;

absl::Status PgStore::Ping(std::chrono::milliseconds timeout) {
  return pg::PingWithDeadline(options_.database_url, timeout);
}

absl::Status PgStore::Migrate() {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLockKey);
    w.exec(R"sql(
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        checksum   text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()))sql");
    std::map<int, std::string> applied;
    for (const auto& row : w.exec("SELECT version, checksum FROM schema_migrations")) {
      applied[row[0].as<int>()] = row[1].as<std::string>();
    }
    for (const auto& m : Migrations()) {
      std::string checksum = w.exec_params1("SELECT md5($1)", m.sql)[0].as<std::string>();
      auto it = applied.find(m.version);
      if (it != applied.end()) {
        if (it->second != checksum) {
          return absl::FailedPreconditionError(absl::StrCat(
              "migration ", m.version, " (", m.name, ") was applied with checksum ", it->second,
              " but the code has ", checksum, ": applied migrations must never change"));
        }
        continue;
      }
      w.exec(m.sql);
      w.exec_params("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    m.version, m.name, checksum);
    }
    int latest = Migrations().empty() ? 0 : Migrations().back().version;
    for (const auto& [version, checksum] : applied) {
      if (version > latest) {
        return absl::FailedPreconditionError(absl::StrCat(
            "database schema version ", version, " is newer than this controller (", latest, ")"));
      }
    }
    w.commit();
    return absl::OkStatus();
  });
}

}  // namespace faultline::controller
