#include "services/controller/storage/store.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/core/statistics.h"
#include "services/controller/storage/migrations.h"

namespace faultline::controller {
namespace {

using nlohmann::json;

// Arbitrary but fixed: serialises migrations across controller replicas.
constexpr int64_t kMigrationLockKey = 0x66617574'6c696e65;  // "faultline"

constexpr const char* kRecomputeJobState = R"sql(
UPDATE jobs j SET
  state = CASE
            WHEN c.open > 0 THEN CASE WHEN c.started > 0 THEN 'running' ELSE 'queued' END
            WHEN c.failed > 0 THEN 'failed'
            ELSE 'succeeded'
          END,
  finished_at = CASE WHEN c.open = 0 THEN coalesce(j.finished_at, now()) END
FROM (SELECT count(*) FILTER (WHERE state IN ('queued', 'assigned', 'running')) AS open,
             count(*) FILTER (WHERE state <> 'queued') AS started,
             count(*) FILTER (WHERE state = 'failed') AS failed
        FROM runs WHERE job_id = $1) c
WHERE j.id = $1 AND j.state <> 'cancelled'
)sql";

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
  job.state = r[5].as<std::string>();
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

std::map<std::string, std::string> StringMap(const std::string& text) {
  std::map<std::string, std::string> out;
  const json parsed = json::parse(text);  // items() must not outlive the parsed value
  for (const auto& [k, v] : parsed.items()) {
    out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  return out;
}

std::optional<uint64_t> OptionalU64(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<uint64_t>();
}

}  // namespace

struct PgStore::ConnectionPool {
  ConnectionPool(std::string url, int size) : url(std::move(url)), size(size) {}

  // Runs fn with a pooled connection, converting libpqxx exceptions to Status. A connection
  // that broke is dropped, never reused: libpqxx 6.4 would reconnect it silently and lose
  // session state.
  absl::Status WithConnection(const std::function<absl::Status(pqxx::connection&)>& fn);
  // After a lost connection the idle ones are suspect too (a server restart ends them all).
  void DropIdle() {
    std::lock_guard lock(mu);
    open -= static_cast<int>(idle.size());
    idle.clear();
    cv.notify_all();
  }

  std::string url;
  int size;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<pqxx::connection>> idle;
  int open = 0;
};

PgStore::PgStore(StoreOptions options)
    : options_(std::move(options)),
      pool_(std::make_unique<ConnectionPool>(options_.database_url, options_.pool_size)) {}
PgStore::~PgStore() = default;

absl::Status PgStore::ConnectionPool::WithConnection(
    const std::function<absl::Status(pqxx::connection&)>& fn) {
  std::unique_ptr<pqxx::connection> conn;
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !idle.empty() || open < size; });
    if (!idle.empty()) {
      conn = std::move(idle.back());
      idle.pop_back();
    } else {
      ++open;
    }
  }
  auto give_back = [&](bool healthy) {
    std::lock_guard lock(mu);
    if (healthy && conn) {
      idle.push_back(std::move(conn));
    } else {
      conn.reset();
      --open;
    }
    cv.notify_one();
  };
  try {
    if (!conn) conn = std::make_unique<pqxx::connection>(url);
    absl::Status status = fn(*conn);
    give_back(true);
    return status;
  } catch (const pqxx::broken_connection& e) {
    give_back(false);
    DropIdle();  // from the same (dead) server: the next call should not trip over them
    return absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
  } catch (const pqxx::sql_error& e) {
    // A connection that died mid-statement surfaces as sql_error with an empty state on
    // some paths; do not keep it.
    bool healthy = !e.sqlstate().empty();
    give_back(healthy);
    if (!healthy) {
      DropIdle();
      return absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
    }
    if (e.sqlstate().rfind("08", 0) == 0 || e.sqlstate() == "57P01") {
      DropIdle();
      return absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
    }
    return absl::InternalError(absl::StrCat("database error ", e.sqlstate(), ": ", e.what()));
  } catch (const std::exception& e) {
    give_back(false);
    return absl::InternalError(absl::StrCat("database error: ", e.what()));
  }
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

