#include "services/controller/storage/pg_pool.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "services/controller/core/matching.h"
#include "services/controller/storage/pg_queue.h"

namespace faultline::controller::pg {
namespace {

thread_local PooledConnection* current_connection = nullptr;

// Names the connection fn runs on for ExecPrepared, for as long as fn runs.
class CurrentConnection {
 public:
  explicit CurrentConnection(PooledConnection* c) : outer_(current_connection) {
    current_connection = c;
  }
  ~CurrentConnection() { current_connection = outer_; }
  CurrentConnection(const CurrentConnection&) = delete;
  CurrentConnection& operator=(const CurrentConnection&) = delete;

 private:
  PooledConnection* outer_;
};

}  // namespace

PooledConnection* CurrentPooledConnection() {
  return current_connection;
}

absl::Status Pool::WithConnection(const std::function<absl::Status(pqxx::connection&)>& fn) {
  std::unique_ptr<PooledConnection> conn;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !idle_.empty() || open_ < size_; });
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++open_;
    }
  }
  auto give_back = [&](bool healthy) {
    std::lock_guard lock(mu_);
    if (healthy && conn) {
      idle_.push_back(std::move(conn));
    } else {
      conn.reset();
      --open_;
    }
    cv_.notify_one();
  };
  auto unavailable = [&](const std::exception& e) {
    DropIdle();  // from the same (dead) server: the next call should not trip over them
    return absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
  };
  try {
    if (!conn) conn = std::make_unique<PooledConnection>(url_);
    absl::Status status;
    {
      CurrentConnection current(conn.get());
      status = fn(*conn);
    }
    give_back(true);
    return status;
  } catch (const pqxx::broken_connection& e) {
    give_back(false);
    return unavailable(e);
  } catch (const pqxx::sql_error& e) {
    // A connection that died mid-statement surfaces as sql_error with an empty state on
    // some paths; do not keep it.
    const bool healthy = !e.sqlstate().empty();
    give_back(healthy);
    if (!healthy || e.sqlstate().rfind("08", 0) == 0 || e.sqlstate() == "57P01") {
      return unavailable(e);
    }
    return absl::InternalError(absl::StrCat("database error ", e.sqlstate(), ": ", e.what()));
  } catch (const std::exception& e) {
    give_back(false);
    return absl::InternalError(absl::StrCat("database error: ", e.what()));
  }
}

void Pool::DropIdle() {
  std::lock_guard lock(mu_);
  open_ -= static_cast<int>(idle_.size());
  idle_.clear();
  cv_.notify_all();
}

std::string LockJob(pqxx::transaction_base& t, int64_t job_id) {
  auto rows = t.exec_params("SELECT state FROM jobs WHERE id = $1 FOR UPDATE", job_id);
  return rows.empty() ? std::string() : rows[0][0].as<std::string>();
}

void KeepJobSeries(pqxx::transaction_base& t, int64_t job_id) {
  t.exec_params("SELECT faultline_keep_job_series($1)", job_id);
}

void RecomputeJobState(pqxx::transaction_base& t, int64_t job_id) {
  const std::string before = LockJob(t, job_id);
  auto counts = t.exec_params(R"sql(
    SELECT count(*) FILTER (WHERE state IN ('queued', 'assigned', 'running')),
           count(*) FILTER (WHERE state <> 'queued'),
           count(*) FILTER (WHERE state = 'failed')
      FROM runs WHERE job_id = $1)sql",
                              job_id);
  const int open = counts[0][0].as<int>();
  const JobState state = JobStateFromRuns(open, counts[0][1].as<int>(), counts[0][2].as<int>());
  t.exec_params(R"sql(
    UPDATE jobs SET state = $2,
                    finished_at = CASE WHEN $3 THEN coalesce(finished_at, now()) END
     WHERE id = $1 AND state <> 'cancelled')sql",
                job_id, std::string(ToString(state)), open == 0);
  if (open == 0 && !before.empty() &&
      !IsFinal(ParseEnumOr(ParseJobState(before), JobState::kFailed))) {
    KeepJobSeries(t, job_id);
  }
}

void MarkJobsRunning(pqxx::transaction_base& t, const std::set<int64_t>& job_ids) {
  if (job_ids.empty()) return;
  ExecPrepared(t, "mark_jobs_running", R"sql(
    UPDATE jobs SET state = 'running', finished_at = NULL
     WHERE id = ANY($1::bigint[]) AND state NOT IN ('running', 'cancelled'))sql",
               absl::StrCat("{", absl::StrJoin(job_ids, ","), "}"));
}

std::string LeaseSecondsSql(int grace_param) {
  return absl::StrCat("(j.duration_seconds + j.warmup_ms / 1000.0 + $", grace_param, ")");
}

std::string LeaseExpirySql(int grace_param) {
  return absl::StrCat("now() + make_interval(secs => ", LeaseSecondsSql(grace_param), ")");
}

