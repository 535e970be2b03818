// PgWorkStore's side of results: leases renewed, results stored (in batches, with the
// adaptive jobs' next blocks), expired leases reaped.
#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/core/matching.h"
#include "services/controller/storage/pg_pool.h"
#include "services/controller/storage/pg_store.h"

namespace faultline::controller {
namespace {

// Adaptive repetitions: when the last open run of a job with max_repetitions succeeded,
// the cells core finds still too wide (CellsNeedingMorePairs) get the next block of
// repetitions for every kernel (PlanExtraBlock); each new run copies repetition 1's row.
void ExtendAdaptiveJob(pqxx::work& w, int64_t job_id) {
  auto job = w.exec_params(R"sql(
    SELECT max_repetitions, target_ci_half_width, baseline, block_size, alpha, min_effect,
           shuffle_seed
      FROM jobs WHERE id = $1 AND max_repetitions > 0 AND state <> 'cancelled')sql",
                           job_id);
  if (job.empty()) return;
  const int max_repetitions = job[0][0].as<int>();
  const double target = job[0][1].as<double>();
  const std::string baseline = job[0][2].as<std::string>();
  const int block_size = std::max(1, job[0][3].as<int>());
  stats::CompareOptions options;
  options.alpha = job[0][4].as<double>();
  options.min_effect = job[0][5].as<double>();
  const uint64_t seed = static_cast<uint64_t>(job[0][6].as<int64_t>());
  auto counts = w.exec_params(R"sql(
    SELECT count(*) FILTER (WHERE state IN ('queued', 'assigned', 'running')),
           count(*) FILTER (WHERE state IN ('failed', 'cancelled')),
           max(repetition), max(sequence)
      FROM runs WHERE job_id = $1)sql",
                              job_id);
  if (counts[0][0].as<int64_t>() > 0 || counts[0][1].as<int64_t>() > 0) return;
  const int done_repetitions = counts[0][2].as<int>();
  const int sequence = counts[0][3].as<int>() + 1;
  // Kernels in their planned order (the baseline's block first).
  std::vector<std::string> kernels;
  for (const auto& r : w.exec_params(
           "SELECT kernel FROM runs WHERE job_id = $1 GROUP BY kernel ORDER BY min(sequence)",
           job_id)) {
    kernels.push_back(r[0].as<std::string>());
  }
  std::map<int, std::map<std::string, std::vector<double>>> samples;
  for (const auto& r : w.exec_params(R"sql(
         SELECT r.cell_index, r.kernel,
                CASE WHEN bool_or(res.too_coarse) OVER (PARTITION BY r.cell_index)
                     THEN res.pages_per_second ELSE res.throughput END
           FROM runs r JOIN results res ON res.run_id = r.id
          WHERE r.job_id = $1 AND r.state = 'succeeded')sql",
                                     job_id)) {
    samples[r[0].as<int>()][r[1].as<std::string>()].push_back(r[2].as<double>());
  }
  const std::vector<int> cells =
      CellsNeedingMorePairs(samples, baseline, options, target, max_repetitions);
  for (const RunSlot& run : PlanExtraBlock(cells, kernels, done_repetitions, block_size,
                                           max_repetitions, seed, sequence)) {
    w.exec_params(R"sql(
      INSERT INTO runs (job_id, cell_index, cell, params, kernel, repetition, arches, boards,
                        sequence)
      SELECT job_id, cell_index, cell, params, kernel, $4, arches, boards, $5
        FROM runs WHERE job_id = $1 AND cell_index = $2 AND kernel = $3 AND repetition = 1)sql",
                  job_id, run.cell_index, run.kernel, run.repetition, run.sequence);
  }
}

}  // namespace