absl::Status PgStore::Ping(std::chrono::milliseconds timeout) {
  // libpq's asynchronous API with poll(2), so that every wait has the deadline (libpqxx
  // 6.4 blocks without one). Name resolution inside PQconnectStart is not bounded: use an
  // address or a host the resolver answers for at once.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectStart(options_.database_url.c_str()),
                                                    &PQfinish);
  auto unavailable = [&](const std::string& what) {
    std::string detail = conn ? PQerrorMessage(conn.get()) : "";
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
    return absl::UnavailableError(
        absl::StrCat("database unavailable: ", what, detail.empty() ? "" : ": ", detail));
  };
  auto wait = [&](bool for_write) -> absl::Status {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return absl::UnavailableError(
            absl::StrCat("database unavailable: no answer within ", timeout.count(), " ms"));
      }
      pollfd p{PQsocket(conn.get()), static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
      if (p.fd < 0) return unavailable("no socket");
      int r = poll(&p, 1, static_cast<int>(left.count()) + 1);
      if (r > 0) return absl::OkStatus();
      if (r < 0 && errno != EINTR) return unavailable("poll failed");
    }
  };
  if (!conn || PQstatus(conn.get()) == CONNECTION_BAD) return unavailable("cannot connect");
  for (PostgresPollingStatusType st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK;) {
    if (st == PGRES_POLLING_FAILED) return unavailable("cannot connect");
    if (absl::Status s = wait(st == PGRES_POLLING_WRITING); !s.ok()) return s;
    st = PQconnectPoll(conn.get());
  }
  if (PQsetnonblocking(conn.get(), 1) != 0 ||
      PQsendQuery(conn.get(), "SELECT coalesce(max(version), 0) FROM schema_migrations") != 1) {
    return unavailable("cannot send");
  }
  for (int f; (f = PQflush(conn.get())) != 0;) {
    if (f < 0) return unavailable("cannot send");
    if (absl::Status s = wait(true); !s.ok()) return s;
  }
  int version = -1;
  std::string error;
  for (;;) {
    while (PQisBusy(conn.get()) != 0) {
      if (absl::Status s = wait(false); !s.ok()) return s;
      if (PQconsumeInput(conn.get()) != 1) return unavailable("connection lost");
    }
    std::unique_ptr<PGresult, decltype(&PQclear)> r(PQgetResult(conn.get()), &PQclear);
    if (!r) break;
    if (PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1) {
      version = std::atoi(PQgetvalue(r.get(), 0, 0));
    } else {
      error = PQresultErrorMessage(r.get());
      while (!error.empty() && error.back() == '\n') error.pop_back();
    }
  }
  if (!error.empty()) return absl::UnavailableError(absl::StrCat("database error: ", error));
  if (version < Migrations().back().version) {
    return absl::UnavailableError(absl::StrCat("schema at version ", version));
  }
  return absl::OkStatus();
}

absl::StatusOr<BoardHealth> PgStore::UpsertBoard(const BoardRecord& board) {
  BoardHealth health;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    json labels = board.summary.kernel_labels;
    json running = board.summary.running_kernel_labels;
    json bootable = board.summary.bootable_kernel_labels;
    if (running.empty() && !board.summary.running_kernel_label.empty()) {
      running.push_back(board.summary.running_kernel_label);
    }
    std::optional<SwitchInFlight> in_flight;
    auto prev = w.exec_params(
        "SELECT switch_label, coalesce(switch_from_boot_id, '') FROM boards WHERE name = $1 "
        "FOR UPDATE",
        board.summary.name);
    if (!prev.empty() && !prev[0][0].is_null()) {
      in_flight = SwitchInFlight{prev[0][0].as<std::string>(), prev[0][1].as<std::string>()};
    }
    BoardSummary hello = board.summary;
    hello.running_kernel_labels.clear();
    for (const auto& k : running) hello.running_kernel_labels.push_back(k);
    health = HealthAfterHello(in_flight, hello);
    w.exec_params(R"sql(
      INSERT INTO boards (name, arch, memory_bytes, kernel_labels, running_kernel_label, facts,
                          running_kernel_labels, bootable_kernel_labels, boot_id, health,
                          health_reason)
      VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7::jsonb, $8::jsonb, $9, $10, $11)
      ON CONFLICT (name) DO UPDATE SET
        arch = EXCLUDED.arch, memory_bytes = EXCLUDED.memory_bytes,
        kernel_labels = EXCLUDED.kernel_labels,
        running_kernel_label = EXCLUDED.running_kernel_label,
        running_kernel_labels = EXCLUDED.running_kernel_labels,
        bootable_kernel_labels = EXCLUDED.bootable_kernel_labels,
        boot_id = EXCLUDED.boot_id, health = EXCLUDED.health,
        health_reason = EXCLUDED.health_reason,
        switch_label = NULL, switch_from_boot_id = NULL, switch_deadline = NULL,
        facts = EXCLUDED.facts, last_seen = now())sql",
                  board.summary.name, board.summary.arch,
                  static_cast<int64_t>(board.summary.memory_bytes), labels.dump(),
                  board.summary.running_kernel_label, board.facts_json, running.dump(),
                  bootable.dump(), board.summary.boot_id, health.health, health.reason);
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return health;
}

