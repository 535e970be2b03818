#include "services/controller/storage/pg_store.h"

#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/storage/migrations.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

using pg::StringMap;

constexpr const char* kChangePointColumns = R"sql(
  id, study, benchmark, config, arch, board, kernel, job_id, mean_before, mean_after,
  relative_change, p_value, state, (extract(epoch FROM detected_at) * 1000)::bigint,
  coalesce(previous_job_id, 0)
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
  c.previous_job_id = r[14].as<int64_t>();
  return c;
}

constexpr const char* kSeriesColumns = R"sql(
      SELECT study, benchmark, cell::text, arch, board, kernel, job_id, median,
             (extract(epoch FROM last_success) * 1000)::bigint)sql";

using CellCache = std::map<std::string, std::map<std::string, std::string>>;  // by JSON text

// A row of kSeriesColumns. Series share few distinct cells: each is parsed once.
SeriesPoint SeriesPointFromRow(const pqxx::row& r, CellCache* cells, int64_t* job_id) {
  SeriesPoint p;
  p.study = r[0].as<std::string>();
  p.benchmark = r[1].as<std::string>();
  const std::string cell = r[2].as<std::string>();
  auto parsed = cells->find(cell);
  if (parsed == cells->end()) parsed = cells->emplace(cell, StringMap(cell)).first;
  p.cell = parsed->second;
  p.arch = r[3].as<std::string>();
  p.board = r[4].as<std::string>();
  p.kernel = r[5].as<std::string>();
  *job_id = r[6].as<int64_t>();
  p.median = r[7].as<double>();
  p.last_success_ms = r[8].as<int64_t>();
  return p;
}

// A cell as text with its keys sorted, for comparing cells.
std::string ConfigKey(const std::map<std::string, std::string>& cell) {
  std::string out;
  for (const auto& [k, v] : cell) absl::StrAppend(&out, k, "=", v, "\n");
  return out;
}

// Jobs still running replace a finished job's median where they are newer (a job running
// again after it finished is its live view too); the last success is the newest of both.
void MergeLiveSeries(const pqxx::result& live, std::vector<SeriesPoint>* series,
                     std::vector<int64_t>* jobs) {
  auto key = [](const SeriesPoint& p) {
    return absl::StrCat(p.study, "\n", p.benchmark, "\n", ConfigKey(p.cell), "\n", p.arch, "\n",
                        p.board, "\n", p.kernel);
  };
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < series->size(); ++i) index[key((*series)[i])] = i;
  CellCache cells;
  for (const auto& r : live) {
    int64_t job_id = 0;
    SeriesPoint p = SeriesPointFromRow(r, &cells, &job_id);
    auto [it, fresh] = index.try_emplace(key(p), series->size());
    if (fresh) {
      series->push_back(std::move(p));
      jobs->push_back(job_id);
      continue;
    }
    SeriesPoint& kept = (*series)[it->second];
    kept.last_success_ms = std::max(kept.last_success_ms, p.last_success_ms);
    if (job_id >= (*jobs)[it->second]) {
      (*jobs)[it->second] = job_id;
      kept.median = p.median;
    }
  }
}

// Doubles as JSON: NaN and the infinities (a comparison without data) as strings.
nlohmann::json Number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
}

double NumberFrom(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string text = j.is_string() ? j.get<std::string>() : "NaN";
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

std::string ComparisonsToJson(const std::vector<ComparisonSummary>& comparisons) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : comparisons) {
    nlohmann::json counters = nlohmann::json::array();
    for (const auto& k : c.counters) {
      counters.push_back({{"name", k.name},
                          {"unit", k.unit},
                          {"ratio", Number(k.ratio)},
                          {"ci_low", Number(k.ci_low)},
                          {"ci_high", Number(k.ci_high)}});
    }
    out.push_back({{"cell", c.cell},
                   {"board", c.board},
                   {"baseline", c.baseline},
                   {"candidate", c.candidate},
                   {"ratio", Number(c.ratio)},
                   {"ci_low", Number(c.ci_low)},
                   {"ci_high", Number(c.ci_high)},
                   {"p_value", Number(c.p_value)},
                   {"q_value", Number(c.q_value)},
                   {"verdict", c.verdict},
                   {"n_baseline", c.n_baseline},
                   {"n_candidate", c.n_candidate},
                   {"counters", std::move(counters)}});
  }
  return out.dump();
}

