#include "services/controller/storage/pg_store.h"

#include "absl/strings/str_cat.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

constexpr const char* kScheduleColumns = R"sql(
  id, name, cron, spec::text, (extract(epoch FROM next_run) * 1000)::bigint,
  coalesce((extract(epoch FROM last_run) * 1000)::bigint, 0), coalesce(last_job_id, 0), last_error
)sql";

ScheduleRecord ScheduleFromRow(const pqxx::row& r) {
  ScheduleRecord s;
  s.id = r[0].as<int64_t>();
  s.name = r[1].as<std::string>();
  s.cron = r[2].as<std::string>();
  s.spec_json = r[3].as<std::string>();
  s.next_run_ms = r[4].as<int64_t>();
  s.last_run_ms = r[5].as<int64_t>();
  s.last_job_id = r[6].as<int64_t>();
  s.last_error = r[7].as<std::string>();
  return s;
}

}  // namespace

absl::StatusOr<ScheduleRecord> PgScheduleStore::CreateSchedule(const std::string& name,
                                                               const std::string& cron,
                                                               const std::string& spec_json,
                                                               int64_t next_run_ms) {
  return pool_->Query<ScheduleRecord>(
      [&](pqxx::connection& c, ScheduleRecord& out) -> absl::Status {
        pqxx::work w(c);
        auto rows = w.exec_params(absl::StrCat(R"sql(
      INSERT INTO schedules (name, cron, spec, next_run)
      VALUES ($1, $2, $3::jsonb, to_timestamp($4 / 1000.0))
      ON CONFLICT (name) DO NOTHING
      RETURNING )sql",
                                               kScheduleColumns),
                                  name, cron, spec_json, next_run_ms);
        if (rows.empty()) {
          return absl::AlreadyExistsError(absl::StrCat("a schedule named '", name, "' exists"));
        }
        out = ScheduleFromRow(rows[0]);
        w.commit();
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<ScheduleRecord>> PgScheduleStore::ListSchedules() {
  return pool_->Query<std::vector<ScheduleRecord>>(
      [&](pqxx::connection& c, std::vector<ScheduleRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        for (const auto& r :
             t.exec(absl::StrCat("SELECT ", kScheduleColumns, " FROM schedules ORDER BY id"))) {
          out.push_back(ScheduleFromRow(r));
        }
        return absl::OkStatus();
      });
}

absl::Status PgScheduleStore::DeleteSchedule(int64_t id) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params("DELETE FROM schedules WHERE id = $1", id);
    w.commit();
    if (r.affected_rows() == 0)
      return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
    return absl::OkStatus();
  });
}

absl::Status PgScheduleStore::TagJobWithSchedule(int64_t job_id, int64_t schedule_id) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("UPDATE jobs SET schedule_id = $2 WHERE id = $1", job_id, schedule_id);
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PgScheduleStore::FireDueSchedules(
    int64_t now_ms, const Fire& fire,
    const std::function<int64_t(const ScheduleRecord&)>& next_run_ms) {
  return pool_->Query<int>([&](pqxx::connection& c, int& fired) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(absl::StrCat("SELECT ", kScheduleColumns, R"sql(
        FROM schedules WHERE next_run <= to_timestamp($1 / 1000.0) ORDER BY next_run
         FOR NO KEY UPDATE SKIP LOCKED)sql"),
                              now_ms);  // jobs reference schedules: allow KEY SHARE
    for (const auto& row : rows) {
      ScheduleRecord sched = ScheduleFromRow(row);
      // The job is submitted on another connection with a request id naming the slot, so a
      // crash between submit and the update below cannot submit the slot twice.
      auto job = fire(sched);
      int64_t next = next_run_ms(sched);
      if (job.ok()) {
        ++fired;
        w.exec_params(R"sql(
          UPDATE schedules SET last_run = to_timestamp($4 / 1000.0), last_job_id = $2, last_error = '',
                 next_run = to_timestamp($3 / 1000.0)
           WHERE id = $1)sql",
                      sched.id, *job, next, now_ms);
      } else {
        w.exec_params(R"sql(
          UPDATE schedules SET last_run = to_timestamp($4 / 1000.0), last_error = $2,
                 next_run = to_timestamp($3 / 1000.0)
           WHERE id = $1)sql",
                      sched.id, std::string(job.status().message()), next, now_ms);
      }
    }
    w.commit();
    return absl::OkStatus();
  });
}

}  // namespace faultline::controller