absl::StatusOr<std::vector<BoardRecord>> PgStore::ListBoards() {
  std::vector<BoardRecord> boards;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(R"sql(
      SELECT b.name, b.arch, b.memory_bytes, b.kernel_labels::text, b.running_kernel_label,
             b.facts::text, (extract(epoch FROM b.last_seen) * 1000)::bigint,
             now() - b.last_seen < make_interval(secs => $1),
             coalesce((SELECT max(r.id) FROM runs r
                        WHERE r.board = b.name AND r.state IN ('assigned', 'running')), 0),
             b.running_kernel_labels::text, b.bootable_kernel_labels::text, b.boot_id,
             b.health, b.health_reason, b.kernel_switches
        FROM boards b ORDER BY b.name)sql",
                              options_.board_offline_after_seconds);
    for (const auto& r : rows) {
      BoardRecord b;
      b.summary.name = r[0].as<std::string>();
      b.summary.arch = r[1].as<std::string>();
      b.summary.memory_bytes = r[2].as<uint64_t>();
      const json labels = json::parse(r[3].as<std::string>());
      for (const auto& k : labels) b.summary.kernel_labels.push_back(k);
      b.summary.running_kernel_label = r[4].as<std::string>();
      b.facts_json = r[5].as<std::string>();
      b.last_seen_ms = r[6].as<int64_t>();
      b.online = r[7].as<bool>();
      b.current_run_id = r[8].as<int64_t>();
      const json running = json::parse(r[9].as<std::string>());
      for (const auto& k : running) b.summary.running_kernel_labels.push_back(k);
      const json bootable = json::parse(r[10].as<std::string>());
      for (const auto& k : bootable) b.summary.bootable_kernel_labels.push_back(k);
      b.summary.boot_id = r[11].as<std::string>();
      b.summary.health = r[12].as<std::string>();
      b.summary.health_reason = r[13].as<std::string>();
      b.summary.kernel_switches = r[14].as<uint64_t>();
      boards.push_back(std::move(b));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return boards;
}

absl::StatusOr<int> PgStore::ReleaseBoardRuns(const std::string& board) {
  int touched = 0;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      UPDATE runs SET
        state = CASE WHEN attempt >= $2 THEN 'failed' ELSE 'queued' END,
        failure_reason = CASE WHEN attempt >= $2
                              THEN 'lost: agent restarted during attempt ' || attempt
                              ELSE 'agent restarted during attempt ' || attempt END,
        board = CASE WHEN attempt >= $2 THEN board END,
        finished_at = CASE WHEN attempt >= $2 THEN now() END,
        attempt_id = NULL, lease_expires_at = NULL
      WHERE board = $1 AND state IN ('assigned', 'running')
      RETURNING job_id)sql",
                              board, options_.max_attempts);
    std::set<int64_t> jobs;
    for (const auto& r : rows) jobs.insert(r[0].as<int64_t>());
    for (int64_t job : jobs) w.exec_params(kRecomputeJobState, job);
    w.commit();
    touched = static_cast<int>(rows.size());
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return touched;
}

absl::StatusOr<PgStore::Created> PgStore::CreateJob(const ValidatedJob& job,
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
      auto prior = w.exec_params("SELECT id, spec_digest FROM jobs WHERE request_id = $1",
                                 request_id);
      if (!prior.empty()) {
        if (prior[0][1].as<std::string>() != digest) {
          return absl::AlreadyExistsError(absl::StrCat(
              "request_id '", request_id, "' was used for job ", prior[0][0].as<int64_t>(),
              " with another spec"));
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
    job_id = w.exec_params1(R"sql(
      INSERT INTO jobs (name, benchmark, spec, matrix_keys, duration_seconds, warmup_ms,
                        memory_max, memory_high, swap_max, baseline, block_size, shuffle_seed,
                        alpha, min_effect, request_id, spec_digest, max_repetitions,
                        target_ci_half_width)
      VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, $6, $7, NULLIF($8, '')::bigint,
              NULLIF($9, '')::bigint, $10, $11, $12, $13, $14, NULLIF($15, ''), $16, $17, $18)
      RETURNING id)sql",
                            name, job.benchmark, spec_json, matrix_keys.dump(),
                            static_cast<int64_t>(job.duration.count()),
                            static_cast<int64_t>(job.warmup.count()),
                            static_cast<int64_t>(job.memcg.memory_max), opt(job.memcg.memory_high),
                            opt(job.memcg.swap_max), job.baseline,
                            static_cast<int64_t>(job.block_size),
                            static_cast<int64_t>(job.shuffle_seed), job.alpha, job.min_effect,
                            request_id, digest, static_cast<int64_t>(job.max_repetitions),
                            job.target_ci_half_width)[0]
                 .as<int64_t>();
    std::string arches = json(job.arches).dump();
    std::string boards = json(job.boards).dump();
    pqxx::stream_to runs(w, "runs",
                         std::vector<std::string>{"job_id", "cell_index", "cell", "params", "kernel",
                                                  "repetition", "arches", "boards", "sequence"});
    for (const auto& run : job.runs) {
      json cell = json::object();
      for (const auto& [k, v] : run.cell) cell[k] = v;
      json params(run.params);
      runs << std::make_tuple(job_id, run.cell_index, cell.dump(), params.dump(), run.kernel,
                              run.repetition, arches, boards, run.sequence);
    }
    runs.complete();
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return Created{job_id, created};
}

