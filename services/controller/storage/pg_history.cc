#include "services/controller/storage/pg_store.h"

#include "absl/strings/str_cat.h"
#include "services/controller/storage/migrations.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

using pg::StringMap;

// One row per (job, series): the job's median throughput in that series (a series is
// study, benchmark, cell, arch, board, kernel) and its newest result. Callers add the
// WHERE/GROUP BY tail: "GROUP BY 1, 2, 3, 4, 5, 6, 7)".
constexpr const char* kPerJobMedians = R"sql(
      WITH per_job AS (
        SELECT j.id AS job_id, coalesce(nullif(j.name, ''), j.benchmark) AS study, j.benchmark,
               r.cell AS cell, coalesce(b.arch, '') AS arch, r.board, r.kernel,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY res.throughput) AS median,
               max(res.created_at) AS last_success
          FROM results res JOIN runs r ON r.id = res.run_id JOIN jobs j ON j.id = r.job_id
          LEFT JOIN boards b ON b.name = r.board)sql";

constexpr const char* kChangePointColumns = R"sql(
  id, study, benchmark, config, arch, board, kernel, job_id, mean_before, mean_after,
  relative_change, p_value, state, (extract(epoch FROM detected_at) * 1000)::bigint
)sql";

ChangePointRecord ChangePointFromRow(const pqxx::row& r) {
  ChangePointRecord c;
  c.id = r[0].as<int64_t>();
  c.study = r[1].as<std::string>();
  c.benchmark = r[2].as<std::string>();
  c.config = r[3].as<std::string>();
  c.arch = r[4].as<std::string>();
  c.board = r[5].as<std::string>();
  c.kernel = r[6].as<std::string>();
  c.job_id = r[7].as<int64_t>();
  c.mean_before = r[8].as<double>();
  c.mean_after = r[9].as<double>();
  c.relative_change = r[10].as<double>();
  c.p_value = r[11].as<double>();
  c.state =
      pg::ParseEnumOr(ParseChangePointState(r[12].as<std::string>()), ChangePointState::kOpen);
  c.detected_at_ms = r[13].as<int64_t>();
  return c;
}

}  // namespace