absl::StatusOr<bool> PgWorkStore::RenewLease(const std::string& board, int64_t run_id,
                                             const std::string& attempt_id) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& current) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    auto rows = w.exec_params(R"sql(
      UPDATE runs r SET
        state = 'running', started_at = coalesce(r.started_at, now()),
        lease_expires_at = )sql" + pg::LeaseExpirySql(4) +
                                  R"sql(
      FROM jobs j
      WHERE r.id = $1 AND r.attempt_id::text = $2 AND r.board = $3
        AND r.state IN ('assigned', 'running') AND j.id = r.job_id
      RETURNING r.job_id)sql",
                              run_id, attempt_id, board, options_.lease_grace_seconds);
    current = !rows.empty();
    // The job's state needs no recompute: assigned -> running keeps the run open and started
    // (JobStateFromRuns), and skipping it keeps heartbeats off the job's row lock (LockJob),
    // which thousands of boards on one job would otherwise queue on.
    w.commit();
    return absl::OkStatus();
  });
}

std::vector<absl::StatusOr<int64_t>> PgWorkStore::StoreResults(
    const std::vector<ResultUpload>& uploads) {
  auto together = StoreBatch(uploads);
  if (together.ok()) return *std::move(together);
  std::vector<absl::StatusOr<int64_t>> out;
  out.reserve(uploads.size());
  if (uploads.size() == 1 || absl::IsUnavailable(together.status())) {
    out.assign(uploads.size(), together.status());
    return out;
  }
  // One upload's database error (or a deadlock with a claim) must not cost the others
  // theirs: each on its own.
  for (const auto& u : uploads) {
    auto alone = StoreBatch({u});
    out.push_back(alone.ok() ? std::move(alone->front()) : alone.status());
  }
  return out;
}