// Adaptive repetitions: when the last open run of a job with max_repetitions succeeded,
// every cell whose B/A ratio CI (any candidate against the baseline) is still wider than
// ±target gets another block of repetitions for every kernel, planned like the first ones:
// kernel blocks in the job's order, cells shuffled within a repetition (seeded).
static void ExtendAdaptiveJob(pqxx::work& w, int64_t job_id) {
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
  CompareOptions options;
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
  int sequence = counts[0][3].as<int>() + 1;
  if (done_repetitions >= max_repetitions) return;
  // Kernels in their planned order (the baseline's block first).
  std::vector<std::string> kernels;
  for (const auto& r : w.exec_params(
           "SELECT kernel FROM runs WHERE job_id = $1 GROUP BY kernel ORDER BY min(sequence)", job_id)) {
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
  std::vector<int> cells;
  for (const auto& [cell, by_kernel] : samples) {
    auto a = by_kernel.find(baseline);
    if (a == by_kernel.end()) continue;
    for (const auto& [kernel, b] : by_kernel) {
      if (kernel == baseline) continue;
      if (NeedsMorePairs(Compare(a->second, b, options), target, max_repetitions)) {
        cells.push_back(cell);
        break;
      }
    }
  }
  if (cells.empty()) return;
  const int last = std::min(max_repetitions, done_repetitions + block_size);
  for (const auto& kernel : kernels) {
    for (int repetition = done_repetitions + 1; repetition <= last; ++repetition) {
      std::vector<int> order = cells;
      std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(repetition) * 0x9E3779B97F4A7C15ull));
      std::shuffle(order.begin(), order.end(), rng);
      for (int cell : order) {
        w.exec_params(R"sql(
          INSERT INTO runs (job_id, cell_index, cell, params, kernel, repetition, arches, boards,
                            sequence)
          SELECT job_id, cell_index, cell, params, kernel, $4, arches, boards, $5
            FROM runs WHERE job_id = $1 AND cell_index = $2 AND kernel = $3 AND repetition = 1)sql",
                      job_id, cell, kernel, repetition, sequence++);
      }
    }
  }
}

absl::StatusOr<JobRecord> PgStore::GetJob(int64_t job_id) {
  JobRecord job;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(
        absl::StrCat("SELECT ", kJobColumns, " FROM jobs j ", kJobCounts, " WHERE j.id = $1"),
        job_id);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
    job = JobFromRow(rows[0]);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return job;
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListJobs(int limit) {
  std::vector<JobRecord> jobs;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(absl::StrCat("SELECT ", kJobColumns, " FROM jobs j ", kJobCounts,
                                           " ORDER BY j.id DESC LIMIT $1"),
                              limit);
    for (const auto& r : rows) jobs.push_back(JobFromRow(r));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return jobs;
}

absl::StatusOr<std::vector<RunRecord>> PgStore::ListRuns(int64_t job_id) {
  std::vector<RunRecord> runs;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(R"sql(
      SELECT r.id, r.job_id, r.cell_index, r.cell::text, r.kernel, r.repetition, r.state,
             coalesce(r.board, ''), coalesce(r.failure_reason, ''), r.attempt,
             res.run_id IS NOT NULL, coalesce(res.throughput, 0),
             coalesce(res.duration_seconds, 0), coalesce(res.rounds, 0),
             coalesce(res.environment::text, '{}'), coalesce(res.too_coarse, false),
             coalesce(res.pages_per_second, 0)
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
      run.state = r[6].as<std::string>();
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
      runs.push_back(std::move(run));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return runs;
}

absl::StatusOr<JobRecord> PgStore::CancelJob(int64_t job_id) {
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto job = w.exec_params("SELECT state FROM jobs WHERE id = $1 FOR UPDATE", job_id);
    if (job.empty()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
    std::string state = job[0][0].as<std::string>();
    if (state == "succeeded" || state == "failed" || state == "cancelled") {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " is already ", state, "; nothing to cancel"));
    }
    // Running attempts learn of it on their next heartbeat; their results are refused.
    w.exec_params(R"sql(
      UPDATE runs SET state = 'cancelled', finished_at = now(), lease_expires_at = NULL
       WHERE job_id = $1 AND state IN ('queued', 'assigned', 'running'))sql",
                  job_id);
    w.exec_params("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE id = $1", job_id);
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return GetJob(job_id);
}

