#pragma once
// The PostgreSQL side's shared plumbing (libpqxx 6.4; 7.x too, for trixie's riscv64): a
// small connection pool that turns libpqxx exceptions into absl::Status, one Query helper
// for every store method, and the SQL that several stores share. Private to storage/: nothing above
// it includes libpqxx.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/controller/core/lifecycle.h"

namespace faultline::controller::pg {

// A pool's connection remembers the statements it has prepared (ExecPrepared): libpqxx 6.4
// keeps that list itself (preparing the same text again is a no-op), 7.x sends every
// prepare to the server, where a second one of the same name fails.
class PooledConnection final : public pqxx::connection {
 public:
  explicit PooledConnection(const std::string& url) : pqxx::connection(url) {}
  std::set<std::string> prepared;
};

class Pool {
 public:
  Pool(std::string url, int size) : url_(std::move(url)), size_(size) {}

  // Runs fn with a pooled connection. A connection that broke is dropped, never reused
  // (libpqxx 6.4 would reconnect it silently and lose session state), and so are the idle
  // ones (a server restart ends them all): lost connections are UNAVAILABLE, other
  // database errors INTERNAL; fn's own status passes through.
  absl::Status WithConnection(const std::function<absl::Status(pqxx::connection&)>& fn);

  // The one shape of a store method: fn fills `out` on a pooled connection.
  template <typename T>
  absl::StatusOr<T> Query(const std::function<absl::Status(pqxx::connection&, T&)>& fn) {
    T out{};
    absl::Status s = WithConnection([&](pqxx::connection& c) { return fn(c, out); });
    if (!s.ok()) return s;
    return out;
  }

 private:
  void DropIdle();

  std::string url_;
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<PooledConnection>> idle_;
  int open_ = 0;
};

// Readiness of the database and the schema on a connection of its own (never waits for the
// pool), bounded by `timeout` from start to answer: a database that hangs (stopped, network
// black hole) is UNAVAILABLE after `timeout`. libpq's asynchronous API with poll(2), since
// libpqxx 6.4 blocks without a deadline. Name resolution is not bounded: use an address.
absl::Status PingWithDeadline(const std::string& url, std::chrono::milliseconds timeout);

// Locks the job's row until the transaction ends. Every transaction that changes a run and
// then reads the job's runs (to recompute the job's state, or to plan more pairs) takes it
// after the run's row and before that read: under READ COMMITTED two such transactions
// would otherwise each miss the other's uncommitted run and both leave the job unfinished.
// Returns the job's state as it is then ("" when there is no such job).
std::string LockJob(pqxx::transaction_base& t, int64_t job_id);

// Recomputes jobs.state/finished_at of job $1 from its runs (core: JobStateFromRuns). Takes
// LockJob first, so its count sees every run change committed before it. When the job
// finishes here, KeepJobSeries runs in the same transaction.
void RecomputeJobState(pqxx::transaction_base& t, int64_t job_id);

// Sets the labels `board` offers to boot from their one rule (migration 26's
// faultline_bootable_labels): after its hello or a bad boot on it.
void RefreshBootableLabels(pqxx::transaction_base& t, const std::string& board);

// A switch of `board` to `label` failed (it lapsed, or the board came back on another
// kernel). When `label` is a kernel a job brought (a done build of the board's arch): the
// board no longer offers it (bad_boots, the reason and console tail kept), and queued runs
// of it that no other board can take fail naming why. Other labels are the board admin's:
// nothing is recorded.
void MarkBadBoot(pqxx::transaction_base& t, const std::string& board, const std::string& label,
                 const std::string& reason, const std::string& console);
// The board's kernel switches in flight end now with `outcome` (kernel_switches: booted,
// other-kernel, lapsed, abandoned): a job's phases count switching until then.
void EndKernelSwitches(pqxx::transaction_base& t, const std::string& board,
                       const std::string& outcome);
// Runs `sql` as the connection's prepared statement `name` (prepared on first use on each
// pooled connection): the statements every dispatch pass runs are parsed and planned once
// instead of on every pass. On a connection of no pool it is an unprepared statement.
// COPY into `table` (plain identifiers) with `columns`: libpqxx 6.4's constructor; 7.x's
// factory (its constructor with a column list is deprecated, and 7.10's does not compile).
inline std::unique_ptr<pqxx::stream_to> CopyInto(pqxx::transaction_base& t,
                                                 const std::string& table,
                                                 const std::vector<std::string>& columns) {
#if PQXX_VERSION_MAJOR >= 7
  std::string list;
  for (const std::string& c : columns) list += (list.empty() ? "" : ",") + c;
  return std::make_unique<pqxx::stream_to>(pqxx::stream_to::raw_table(t, table, list));
#else
  return std::make_unique<pqxx::stream_to>(t, table, columns);
#endif
}

// The pooled connection Pool::WithConnection runs its fn on in this thread, or null.
PooledConnection* CurrentPooledConnection();

template <typename... Args>
pqxx::result ExecPrepared(pqxx::transaction_base& t, const std::string& name,
                          const std::string& sql, Args&&... args) {
  PooledConnection* pooled = CurrentPooledConnection();
  if (pooled == nullptr || &t.conn() != pooled) {
    return t.exec_params(sql, std::forward<Args>(args)...);
  }
  if (!pooled->prepared.contains(name)) {
    t.conn().prepare(name, sql);
    pooled->prepared.insert(name);
  }
  return t.exec_prepared(name, std::forward<Args>(args)...);
}

// The jobs some of whose runs were just claimed: such a job has a run open and started, so by
// JobStateFromRuns it is running (unless cancelled). One statement, and no lock on a job row
// that is running already: the runs of a job are claimed in groups, each in its own
// transaction, and results of the job lock its row meanwhile.
void MarkJobsRunning(pqxx::transaction_base& t, const std::set<int64_t>& job_ids);

// Writes the finished job's per-series medians (job_series_medians) and moves each series'
// newest job (series_latest), so /metrics and the change-point scan never aggregate a
// finished job's results again (SQL function faultline_keep_job_series, migration 17).
void KeepJobSeries(pqxx::transaction_base& t, int64_t job_id);

// A run's lease in seconds, the one place it is written: its job's duration + warm-up +
// the grace in parameter $N (jobs aliased j).
std::string LeaseSecondsSql(int grace_param);
// "now() + LeaseSecondsSql": when a lease taken or renewed now lapses.
std::string LeaseExpirySql(int grace_param);

// Applies AfterLostAttempt to each (run id, job id, attempt) of `lost`: requeued after its
// delay or failed as lost; then recomputes the touched jobs. Returns the touched jobs.
std::vector<int64_t> SettleLostAttempts(pqxx::transaction_base& t,
                                        const pqxx::result& lost /* id, job_id, attempt */,
                                        LostCause cause, const RequeuePolicy& policy);

// {"k": "v"} text -> map (non-string values as JSON text).
std::map<std::string, std::string> StringMap(const std::string& text);
std::optional<uint64_t> OptionalU64(const pqxx::field& f);
// A text[]/int[]/float8[] literal "{a,b,c}" -> its items (no quoting: numbers only).
std::vector<std::string> ArrayItems(std::string text);

template <typename E>
E ParseEnumOr(std::optional<E> parsed, E fallback) {
  return parsed ? *parsed : fallback;
}

}  // namespace faultline::controller::pg