absl::StatusOr<std::vector<absl::StatusOr<int64_t>>> PgWorkStore::StoreBatch(
    const std::vector<ResultUpload>& uploads) {
  using Answers = std::vector<absl::StatusOr<int64_t>>;
  // A run as this transaction sees it, updated as the batch's uploads are decided.
  struct RunNow {
    std::string state, attempt, board, stored_attempt;
    int64_t job_id = 0;
    int duration = 0;
  };
  return pool_->Query<Answers>([&](pqxx::connection& c, Answers& out) -> absl::Status {
    out.assign(uploads.size(), absl::InternalError("result not handled"));
    // In run id order: the runs are locked in that order, as every transaction that locks
    // several does, and a run's repeated upload comes after its first.
    std::vector<size_t> order(uploads.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return uploads[a].run_id < uploads[b].run_id; });
    std::string ids = "{";
    for (size_t k = 0; k < order.size(); ++k) {
      absl::StrAppend(&ids, k == 0 ? "" : ",", uploads[order[k]].run_id);
    }
    ids += "}";
    pqxx::work w(c);
    std::map<int64_t, RunNow> runs;
    for (const auto& r : w.exec_params(R"sql(
        SELECT r.id, r.state, coalesce(r.attempt_id::text, ''), coalesce(r.board, ''), r.job_id,
               j.duration_seconds, coalesce(res.attempt_id::text, '')
          FROM runs r JOIN jobs j ON j.id = r.job_id
          LEFT JOIN results res ON res.run_id = r.id
         WHERE r.id = ANY ($1::bigint[])
         ORDER BY r.id
           FOR UPDATE OF r)sql",
                                       ids)) {
      runs[r[0].as<int64_t>()] = RunNow{.state = r[1].as<std::string>(),
                                        .attempt = r[2].as<std::string>(),
                                        .board = r[3].as<std::string>(),
                                        .stored_attempt = r[6].as<std::string>(),
                                        .job_id = r[4].as<int64_t>(),
                                        .duration = r[5].as<int>()};
    }
    std::vector<size_t> stored;  // uploads whose result row (and samples) are written
    nlohmann::json finished = nlohmann::json::array();  // {id, state, reason} per run
    std::map<int64_t, bool> jobs;                       // job -> a run of it succeeded here
    for (size_t i : order) {
      const ResultUpload& u = uploads[i];
      auto found = runs.find(u.run_id);
      if (found == runs.end()) {
        out[i] = absl::NotFoundError(absl::StrCat("run ", u.run_id, " not found"));
        continue;
      }
      RunNow& run = found->second;
      out[i] = run.job_id;
      if (run.attempt == u.attempt_id && run.board == u.board &&
          (run.state == "succeeded" || run.state == "failed")) {
        continue;  // a repeated upload of the stored outcome: acknowledge
      }
      if (run.stored_attempt == u.attempt_id) continue;
      if (run.attempt != u.attempt_id || run.board != u.board ||
          (run.state != "assigned" && run.state != "running")) {
        out[i] = absl::FailedPreconditionError(
            absl::StrCat("run ", u.run_id, " attempt ", u.attempt_id, " is not current (run is ",
                         run.state, "); result refused"));
        continue;
      }
      bool ok = u.succeeded;
      std::string reason = u.failure_reason;
      if (ok) {
        // The stored invariant: one sample per second of measured duration.
        if (auto problem = ResultShapeProblem(u.result.samples, run.duration)) {
          ok = false;
          reason = *problem;
        }
      }
      if (ok) {
        stored.push_back(i);
        run.stored_attempt = u.attempt_id;
      }
      run.state = ok ? "succeeded" : "failed";
      finished.push_back({{"id", u.run_id}, {"state", run.state}, {"reason", ok ? "" : reason}});
      jobs[run.job_id] = jobs[run.job_id] || ok;
    }
    if (!stored.empty()) {
      // The results, then every result's samples (one row each, migration 18): two COPYs.
      auto results = pg::CopyInto(
          w, "results",
          std::vector<std::string>{"run_id", "attempt_id", "board", "throughput", "rounds",
                                   "duration_seconds", "warmup_seconds", "counters", "environment",
                                   "pages", "pages_per_second", "too_coarse", "folded_stacks"});
      for (size_t i : stored) {
        const ResultUpload& u = uploads[i];
        const ResultRecord& r = u.result;
        *results << std::make_tuple(
            u.run_id, u.attempt_id, u.board, r.throughput, static_cast<int64_t>(r.rounds),
            r.duration_seconds, r.warmup_seconds, r.counters_json, r.environment_json,
            static_cast<int64_t>(r.pages), r.pages_per_second, r.too_coarse, r.folded_stacks);
      }
      results->complete();
      auto samples =
          pg::CopyInto(w, "run_samples", std::vector<std::string>{"run_id", "rounds", "pages"});
      std::string rounds, pages;
      for (size_t i : stored) {
        const ResultRecord& r = uploads[i].result;
        rounds.assign("{");
        pages.assign("{");
        for (size_t s = 0; s < r.samples.size(); ++s) {
          const char* sep = s == 0 ? "" : ",";
          absl::StrAppend(&rounds, sep, r.samples[s].second);
          absl::StrAppend(&pages, sep, s < r.sample_pages.size() ? r.sample_pages[s] : 0);
        }
        rounds += '}';
        pages += '}';
        *samples << std::make_tuple(uploads[i].run_id, rounds, pages);
      }
      samples->complete();
    }
    if (!finished.empty()) {
      w.exec_params(R"sql(
        UPDATE runs r SET state = v.state, failure_reason = NULLIF(v.reason, ''),
                          finished_at = now(), lease_expires_at = NULL
          FROM jsonb_to_recordset($1::jsonb) AS v(id bigint, state text, reason text)
         WHERE r.id = v.id)sql",
                    finished.dump());
    }
    // Jobs in id order, each once for the whole batch.
    for (const auto& [job_id, succeeded] : jobs) {
      // Before reading the job's other runs: see pg::LockJob.
      pg::LockJob(w, job_id);
      if (succeeded) ExtendAdaptiveJob(w, job_id);
      pg::RecomputeJobState(w, job_id);
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int64_t>> PgWorkStore::ReapExpiredLeases() {
  return pool_->Query<std::vector<int64_t>>(
      [&](pqxx::connection& c, std::vector<int64_t>& jobs) -> absl::Status {
        pqxx::work w(c);
        auto lost = w.exec(R"sql(
          SELECT id, job_id, attempt FROM runs
           WHERE state IN ('assigned', 'running') AND lease_expires_at < now()
           ORDER BY id FOR UPDATE SKIP LOCKED)sql");
        jobs = pg::SettleLostAttempts(w, lost, LostCause::kLeaseExpired, options_.requeue());
        w.commit();
        return absl::OkStatus();
      });
}

}  // namespace faultline::controller