absl::StatusOr<WorkOrder> PgStore::NextWork(const std::string& board) {
  WorkOrder out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    // Locking the board row serialises two polls of one board: a switch is ordered once.
    auto healthy = w.exec_params(
        "SELECT 1 FROM boards WHERE name = $1 AND health = 'ok' FOR UPDATE", board);
    if (healthy.empty()) return absl::OkStatus();
    // The head of this board's queue, over every kernel it runs or can boot.
    auto head = w.exec_params(R"sql(
      WITH b AS (
        SELECT name, arch, memory_bytes, running_kernel_labels, bootable_kernel_labels
          FROM boards WHERE name = $1)
      SELECT r.id, r.kernel, r.job_id, b.running_kernel_labels ? r.kernel
        FROM runs r JOIN jobs j ON j.id = r.job_id CROSS JOIN b
       WHERE r.state = 'queued'
         AND (r.not_before IS NULL OR r.not_before <= now())
         AND (b.running_kernel_labels ? r.kernel OR b.bootable_kernel_labels ? r.kernel)
         AND (r.arches = '[]'::jsonb OR r.arches ? b.arch)
         AND (r.boards = '[]'::jsonb OR r.boards ? b.name)
         AND j.memory_max <= b.memory_bytes
         AND NOT EXISTS (SELECT 1 FROM runs busy
                          WHERE busy.board = b.name AND busy.state IN ('assigned', 'running'))
       ORDER BY r.job_id, r.sequence, r.id
       LIMIT 1
       FOR UPDATE OF r SKIP LOCKED)sql",
                              board);
    if (head.empty()) return absl::OkStatus();
    const int64_t run_id = head[0][0].as<int64_t>();
    const std::string kernel = head[0][1].as<std::string>();
    const int64_t job_id = head[0][2].as<int64_t>();
    if (!head[0][3].as<bool>()) {
      KernelSwitchOrder order;
      order.label = kernel;
      order.reason = absl::StrCat("run ", run_id, " of job ", job_id, " needs kernel ", kernel);
      order.deadline_seconds = static_cast<uint32_t>(options_.kernel_switch_deadline_seconds);
      w.exec_params(R"sql(
        UPDATE boards SET health = 'switching', health_reason = $2, switch_label = $3,
                          switch_from_boot_id = boot_id,
                          switch_deadline = now() + make_interval(secs => $4),
                          kernel_switches = kernel_switches + 1, last_seen = now()
         WHERE name = $1)sql",
                    board, "switching: " + order.reason, kernel,
                    options_.kernel_switch_deadline_seconds);
      w.commit();
      out.kernel_switch = std::move(order);
      return absl::OkStatus();
    }
    auto rows = w.exec_params(R"sql(
      UPDATE runs r SET
        state = 'assigned', board = $1, attempt = r.attempt + 1, attempt_id = gen_random_uuid(),
        assigned_at = now(), failure_reason = NULL,
        lease_expires_at = now() + make_interval(secs => j.duration_seconds + j.warmup_ms / 1000.0 + $2)
      FROM jobs j
      WHERE r.id = $3 AND j.id = r.job_id
      RETURNING r.id, r.attempt_id::text, r.job_id, j.benchmark, r.kernel, j.duration_seconds,
                r.params::text, j.memory_max, j.memory_high, j.swap_max,
                ceil(j.duration_seconds + j.warmup_ms / 1000.0 + $2)::int)sql",
                              board, options_.lease_grace_seconds, run_id);
    if (rows.empty()) return absl::OkStatus();
    const auto& r = rows[0];
    Assignment a;
    a.run_id = r[0].as<int64_t>();
    a.attempt_id = r[1].as<std::string>();
    a.job_id = r[2].as<int64_t>();
    a.benchmark = r[3].as<std::string>();
    a.kernel = r[4].as<std::string>();
    a.duration_seconds = r[5].as<uint32_t>();
    a.params = StringMap(r[6].as<std::string>());
    a.memcg.memory_max = r[7].as<uint64_t>();
    a.memcg.memory_high = OptionalU64(r[8]);
    a.memcg.swap_max = OptionalU64(r[9]);
    a.lease_seconds = r[10].as<uint32_t>();
    w.exec_params(kRecomputeJobState, a.job_id);
    w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    w.commit();
    out.run = std::move(a);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::optional<Assignment>> PgStore::ClaimRun(const std::string& board) {
  auto next = NextWork(board);
  if (!next.ok()) return next.status();
  return std::move(next->run);
}