std::vector<int64_t> SettleLostAttempts(pqxx::transaction_base& t, const pqxx::result& lost,
                                        LostCause cause, const RequeuePolicy& policy) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::set<int64_t> jobs;
  for (const auto& row : lost) {
    const int64_t run_id = row[0].as<int64_t>();
    jobs.insert(row[1].as<int64_t>());
    const LostAttemptOutcome out = AfterLostAttempt(row[2].as<int>(), cause, policy, uniform(rng));
    if (out.requeue) {
      t.exec_params(R"sql(
        UPDATE runs SET state = 'queued', failure_reason = $2, board = NULL,
                        not_before = CASE WHEN $3::float8 > 0
                                     THEN now() + make_interval(secs => $3::float8) END,
                        attempt_id = NULL, lease_expires_at = NULL
         WHERE id = $1)sql",
                    run_id, out.reason, out.delay_seconds);
    } else {
      t.exec_params(R"sql(
        UPDATE runs SET state = 'failed', failure_reason = $2, finished_at = now(),
                        attempt_id = NULL, lease_expires_at = NULL
         WHERE id = $1)sql",
                    run_id, out.reason);
    }
  }
  for (int64_t job : jobs) RecomputeJobState(t, job);
  return {jobs.begin(), jobs.end()};
}

void RefreshBootableLabels(pqxx::transaction_base& t, const std::string& board) {
  t.exec_params(
      "UPDATE boards SET bootable_kernel_labels = faultline_bootable_labels(name) WHERE name = $1",
      board);
}

void EndKernelSwitches(pqxx::transaction_base& t, const std::string& board,
                       const std::string& outcome) {
  t.exec_params(R"sql(
      UPDATE kernel_switches SET ended_at = now(), outcome = $2
       WHERE board = $1 AND ended_at IS NULL)sql",
                board, outcome);
}

void MarkBadBoot(pqxx::transaction_base& t, const std::string& board, const std::string& label,
                 const std::string& reason, const std::string& console) {
  auto built = t.exec_params(R"sql(
      SELECT 1 FROM builds b JOIN boards bo ON bo.arch = b.arch
       WHERE b.label = $1 AND bo.name = $2 AND b.state = 'done')sql",
                             label, board);
  if (built.empty()) return;
  t.exec_params(R"sql(
      INSERT INTO bad_boots (label, board, reason, console) VALUES ($1, $2, $3, $4)
      ON CONFLICT (label, board) DO UPDATE SET
        reason = EXCLUDED.reason, at = now(),
        console = CASE WHEN EXCLUDED.console <> '' THEN EXCLUDED.console
                       ELSE bad_boots.console END)sql",
                label, board, reason, console);
  RefreshBootableLabels(t, board);
  // Its queued runs that no other board may serve (core/matching.h, whatever the board's
  // health now) fail.
  std::vector<FreeBoard> others;
  for (const auto& r : t.exec_params(
           absl::StrCat("SELECT ", kFreeBoardColumns, " FROM boards b WHERE b.name <> $1"),
           board)) {
    others.push_back(FreeBoardFromRow(r));
  }
  std::vector<int64_t> orphaned;
  for (const auto& r :
       t.exec_params(absl::StrCat("SELECT ", kQueuedRunColumns,
                                  " FROM runs r JOIN jobs j ON j.id = r.job_id"
                                  " WHERE r.kernel = $1 AND r.state = 'queued' FOR UPDATE OF r"),
                     label)) {
    const QueuedRun run = QueuedRunFromRow(r);
    if (std::none_of(others.begin(), others.end(),
                     [&](const FreeBoard& b) { return MayServe(b, run); })) {
      orphaned.push_back(run.id);
    }
  }
  if (orphaned.empty()) return;
  auto failed = t.exec_params(R"sql(
      UPDATE runs r SET state = 'failed', failure_reason = $2, finished_at = now()
       WHERE r.id = ANY($1::bigint[]) AND r.state = 'queued'
      RETURNING r.job_id)sql",
                              absl::StrCat("{", absl::StrJoin(orphaned, ","), "}"),
                              absl::StrCat("kernel ", label, " did not boot on board ", board,
                                           " and no other board can boot it: ", reason));
  std::set<int64_t> jobs;
  for (const auto& r : failed) jobs.insert(r[0].as<int64_t>());
  for (int64_t job : jobs) RecomputeJobState(t, job);
}

std::map<std::string, std::string> StringMap(const std::string& text) {
  std::map<std::string, std::string> out;
  const nlohmann::json parsed = nlohmann::json::parse(text);  // items() must not outlive it
  for (const auto& [k, v] : parsed.items()) {
    out[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  return out;
}

std::optional<uint64_t> OptionalU64(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<uint64_t>();
}

std::vector<std::string> ArrayItems(std::string text) {
  std::vector<std::string> items;
  if (text.size() < 2) return items;
  text = text.substr(1, text.size() - 2);  // {a,b,c}
  size_t start = 0;
  while (!text.empty() && start <= text.size()) {
    size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace faultline::controller::pg
