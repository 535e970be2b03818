#include "services/controller/storage/pg_store.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

using nlohmann::json;
using pg::StringMap;

constexpr const char* kJobColumns = R"sql(
  j.id, j.name, j.benchmark, j.spec::text, j.matrix_keys::text, j.state,
  (extract(epoch FROM j.created_at) * 1000)::bigint,
  coalesce((extract(epoch FROM j.finished_at) * 1000)::bigint, 0),
  c.total, c.queued, c.assigned, c.running, c.succeeded, c.failed, c.cancelled,
  j.baseline, j.alpha, j.min_effect, j.shuffle_seed
)sql";

constexpr const char* kJobCounts = R"sql(
  LEFT JOIN LATERAL (
    SELECT count(*)::int AS total,
           count(*) FILTER (WHERE state = 'queued')::int AS queued,
           count(*) FILTER (WHERE state = 'assigned')::int AS assigned,
           count(*) FILTER (WHERE state = 'running')::int AS running,
           count(*) FILTER (WHERE state = 'succeeded')::int AS succeeded,
           count(*) FILTER (WHERE state = 'failed')::int AS failed,
           count(*) FILTER (WHERE state = 'cancelled')::int AS cancelled
      FROM runs r WHERE r.job_id = j.id) c ON true
)sql";

JobRecord JobFromRow(const pqxx::row& r) {
  JobRecord job;
  job.id = r[0].as<int64_t>();
  job.name = r[1].as<std::string>();
  job.benchmark = r[2].as<std::string>();
  job.spec_json = r[3].as<std::string>();
  const json keys = json::parse(r[4].as<std::string>());
  for (const auto& k : keys) job.matrix_keys.push_back(k);
  job.state = pg::ParseEnumOr(ParseJobState(r[5].as<std::string>()), JobState::kFailed);
  job.created_at_ms = r[6].as<int64_t>();
  job.finished_at_ms = r[7].as<int64_t>();
  job.counts.total = r[8].as<uint32_t>();
  job.counts.queued = r[9].as<uint32_t>();
  job.counts.assigned = r[10].as<uint32_t>();
  job.counts.running = r[11].as<uint32_t>();
  job.counts.succeeded = r[12].as<uint32_t>();
  job.counts.failed = r[13].as<uint32_t>();
  job.counts.cancelled = r[14].as<uint32_t>();
  job.baseline = r[15].as<std::string>();
  job.alpha = r[16].as<double>();
  job.min_effect = r[17].as<double>();
  job.shuffle_seed = static_cast<uint64_t>(r[18].as<int64_t>());
  return job;
}

}  // namespace