absl::Status PgStore::AbandonKernelSwitch(const std::string& board) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params(R"sql(
      UPDATE boards SET health = 'ok', health_reason = '', switch_label = NULL,
                        switch_from_boot_id = NULL, switch_deadline = NULL,
                        kernel_switches = kernel_switches - 1
       WHERE name = $1 AND health = 'switching')sql",
                  board);
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<std::string>> PgStore::ExpireKernelSwitches() {
  std::vector<std::string> boards;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    // switch_label stays: a late hello is still checked against it.
    auto rows = w.exec(R"sql(
      UPDATE boards SET health = 'needs-check',
             health_reason = format('switch to %s: no hello from the new kernel by %s UTC',
                                    switch_label,
                                    to_char(switch_deadline AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD HH24:MI:SS')),
             switch_deadline = NULL
       WHERE health = 'switching' AND switch_deadline < now()
      RETURNING name)sql");
    for (const auto& r : rows) boards.push_back(r[0].as<std::string>());
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return boards;
}

absl::StatusOr<bool> PgStore::RenewLease(const std::string& board, int64_t run_id,
                                         const std::string& attempt_id) {
  bool current = false;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    auto rows = w.exec_params(R"sql(
      UPDATE runs r SET
        state = 'running', started_at = coalesce(r.started_at, now()),
        lease_expires_at = now() + make_interval(secs => j.duration_seconds + j.warmup_ms / 1000.0 + $4)
      FROM jobs j
      WHERE r.id = $1 AND r.attempt_id::text = $2 AND r.board = $3
        AND r.state IN ('assigned', 'running') AND j.id = r.job_id
      RETURNING r.job_id)sql",
                              run_id, attempt_id, board, options_.lease_grace_seconds);
    current = !rows.empty();
    if (current) w.exec_params(kRecomputeJobState, rows[0][0].as<int64_t>());
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return current;
}

absl::Status PgStore::TouchBoard(const std::string& board) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    w.commit();
    if (r.affected_rows() == 0) {
      return absl::FailedPreconditionError(absl::StrCat("board '", board, "' has not said hello"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> PgStore::StoreResult(const std::string& board, int64_t run_id,
                                             const std::string& attempt_id, bool succeeded,
                                             const std::string& failure_reason,
                                             const ResultRecord& result) {
  int64_t job_id = 0;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      SELECT r.state, coalesce(r.attempt_id::text, ''), coalesce(r.board, ''), r.job_id,
             j.duration_seconds,
             EXISTS (SELECT 1 FROM results res WHERE res.run_id = r.id AND res.attempt_id::text = $2)
        FROM runs r JOIN jobs j ON j.id = r.job_id
       WHERE r.id = $1
         FOR UPDATE OF r)sql",
                              run_id, attempt_id);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
    std::string state = rows[0][0].as<std::string>();
    std::string current_attempt = rows[0][1].as<std::string>();
    std::string run_board = rows[0][2].as<std::string>();
    job_id = rows[0][3].as<int64_t>();
    int duration = rows[0][4].as<int>();
    bool already_stored = rows[0][5].as<bool>();
    if (current_attempt == attempt_id && run_board == board &&
        (state == "succeeded" || state == "failed")) {
      return absl::OkStatus();  // a repeated upload of the stored outcome: acknowledge
    }
    if (already_stored) return absl::OkStatus();
    if (current_attempt != attempt_id || run_board != board ||
        (state != "assigned" && state != "running")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run_id, " attempt ", attempt_id, " is not current (run is ", state,
          "); result refused"));
    }
    bool ok = succeeded;
    std::string reason = failure_reason;
    if (ok) {
      // The stored invariant: one sample per second of measured duration.
      bool shape_ok = result.samples.size() == static_cast<size_t>(duration);
      for (size_t i = 0; shape_ok && i < result.samples.size(); ++i) {
        shape_ok = result.samples[i].first == i + 1;
      }
      if (!shape_ok) {
        ok = false;
        reason = absl::StrCat("invalid result: expected samples for seconds 1..", duration,
                              ", got ", result.samples.size(), " samples");
      }
    }
    if (ok) {
      w.exec_params(R"sql(
        INSERT INTO results (run_id, attempt_id, board, throughput, rounds, duration_seconds,
                             warmup_seconds, counters, environment, pages, pages_per_second,
                             too_coarse)
        VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10, $11, $12))sql",
                    run_id, attempt_id, board, result.throughput,
                    static_cast<int64_t>(result.rounds), result.duration_seconds,
                    result.warmup_seconds, result.counters_json, result.environment_json,
                    static_cast<int64_t>(result.pages), result.pages_per_second, result.too_coarse);
      pqxx::stream_to samples(w, "samples",
                              std::vector<std::string>{"run_id", "second", "rounds", "pages"});
      for (size_t i = 0; i < result.samples.size(); ++i) {
        const auto& [second, rounds] = result.samples[i];
        const uint64_t pages = i < result.sample_pages.size() ? result.sample_pages[i] : 0;
        samples << std::make_tuple(run_id, static_cast<int64_t>(second),
                                   static_cast<int64_t>(rounds), static_cast<int64_t>(pages));
      }
      samples.complete();
    }
    w.exec_params(R"sql(
      UPDATE runs SET state = $2, failure_reason = NULLIF($3, ''), finished_at = now(),
                      lease_expires_at = NULL
       WHERE id = $1)sql",
                  run_id, ok ? "succeeded" : "failed", ok ? std::string() : reason);
    if (ok) ExtendAdaptiveJob(w, job_id);
    w.exec_params(kRecomputeJobState, job_id);
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return job_id;
}

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

absl::StatusOr<ScheduleRecord> PgStore::CreateSchedule(const std::string& name,
                                                       const std::string& cron,
                                                       const std::string& spec_json,
                                                       int64_t next_run_ms) {
  ScheduleRecord out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(absl::StrCat(R"sql(
      INSERT INTO schedules (name, cron, spec, next_run)
      VALUES ($1, $2, $3::jsonb, to_timestamp($4 / 1000.0))
      ON CONFLICT (name) DO NOTHING
      RETURNING )sql", kScheduleColumns),
                              name, cron, spec_json, next_run_ms);
    if (rows.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("a schedule named '", name, "' exists"));
    }
    out = ScheduleFromRow(rows[0]);
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<ScheduleRecord>> PgStore::ListSchedules() {
  std::vector<ScheduleRecord> out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    for (const auto& r : t.exec(absl::StrCat("SELECT ", kScheduleColumns,
                                             " FROM schedules ORDER BY id"))) {
      out.push_back(ScheduleFromRow(r));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::Status PgStore::DeleteSchedule(int64_t id) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params("DELETE FROM schedules WHERE id = $1", id);
    w.commit();
    if (r.affected_rows() == 0) return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
    return absl::OkStatus();
  });
}