absl::StatusOr<std::vector<SeriesHistory>> PgHistoryStore::SeriesHistories(int min_points) {
  return pool_->Query<std::vector<SeriesHistory>>(
      [&](pqxx::connection& c, std::vector<SeriesHistory>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(std::string(kPerJobMedians) + R"sql(
         WHERE j.state IN ('succeeded', 'failed')
         GROUP BY 1, 2, 3, 4, 5, 6, 7)
      SELECT study, benchmark, cell::text, arch, board, kernel,
             array_agg(job_id ORDER BY job_id)::text, array_agg(median ORDER BY job_id)::text
        FROM per_job
       GROUP BY study, benchmark, cell::text, arch, board, kernel
      HAVING count(*) >= $1)sql",
                                  min_points);
        for (const auto& r : rows) {
          SeriesHistory h;
          h.key.study = r[0].as<std::string>();
          h.key.benchmark = r[1].as<std::string>();
          h.key.cell = StringMap(r[2].as<std::string>());
          h.key.arch = r[3].as<std::string>();
          h.key.board = r[4].as<std::string>();
          h.key.kernel = r[5].as<std::string>();
          for (const auto& id : pg::ArrayItems(r[6].as<std::string>()))
            h.job_ids.push_back(std::stoll(id));
          for (const auto& m : pg::ArrayItems(r[7].as<std::string>()))
            h.medians.push_back(std::stod(m));
          out.push_back(std::move(h));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<int> PgHistoryStore::RecordChangePoints(
    const std::vector<ChangePointRecord>& points) {
  return pool_->Query<int>([&](pqxx::connection& c, int& added) -> absl::Status {
    pqxx::work w(c);
    for (const auto& p : points) {
      auto r = w.exec_params(R"sql(
        INSERT INTO change_points (study, benchmark, config, arch, board, kernel, job_id,
                                   mean_before, mean_after, relative_change, p_value)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
        ON CONFLICT DO NOTHING)sql",
                             p.study, p.benchmark, p.config, p.arch, p.board, p.kernel, p.job_id,
                             p.mean_before, p.mean_after, p.relative_change, p.p_value);
      added += static_cast<int>(r.affected_rows());
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<ChangePointRecord>> PgHistoryStore::ListChangePoints(
    bool include_closed) {
  return pool_->Query<std::vector<ChangePointRecord>>(
      [&](pqxx::connection& c, std::vector<ChangePointRecord>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec(absl::StrCat(
            "SELECT ", kChangePointColumns, " FROM change_points ",
            include_closed ? "" : "WHERE state IN ('open', 'acknowledged') ", "ORDER BY id"));
        for (const auto& r : rows) out.push_back(ChangePointFromRow(r));
        return absl::OkStatus();
      });
}

absl::StatusOr<ChangePointRecord> PgHistoryStore::SetChangePointState(int64_t id,
                                                                      ChangePointState state) {
  return pool_->Query<ChangePointRecord>(
      [&](pqxx::connection& c, ChangePointRecord& out) -> absl::Status {
        pqxx::work w(c);
        auto rows = w.exec_params(
            absl::StrCat(
                "UPDATE change_points SET state = $2, updated_at = now() WHERE id = $1 RETURNING ",
                kChangePointColumns),
            id, std::string(ToString(state)));
        if (rows.empty())
          return absl::NotFoundError(absl::StrCat("change point ", id, " not found"));
        out = ChangePointFromRow(rows[0]);
        w.commit();
        return absl::OkStatus();
      });
}

absl::StatusOr<MetricsSnapshot> PgHistoryStore::Snapshot() {
  return pool_->Query<MetricsSnapshot>(
      [&](pqxx::connection& c, MetricsSnapshot& snap) -> absl::Status {
        pqxx::read_transaction t(c);
        auto series = t.exec(std::string(kPerJobMedians) + R"sql(
         GROUP BY 1, 2, 3, 4, 5, 6, 7),
      ranked AS (
        SELECT *, max(last_success) OVER (PARTITION BY study, benchmark, cell, arch, board, kernel)
                    AS series_last_success,
                  row_number() OVER (PARTITION BY study, benchmark, cell, arch, board, kernel
                                     ORDER BY job_id DESC) AS rank
          FROM per_job)
      SELECT study, benchmark, cell::text, arch, board, kernel, median,
             (extract(epoch FROM series_last_success) * 1000)::bigint
        FROM ranked WHERE rank = 1
       ORDER BY study, benchmark, cell::text, board, kernel)sql");
        for (const auto& r : series) {
          SeriesPoint p;
          p.study = r[0].as<std::string>();
          p.benchmark = r[1].as<std::string>();
          p.cell = StringMap(r[2].as<std::string>());
          p.arch = r[3].as<std::string>();
          p.board = r[4].as<std::string>();
          p.kernel = r[5].as<std::string>();
          p.median = r[6].as<double>();
          p.last_success_ms = r[7].as<int64_t>();
          snap.series.push_back(std::move(p));
        }
        for (const auto& r : t.exec("SELECT state, count(*) FROM runs GROUP BY state")) {
          snap.runs_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec("SELECT state, count(*) FROM jobs GROUP BY state")) {
          snap.jobs_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec(R"sql(
      SELECT DISTINCT ON (coalesce(nullif(j.name, ''), j.benchmark), j.benchmark) j.id,
             coalesce((extract(epoch FROM j.finished_at) * 1000)::bigint, 0)
        FROM jobs j
       WHERE jsonb_array_length(coalesce(j.spec -> 'kernels', '[]'::jsonb)) > 1
         AND j.state IN ('succeeded', 'failed')  -- partial studies would make verdicts flap
         AND EXISTS (SELECT 1 FROM runs r JOIN results res ON res.run_id = r.id
                      WHERE r.job_id = j.id)
       ORDER BY coalesce(nullif(j.name, ''), j.benchmark), j.benchmark, j.id DESC)sql")) {
          snap.comparison_jobs.push_back({r[0].as<int64_t>(), r[1].as<int64_t>()});
        }
        for (const auto& r : t.exec(absl::StrCat(R"sql(
        SELECT DISTINCT ON (study, benchmark, config, arch, board, kernel) )sql",
                                                 kChangePointColumns, R"sql(
          FROM change_points WHERE state = 'open'
         ORDER BY study, benchmark, config, arch, board, kernel, job_id DESC)sql"))) {
          snap.open_change_points.push_back(ChangePointFromRow(r));
        }
        for (const auto& r : t.exec(R"sql(
        SELECT s.name, s.cron,
               (extract(epoch FROM coalesce((SELECT max(j.finished_at) FROM jobs j
                                              WHERE j.schedule_id = s.id AND j.state = 'succeeded'),
                                            s.created_at)) * 1000)::bigint
          FROM schedules s ORDER BY s.name)sql")) {
          snap.schedules.push_back(
              {r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<int64_t>()});
        }
        for (const auto& r : t.exec("SELECT state, count(*) FROM change_points GROUP BY state")) {
          snap.change_points_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        return absl::OkStatus();
      });
}

absl::Status PgHistoryStore::Ping() {
  return pg::PingWithDeadline(url_, std::chrono::seconds(2));
}

}  // namespace faultline::controller