absl::StatusOr<JobStore::Created> PgJobStore::CreateJob(const ValidatedJob& job,
                                                        const std::string& name,
                                                        const std::string& spec_json,
                                                        const std::string& request_id) {
  int64_t job_id = 0;
  bool created = true;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    std::string digest = w.exec_params1("SELECT md5($1)", spec_json)[0].as<std::string>();
    if (!request_id.empty()) {
      // Serialise submissions of one request id; the unique index is the last word.
      w.exec_params("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", request_id);
      auto prior =
          w.exec_params("SELECT id, spec_digest FROM jobs WHERE request_id = $1", request_id);
      if (!prior.empty()) {
        if (prior[0][1].as<std::string>() != digest) {
          return absl::AlreadyExistsError(
              absl::StrCat("request_id '", request_id, "' was used for job ",
                           prior[0][0].as<int64_t>(), " with another spec"));
        }
        job_id = prior[0][0].as<int64_t>();
        created = false;
        return absl::OkStatus();
      }
    }
    json matrix_keys = json::array();
    for (const auto& [k, v] : job.matrix) matrix_keys.push_back(k);
    auto opt = [](const std::optional<uint64_t>& v) -> std::string {
      return v ? std::to_string(*v) : std::string();
    };
    job_id =
        w.exec_params1(
             R"sql(
      INSERT INTO jobs (name, benchmark, spec, matrix_keys, duration_seconds, warmup_ms,
                        memory_max, memory_high, swap_max, baseline, block_size, shuffle_seed,
                        alpha, min_effect, request_id, spec_digest, max_repetitions,
                        target_ci_half_width, run_options, events, mmap_lock_waits,
                        profile_hz, profile_pmu)
      VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, NULLIF($8, '')::bigint,
              NULLIF($9, '')::bigint, $10, $11, $12, $13, $14, NULLIF($15, ''), $16, $17, $18,
              $19::jsonb,
              -- the older columns, for a controller from before run_options (a rollback)
              coalesce($19::jsonb->'events', '[]'::jsonb),
              coalesce(($19::jsonb->>'mmap_lock_waits')::boolean, false),
              coalesce(($19::jsonb#>>'{profile,frequency_hz}')::integer, 0),
              coalesce(($19::jsonb#>>'{profile,pmu}')::boolean, false))
      RETURNING id)sql",
             name, job.benchmark, spec_json, matrix_keys.dump(),
             static_cast<int64_t>(job.duration.count()), static_cast<int64_t>(job.warmup.count()),
             static_cast<int64_t>(job.memcg.memory_max), opt(job.memcg.memory_high),
             opt(job.memcg.swap_max), job.baseline, static_cast<int64_t>(job.block_size),
             static_cast<int64_t>(job.shuffle_seed), job.alpha, job.min_effect, request_id, digest,
             static_cast<int64_t>(job.max_repetitions), job.target_ci_half_width,
             job.run_options)[0]
            .as<int64_t>();
    std::string arches = json(job.arches).dump();
    std::string boards = json(job.boards).dump();
    auto runs =
        pg::CopyInto(w, "runs",
                     std::vector<std::string>{"job_id", "cell_index", "cell", "params", "kernel",
                                              "repetition", "arches", "boards", "sequence"});
    for (const auto& run : job.runs) {
      json cell = json::object();
      for (const auto& [k, v] : run.cell) cell[k] = v;
      json params(run.params);
      *runs << std::make_tuple(
          job_id, run.cell_index, cell.dump(), params.dump(), run.kernel, run.repetition, arches,
          run.board.empty() ? boards : json::array({run.board}).dump(), run.sequence);
    }
    runs->complete();
    // The kernels it brings: one build per (label, arch), shared with any job that asked for
    // the same kernel before (the label is unique to the source).
    for (const BuildRequest& b : job.builds) {
      w.exec_params(R"sql(
        WITH build AS (
          INSERT INTO builds (label, arch, source) VALUES ($2, $3, $4::jsonb)
          ON CONFLICT (label, arch) DO UPDATE SET label = EXCLUDED.label
          RETURNING id)
        INSERT INTO job_builds (job_id, build_id) SELECT $1, id FROM build
        ON CONFLICT DO NOTHING)sql",
                    job_id, b.label, b.arch, b.source_json);
    }
    // A build that failed earlier is tried again for a new job.
    if (!job.builds.empty()) {
      w.exec_params(R"sql(
        UPDATE builds SET state = 'queued', error = NULL, attempts = 0, finished_at = NULL
         WHERE state = 'failed' AND id IN (SELECT build_id FROM job_builds WHERE job_id = $1))sql",
                    job_id);
    }
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return Created{job_id, created};
}

absl::StatusOr<JobRecord> PgJobStore::GetJob(int64_t job_id) {
  return pool_->Query<JobRecord>([&](pqxx::connection& c, JobRecord& job) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(
        absl::StrCat("SELECT ", kJobColumns, " FROM jobs j ", kJobCounts, " WHERE j.id = $1"),
        job_id);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
    job = JobFromRow(rows[0]);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<JobRecord>> PgJobStore::ListJobs(int limit) {
  return pool_->Query<std::vector<JobRecord>>(
      [&](pqxx::connection& c, std::vector<JobRecord>& jobs) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(absl::StrCat("SELECT ", kJobColumns, " FROM jobs j ", kJobCounts,
                                               " ORDER BY j.id DESC LIMIT $1"),
                                  limit);
        for (const auto& r : rows) jobs.push_back(JobFromRow(r));
        return absl::OkStatus();
      });
}

absl::StatusOr<std::map<int64_t, std::vector<double>>> PgJobStore::RunSamples(int64_t job_id) {
  return pool_->Query<std::map<int64_t, std::vector<double>>>(
      [&](pqxx::connection& c, std::map<int64_t, std::vector<double>>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        for (const auto& r : t.exec_params(R"sql(
      SELECT s.run_id, s.rounds::text FROM run_samples s JOIN runs r ON r.id = s.run_id
       WHERE r.job_id = $1)sql",
                                           job_id)) {
          std::vector<double>& v = out[r[0].as<int64_t>()];
          for (const auto& item : pg::ArrayItems(r[1].as<std::string>())) {
            v.push_back(std::stod(item));
          }
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<RunRecord>> PgJobStore::ListRuns(int64_t job_id) {
  return pool_->Query<std::vector<RunRecord>>(
      [&](pqxx::connection& c, std::vector<RunRecord>& runs) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(R"sql(
      SELECT r.id, r.job_id, r.cell_index, r.cell::text, r.kernel, r.repetition, r.state,
             coalesce(r.board, ''), coalesce(r.failure_reason, ''), r.attempt,
             res.run_id IS NOT NULL, coalesce(res.throughput, 0),
             coalesce(res.duration_seconds, 0), coalesce(res.rounds, 0),
             coalesce(res.environment::text, '{}'), coalesce(res.too_coarse, false),
             coalesce(res.pages_per_second, 0), coalesce(res.counters::text, '{}'),
             coalesce((extract(epoch FROM res.created_at) * 1000)::bigint, 0),
             coalesce(res.folded_stacks, ''), coalesce(r.failed_build, 0)
        FROM runs r LEFT JOIN results res ON res.run_id = r.id
       WHERE r.job_id = $1
       ORDER BY r.cell_index, r.kernel, r.repetition)sql",
                                  job_id);
        for (const auto& r : rows) {
          RunRecord run;
          run.id = r[0].as<int64_t>();
          run.job_id = r[1].as<int64_t>();
          run.cell_index = r[2].as<int>();
          run.cell = StringMap(r[3].as<std::string>());
          run.kernel = r[4].as<std::string>();
          run.repetition = r[5].as<int>();
          run.state = pg::ParseEnumOr(ParseRunState(r[6].as<std::string>()), RunState::kFailed);
          run.board = r[7].as<std::string>();
          run.failure_reason = r[8].as<std::string>();
          run.attempt = r[9].as<int>();
          run.has_result = r[10].as<bool>();
          run.throughput = r[11].as<double>();
          run.duration_seconds = r[12].as<double>();
          run.rounds = r[13].as<uint64_t>();
          run.environment_json = r[14].as<std::string>();
          run.too_coarse = r[15].as<bool>();
          run.pages_per_second = r[16].as<double>();
          run.counters_json = r[17].as<std::string>();
          run.finished_ms = r[18].as<int64_t>();
          run.folded_stacks = r[19].as<std::string>();
          run.failed_build = r[20].as<int64_t>();
          runs.push_back(std::move(run));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<JobRecord> PgJobStore::CancelJob(int64_t job_id) {
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    const std::string state = pg::LockJob(w, job_id);
    if (state.empty()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
    if (IsFinal(pg::ParseEnumOr(ParseJobState(state), JobState::kFailed))) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " is already ", state, "; nothing to cancel"));
    }
    // Running attempts learn of it on their next heartbeat; their results are refused.
    w.exec_params(R"sql(
      UPDATE runs SET state = 'cancelled', finished_at = now(), lease_expires_at = NULL
       WHERE job_id = $1 AND state IN ('queued', 'assigned', 'running'))sql",
                  job_id);
    w.exec_params("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1", job_id);
    // Its builds that no other open job needs stop: not handed out, and a builder at work on
    // one finds its lease gone (its result is refused). A later job asking for the same
    // kernel queues it again.
    w.exec_params(R"sql(
      UPDATE builds b SET state = 'failed', finished_at = now(), lease_expires = NULL,
             error = 'cancelled: job ' || $1 || ' was cancelled and no other job needs it'
       WHERE b.state IN ('queued', 'building')
         AND b.id IN (SELECT build_id FROM job_builds WHERE job_id = $1)
         AND NOT EXISTS (SELECT 1 FROM job_builds jb JOIN jobs j ON j.id = jb.job_id
                          WHERE jb.build_id = b.id AND jb.job_id <> $1
                            AND j.state IN ('queued', 'running')))sql",
                  job_id);
    pg::KeepJobSeries(w, job_id);
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return GetJob(job_id);
}

}  // namespace faultline::controller