absl::Status PgStore::TagJobWithSchedule(int64_t job_id, int64_t schedule_id) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("UPDATE jobs SET schedule_id = $2 WHERE id = $1", job_id, schedule_id);
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PgStore::FireDueSchedules(
    const ScheduleFire& fire, const std::function<int64_t(const ScheduleRecord&)>& next_run_ms) {
  int fired = 0;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec(absl::StrCat("SELECT ", kScheduleColumns, R"sql(
        FROM schedules WHERE next_run <= now() ORDER BY next_run
         FOR NO KEY UPDATE SKIP LOCKED)sql"));  // jobs reference schedules: allow KEY SHARE
    for (const auto& row : rows) {
      ScheduleRecord sched = ScheduleFromRow(row);
      // The job is submitted on another connection with a request id naming the slot, so a
      // crash between submit and the update below cannot submit the slot twice.
      auto job = fire(sched);
      int64_t next = next_run_ms(sched);
      if (job.ok()) {
        ++fired;
        w.exec_params(R"sql(
          UPDATE schedules SET last_run = now(), last_job_id = $2, last_error = '',
                 next_run = to_timestamp($3 / 1000.0)
           WHERE id = $1)sql",
                      sched.id, *job, next);
      } else {
        w.exec_params(R"sql(
          UPDATE schedules SET last_run = now(), last_error = $2, next_run = to_timestamp($3 / 1000.0)
           WHERE id = $1)sql",
                      sched.id, std::string(job.status().message()), next);
      }
    }
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return fired;
}

namespace {

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
  c.state = r[12].as<std::string>();
  c.detected_at_ms = r[13].as<int64_t>();
  return c;
}

}  // namespace