std::vector<ComparisonSummary> ComparisonsFromJson(const std::string& text) {
  std::vector<ComparisonSummary> out;
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (!parsed.is_array()) return out;
  for (const auto& j : parsed) {
    ComparisonSummary c;
    c.cell = j.value("cell", std::map<std::string, std::string>{});
    c.board = j.value("board", "");
    c.baseline = j.value("baseline", "");
    c.candidate = j.value("candidate", "");
    c.ratio = NumberFrom(j.value("ratio", nlohmann::json()));
    c.ci_low = NumberFrom(j.value("ci_low", nlohmann::json()));
    c.ci_high = NumberFrom(j.value("ci_high", nlohmann::json()));
    c.p_value = NumberFrom(j.value("p_value", nlohmann::json()));
    c.q_value = NumberFrom(j.value("q_value", nlohmann::json()));
    c.verdict = j.value("verdict", "");
    c.n_baseline = j.value("n_baseline", int64_t{0});
    c.n_candidate = j.value("n_candidate", int64_t{0});
    for (const auto& k : j.value("counters", nlohmann::json::array())) {
      c.counters.push_back({k.value("name", ""), k.value("unit", ""),
                            NumberFrom(k.value("ratio", nlohmann::json())),
                            NumberFrom(k.value("ci_low", nlohmann::json())),
                            NumberFrom(k.value("ci_high", nlohmann::json()))});
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<SeriesHistory>> PgHistoryStore::SeriesHistories(int min_points) {
  return pool_->Query<std::vector<SeriesHistory>>(
      [&](pqxx::connection& c, std::vector<SeriesHistory>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        // Finished jobs' medians were kept when they finished (pg::KeepJobSeries).
        auto rows = t.exec_params(R"sql(
      SELECT m.study, m.benchmark, m.cell::text, m.arch, m.board, m.kernel,
             array_agg(m.job_id ORDER BY m.job_id)::text,
             array_agg(m.median ORDER BY m.job_id)::text
        FROM job_series_medians m JOIN jobs j ON j.id = m.job_id
       WHERE j.state IN ('succeeded', 'failed')
       GROUP BY m.study, m.benchmark, m.cell, m.arch, m.board, m.kernel
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
                                   mean_before, mean_after, relative_change, p_value,
                                   previous_job_id)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, nullif($12, 0))
        ON CONFLICT DO NOTHING)sql",
                             p.study, p.benchmark, p.config, p.arch, p.board, p.kernel, p.job_id,
                             p.mean_before, p.mean_after, p.relative_change, p.p_value,
                             p.previous_job_id);
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

namespace {

// series_latest's rows, read again only when the generation moved.
void FinishedSeries(pqxx::transaction_base& t, int64_t generation, FinishedSeriesCache* cache,
                    std::vector<SeriesPoint>* series, std::vector<int64_t>* jobs) {
  {
    std::lock_guard lock(cache->mu);
    if (generation == cache->generation) {
      *series = cache->series;
      *jobs = cache->jobs;
      return;
    }
  }
  CellCache cells;
  for (const auto& r : t.exec(absl::StrCat(kSeriesColumns, " FROM series_latest"))) {
    int64_t job_id = 0;
    series->push_back(SeriesPointFromRow(r, &cells, &job_id));
    jobs->push_back(job_id);
  }
  std::lock_guard lock(cache->mu);
  cache->generation = generation;
  cache->series = *series;
  cache->jobs = *jobs;
}

}  // namespace

absl::StatusOr<MetricsSnapshot> PgHistoryStore::Snapshot(int64_t known_series_version) {
  return pool_->Query<MetricsSnapshot>(
      [&](pqxx::connection& c, MetricsSnapshot& snap) -> absl::Status {
        pqxx::read_transaction t(c);
        // Finished jobs: the newest of each series, kept when the job finished (one row per
        // series). Jobs still queued or running: their medians so far, from their results,
        // in place of a finished job's where they are newer. The generation is read first:
        // rows newer than it only cost a re-read on the next scrape.
        const auto generation = t.exec("SELECT n FROM series_generation")[0][0].as<int64_t>();
        // The live jobs' ids first, as a parameter: given a subquery instead, the planner
        // cannot know how few they are, and aggregated every stored result (40 ms with
        // 120,000 results and no job running).
        const auto live_ids = t.exec(R"sql(
        SELECT coalesce(array_agg(id ORDER BY id), '{}')::text FROM jobs
         WHERE state IN ('queued', 'running'))sql")[0][0]
                                  .as<std::string>();
        pqxx::result live;
        if (live_ids != "{}") {
          live = t.exec_params(
              absl::StrCat(kSeriesColumns, " FROM faultline_job_medians($1::bigint[])"), live_ids);
        }
        if (live.empty()) snap.series_version = generation;
        if (!live.empty() || generation != known_series_version) {
          std::vector<int64_t> jobs;  // the job of each series
          FinishedSeries(t, generation, &finished_, &snap.series, &jobs);
          if (!live.empty()) MergeLiveSeries(live, &snap.series, &jobs);
        }
        // Open runs by their partial indexes, the finished runs of live jobs, and the counts
        // a finished job keeps (migration 20): no scan of the whole history.
        for (const auto& r : t.exec(R"sql(
        SELECT state, coalesce(sum(n), 0)::bigint FROM (
          SELECT 'queued' AS state, count(*) AS n FROM runs WHERE state = 'queued'
          UNION ALL
          SELECT state, count(*) FROM runs WHERE state IN ('assigned', 'running') GROUP BY state
          UNION ALL
          SELECT r.state, count(*) FROM jobs j JOIN runs r ON r.job_id = j.id
           WHERE j.state IN ('queued', 'running') AND r.state IN ('succeeded', 'failed', 'cancelled')
           GROUP BY r.state
          UNION ALL
          SELECT unnest(ARRAY['succeeded', 'failed', 'cancelled']),
                 unnest(ARRAY[runs_succeeded, runs_failed, runs_cancelled])
            FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled')) counts
        GROUP BY state)sql")) {
          snap.runs_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec("SELECT state, count(*) FROM jobs GROUP BY state")) {
          snap.jobs_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec(R"sql(
      SELECT DISTINCT ON (c.study, c.benchmark) c.job_id,
             (extract(epoch FROM c.finished_at) * 1000)::bigint
        FROM job_comparisons c JOIN jobs j ON j.id = c.job_id
       WHERE j.state IN ('succeeded', 'failed')  -- partial studies would make verdicts flap
       ORDER BY c.study, c.benchmark, c.job_id DESC)sql")) {
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
        for (const auto& r : t.exec("SELECT state, count(*) FROM robot_series GROUP BY state")) {
          snap.robot_series_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        snap.robot_mails = t.exec1("SELECT count(*) FROM robot_mails")[0].as<int64_t>();
        // The reason's kind: what comes before its first ':' ("too large: 9 MiB" -> "too large").
        for (const auto& r : t.exec(R"sql(
          SELECT split_part(reason, ':', 1), count(*) FROM robot_skipped_mails GROUP BY 1)sql")) {
          snap.robot_skipped_mails_by_reason[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec("SELECT state, count(*) FROM robot_replies GROUP BY state")) {
          snap.robot_replies_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec("SELECT status, count(*) FROM robot_checks GROUP BY status")) {
          snap.robot_checks_by_status[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        // The kernels the robot's jobs brought (one build may serve several series).
        for (const auto& r : t.exec(R"sql(
        SELECT CASE WHEN b.state = 'failed' AND b.error LIKE 'cancelled:%' THEN 'cancelled'
                    ELSE b.state END,
               count(DISTINCT b.id) FROM robot_series s
          CROSS JOIN LATERAL jsonb_array_elements_text(s.jobs) AS j(id)
          JOIN job_builds jb ON jb.job_id = j.id::bigint
          JOIN builds b ON b.id = jb.build_id
         GROUP BY 1)sql")) {
          snap.robot_builds_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
        }
        for (const auto& r : t.exec(R"sql(
        SELECT b.label, b.arch, coalesce(b.outcome->>'release', ''),
               coalesce(b.outcome->>'base_commit', ''), coalesce(b.source->>'ref', ''),
               coalesce(b.outcome->>'config_sha256', ''), coalesce(b.outcome->>'compiler', ''),
               coalesce((SELECT string_agg(s, ' | ') FROM jsonb_array_elements_text(
                           coalesce(b.outcome->'series', '[]')) s), ''),
               coalesce(jsonb_array_length(b.outcome->'series'), 0),
               coalesce(b.source->>'image', ''), coalesce(b.image_sha256, ''),
               (SELECT count(*) FROM bad_boots bb WHERE bb.label = b.label)
          FROM builds b WHERE b.state = 'done' ORDER BY b.id DESC LIMIT 500)sql")) {
          MetricsSnapshot::BuiltKernel k;
          k.label = r[0].as<std::string>();
          k.arch = r[1].as<std::string>();
          k.release = r[2].as<std::string>();
          k.base_commit = r[3].as<std::string>();
          k.ref = r[4].as<std::string>();
          k.config_sha256 = r[5].as<std::string>();
          k.compiler = r[6].as<std::string>();
          k.series = r[7].as<std::string>();
          k.patches = r[8].as<int>();
          k.image_url = r[9].as<std::string>();
          k.image_sha256 = r[10].as<std::string>();
          k.bad_boots = r[11].as<int>();
          snap.built_kernels.push_back(std::move(k));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<JobVersion>> PgHistoryStore::PendingComparisons(int limit) {
  return pool_->Query<std::vector<JobVersion>>(
      [&](pqxx::connection& c, std::vector<JobVersion>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        for (const auto& r : t.exec_params(R"sql(
      SELECT j.id, (extract(epoch FROM j.finished_at) * 1000)::bigint
        FROM jobs j LEFT JOIN job_comparisons c ON c.job_id = j.id
       WHERE j.state IN ('succeeded', 'failed')
         AND jsonb_array_length(coalesce(j.spec -> 'kernels', '[]'::jsonb)) > 1
         AND (c.job_id IS NULL OR c.finished_at IS DISTINCT FROM j.finished_at)
         AND EXISTS (SELECT 1 FROM runs r JOIN results res ON res.run_id = r.id
                      WHERE r.job_id = j.id)
       ORDER BY j.id DESC LIMIT $1)sql",
                                           limit)) {
          out.push_back({r[0].as<int64_t>(), r[1].as<int64_t>()});
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgHistoryStore::StoreComparisons(const JobComparisons& job) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& stored) -> absl::Status {
    pqxx::work w(c);
    // The job's own finished_at, and only while it is the version that was summarized.
    auto r = w.exec_params(R"sql(
      INSERT INTO job_comparisons (job_id, finished_at, study, benchmark, comparisons)
      SELECT j.id, j.finished_at, coalesce(nullif(j.name, ''), j.benchmark), j.benchmark,
             $3::jsonb
        FROM jobs j
       WHERE j.id = $1 AND j.state IN ('succeeded', 'failed')
         AND (extract(epoch FROM j.finished_at) * 1000)::bigint = $2
      ON CONFLICT (job_id) DO UPDATE
         SET finished_at = excluded.finished_at, comparisons = excluded.comparisons)sql",
                           job.job_id, job.finished_ms, ComparisonsToJson(job.comparisons));
    stored = r.affected_rows() == 1;
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<JobComparisons> PgHistoryStore::LoadComparisons(const JobVersion& job) {
  return pool_->Query<JobComparisons>(
      [&](pqxx::connection& c, JobComparisons& out) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(R"sql(
      SELECT study, benchmark, comparisons::text FROM job_comparisons
       WHERE job_id = $1 AND (extract(epoch FROM finished_at) * 1000)::bigint = $2)sql",
                                  job.job_id, job.finished_ms);
        if (rows.empty()) {
          return absl::NotFoundError(absl::StrCat("no comparisons of job ", job.job_id,
                                                  " finished at ", job.finished_ms, " ms"));
        }
        out.job_id = job.job_id;
        out.finished_ms = job.finished_ms;
        out.study = rows[0][0].as<std::string>();
        out.benchmark = rows[0][1].as<std::string>();
        out.comparisons = ComparisonsFromJson(rows[0][2].as<std::string>());
        return absl::OkStatus();
      });
}

absl::Status PgHistoryStore::Ping() {
  return pg::PingWithDeadline(url_, std::chrono::seconds(2));
}

}  // namespace faultline::controller