absl::StatusOr<std::vector<SeriesHistory>> PgStore::SeriesHistories(int min_points) {
  std::vector<SeriesHistory> out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(R"sql(
      WITH per_job AS (
        SELECT j.id AS job_id, coalesce(nullif(j.name, ''), j.benchmark) AS study, j.benchmark,
               r.cell::text AS cell, coalesce(b.arch, '') AS arch, r.board, r.kernel,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY res.throughput) AS median
          FROM results res JOIN runs r ON r.id = res.run_id JOIN jobs j ON j.id = r.job_id
          LEFT JOIN boards b ON b.name = r.board
         WHERE j.state IN ('succeeded', 'failed')
         GROUP BY 1, 2, 3, 4, 5, 6, 7)
      SELECT study, benchmark, cell, arch, board, kernel,
             array_agg(job_id ORDER BY job_id)::text, array_agg(median ORDER BY job_id)::text
        FROM per_job
       GROUP BY study, benchmark, cell, arch, board, kernel
      HAVING count(*) >= $1)sql",
                              min_points);
    auto parse_array = [](std::string text) {
      std::vector<std::string> items;
      text = text.substr(1, text.size() - 2);  // {a,b,c}
      size_t start = 0;
      while (start <= text.size() && !text.empty()) {
        size_t comma = text.find(',', start);
        items.push_back(text.substr(start, comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      return items;
    };
    for (const auto& r : rows) {
      SeriesHistory h;
      h.key.study = r[0].as<std::string>();
      h.key.benchmark = r[1].as<std::string>();
      h.key.cell = StringMap(r[2].as<std::string>());
      h.key.arch = r[3].as<std::string>();
      h.key.board = r[4].as<std::string>();
      h.key.kernel = r[5].as<std::string>();
      for (const auto& id : parse_array(r[6].as<std::string>())) h.job_ids.push_back(std::stoll(id));
      for (const auto& m : parse_array(r[7].as<std::string>())) h.medians.push_back(std::stod(m));
      out.push_back(std::move(h));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<int> PgStore::RecordChangePoints(const std::vector<ChangePointRecord>& points) {
  int added = 0;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
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
  if (!s.ok()) return s;
  return added;
}

absl::StatusOr<std::vector<ChangePointRecord>> PgStore::ListChangePoints(bool include_closed) {
  std::vector<ChangePointRecord> out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec(absl::StrCat(
        "SELECT ", kChangePointColumns, " FROM change_points ",
        include_closed ? "" : "WHERE state IN ('open', 'acknowledged') ", "ORDER BY id"));
    for (const auto& r : rows) out.push_back(ChangePointFromRow(r));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<ChangePointRecord> PgStore::SetChangePointState(int64_t id, const std::string& state) {
  ChangePointRecord out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(absl::StrCat(
        "UPDATE change_points SET state = $2, updated_at = now() WHERE id = $1 RETURNING ",
        kChangePointColumns), id, state);
    if (rows.empty()) return absl::NotFoundError(absl::StrCat("change point ", id, " not found"));
    out = ChangePointFromRow(rows[0]);
    w.commit();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<MetricsSnapshot> PgStore::Snapshot() {
  MetricsSnapshot snap;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto series = t.exec(R"sql(
      WITH per_job AS (
        SELECT j.id AS job_id, coalesce(nullif(j.name, ''), j.benchmark) AS study, j.benchmark,
               r.cell AS cell, coalesce(b.arch, '') AS arch, r.board, r.kernel,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY res.throughput) AS median,
               max(res.created_at) AS last_success
          FROM results res JOIN runs r ON r.id = res.run_id JOIN jobs j ON j.id = r.job_id
          LEFT JOIN boards b ON b.name = r.board
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
      SELECT DISTINCT ON (coalesce(nullif(j.name, ''), j.benchmark), j.benchmark) j.id
        FROM jobs j
       WHERE jsonb_array_length(coalesce(j.spec -> 'kernels', '[]'::jsonb)) > 1
         AND j.state IN ('succeeded', 'failed')  -- partial studies would make verdicts flap
         AND EXISTS (SELECT 1 FROM runs r JOIN results res ON res.run_id = r.id
                      WHERE r.job_id = j.id)
       ORDER BY coalesce(nullif(j.name, ''), j.benchmark), j.benchmark, j.id DESC)sql")) {
      snap.comparison_jobs.push_back(r[0].as<int64_t>());
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
      snap.schedules.push_back({r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<int64_t>()});
    }
    for (const auto& r : t.exec("SELECT state, count(*) FROM change_points GROUP BY state")) {
      snap.change_points_by_state[r[0].as<std::string>()] = r[1].as<int64_t>();
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return snap;
}

absl::Status PgStore::CreateToken(const std::string& name, const std::string& role,
                                  const std::string& board, const std::string& token_sha256) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      INSERT INTO api_tokens (name, role, board, token_sha256)
      VALUES ($1, $2, nullif($3, ''), $4)
      ON CONFLICT (name) DO NOTHING
      RETURNING id)sql",
                              name, role, board, token_sha256);
    if (rows.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("a token named '", name, "' exists"));
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<TokenRecord>> PgStore::FindToken(const std::string& token_sha256) {
  std::optional<TokenRecord> out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec_params(R"sql(
      SELECT name, role, coalesce(board, ''), (extract(epoch FROM created_at) * 1000)::bigint
        FROM api_tokens WHERE token_sha256 = $1 AND revoked_at IS NULL)sql",
                              token_sha256);
    if (rows.empty()) return absl::OkStatus();
    TokenRecord r;
    r.name = rows[0][0].as<std::string>();
    r.role = rows[0][1].as<std::string>();
    r.board = rows[0][2].as<std::string>();
    r.created_at_ms = rows[0][3].as<int64_t>();
    out = std::move(r);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<bool> PgStore::RevokeToken(const std::string& name) {
  bool revoked = false;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params(
        "UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL", name);
    w.commit();
    revoked = r.affected_rows() > 0;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return revoked;
}

absl::StatusOr<std::vector<TokenRecord>> PgStore::ListTokens() {
  std::vector<TokenRecord> out;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::read_transaction t(c);
    auto rows = t.exec(R"sql(
      SELECT name, role, coalesce(board, ''), (extract(epoch FROM created_at) * 1000)::bigint,
             revoked_at IS NOT NULL
        FROM api_tokens ORDER BY name)sql");
    for (const auto& row : rows) {
      TokenRecord r;
      r.name = row[0].as<std::string>();
      r.role = row[1].as<std::string>();
      r.board = row[2].as<std::string>();
      r.created_at_ms = row[3].as<int64_t>();
      r.revoked = row[4].as<bool>();
      out.push_back(std::move(r));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<int64_t>> PgStore::ReapExpiredLeases() {
  std::vector<int64_t> jobs;
  absl::Status s = pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto rows = w.exec_params(R"sql(
      UPDATE runs SET
        state = CASE WHEN attempt >= $1 THEN 'failed' ELSE 'queued' END,
        failure_reason = CASE WHEN attempt >= $1
                              THEN 'lost: lease expired on attempt ' || attempt
                              ELSE 'lease expired on attempt ' || attempt END,
        board = CASE WHEN attempt >= $1 THEN board END,
        finished_at = CASE WHEN attempt >= $1 THEN now() END,
        not_before = CASE WHEN attempt < $1 THEN now() + make_interval(secs =>
                       least($3::float8, $2::float8 * 2 ^ (attempt - 1)) * (0.5 + random() / 2)) END,
        attempt_id = NULL, lease_expires_at = NULL
      WHERE state IN ('assigned', 'running') AND lease_expires_at < now()
      RETURNING job_id)sql",
                              options_.max_attempts, options_.requeue_backoff_seconds,
                              options_.requeue_backoff_cap_seconds);
    std::set<int64_t> touched;
    for (const auto& r : rows) touched.insert(r[0].as<int64_t>());
    for (int64_t job : touched) w.exec_params(kRecomputeJobState, job);
    w.commit();
    jobs.assign(touched.begin(), touched.end());
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return jobs;
}

}  // namespace faultline::controller
