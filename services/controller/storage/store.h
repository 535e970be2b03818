#pragma once
// PostgreSQL storage (libpqxx 6.4). The only state of the controller: several replicas
// may share one database (claims use FOR UPDATE SKIP LOCKED). libpqxx exceptions are
// converted to absl::Status here: a lost connection is UNAVAILABLE, stale writes are
// FAILED_PRECONDITION, unknown ids NOT_FOUND.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/controller/core/board_health.h"
#include "services/controller/core/domain.h"

namespace faultline::controller {

struct RunCounts {
  uint32_t total = 0, queued = 0, assigned = 0, running = 0, succeeded = 0, failed = 0,
           cancelled = 0;
};

struct JobRecord {
  int64_t id = 0;
  std::string name;
  std::string benchmark;
  std::string spec_json;
  std::vector<std::string> matrix_keys;
  std::string state;
  RunCounts counts;
  int64_t created_at_ms = 0;
  int64_t finished_at_ms = 0;  // 0: not finished
  std::string baseline;
  double alpha = 0.01;
  double min_effect = 0.03;
  uint64_t shuffle_seed = 0;
};

struct RunRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int cell_index = 0;
  std::map<std::string, std::string> cell;
  std::string kernel;
  int repetition = 0;
  std::string state;
  std::string board;
  std::string failure_reason;
  int attempt = 0;
  bool has_result = false;
  double throughput = 0;
  double duration_seconds = 0;
  uint64_t rounds = 0;
  bool too_coarse = false;
  double pages_per_second = 0;
  std::string environment_json = "{}";
};

struct BoardRecord {
  BoardSummary summary;
  std::string facts_json;
  int64_t last_seen_ms = 0;
  bool online = false;
  int64_t current_run_id = 0;
};

struct Assignment {
  int64_t run_id = 0;
  std::string attempt_id;
  int64_t job_id = 0;
  std::string benchmark;
  std::string kernel;
  uint32_t duration_seconds = 0;
  std::map<std::string, std::string> params;
  MemcgLimitsBytes memcg;
  uint32_t lease_seconds = 0;
};

// The board must boot another of its kernels before it can take the next run.
struct KernelSwitchOrder {
  std::string label;
  std::string reason;
  uint32_t deadline_seconds = 0;
};

// What a board should do next: a run, a kernel switch, or (neither) wait.
struct WorkOrder {
  std::optional<Assignment> run;
  std::optional<KernelSwitchOrder> kernel_switch;
};

struct ResultRecord {
  double throughput = 0;
  uint64_t rounds = 0;
  double duration_seconds = 0;
  double warmup_seconds = 0;
  std::vector<std::pair<uint32_t, uint64_t>> samples;  // (second, rounds)
  std::vector<uint64_t> sample_pages;  // pages per sample, parallel to samples (may be empty)
  uint64_t pages = 0;
  double pages_per_second = 0;
  bool too_coarse = false;
  std::string counters_json = "{}";
  std::string environment_json = "{}";
};

// The latest median throughput of one series (study, benchmark, cell, board, kernel).
struct SeriesPoint {
  std::string study;
  std::string benchmark;
  std::map<std::string, std::string> cell;
  std::string arch;
  std::string board;
  std::string kernel;
  double median = 0;
  int64_t last_success_ms = 0;
};

// One series' history: per-job medians in job order.
struct SeriesHistory {
  SeriesPoint key;  // median/last_success unused
  std::vector<int64_t> job_ids;
  std::vector<double> medians;
};

struct ChangePointRecord {
  int64_t id = 0;
  std::string study, benchmark, config, arch, board, kernel;
  int64_t job_id = 0;
  double mean_before = 0, mean_after = 0, relative_change = 0, p_value = 1;
  std::string state = "open";
  int64_t detected_at_ms = 0;
};

struct MetricsSnapshot {
  std::vector<SeriesPoint> series;
  std::map<std::string, int64_t> runs_by_state;
  std::map<std::string, int64_t> jobs_by_state;
  std::vector<int64_t> comparison_jobs;  // latest finished multi-kernel job per (study, benchmark)
  std::vector<ChangePointRecord> open_change_points;  // latest open one per series
  std::map<std::string, int64_t> change_points_by_state;
  struct ScheduleHealth {
    std::string name;
    std::string cron;
    int64_t last_success_ms = 0;  // newest succeeded job of the schedule, else its creation
  };
  std::vector<ScheduleHealth> schedules;
};

struct ScheduleRecord {
  int64_t id = 0;
  std::string name;
  std::string cron;
  std::string spec_json;
  int64_t next_run_ms = 0;
  int64_t last_run_ms = 0;
  int64_t last_job_id = 0;
  std::string last_error;
};

// An API credential. Only the SHA-256 of the token is stored.
struct TokenRecord {
  std::string name;
  std::string role;   // user | agent
  std::string board;  // agent tokens: the board they act for
  int64_t created_at_ms = 0;
  bool revoked = false;
};

struct StoreOptions {
  std::string database_url;
  int pool_size = 4;
  // A run's lease covers warm-up + duration + this grace; heartbeats renew it.
  int lease_grace_seconds = 120;
  int max_attempts = 3;
  int board_offline_after_seconds = 60;
  // A run whose lease lapsed waits before it is offered again: base · 2^(attempt − 1),
  // capped, times a uniform jitter in [0.5, 1].
  int requeue_backoff_seconds = 30;
  int requeue_backoff_cap_seconds = 600;
  // A board ordered to switch kernels must say hello from the new kernel within this.
  int kernel_switch_deadline_seconds = 900;
};

class PgStore {
 public:
  explicit PgStore(StoreOptions options);
  ~PgStore();
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

  // Applies pending migrations under a transaction-scoped advisory lock; refuses to start
  // when an applied migration's checksum differs from the code's.
  absl::Status Migrate();
  // Readiness check of the database and the schema (for /readyz) on a connection of its own
  // (never waits for the pool), bounded by `timeout` from start to answer: a database that
  // hangs (stopped, network black hole) is UNAVAILABLE after `timeout`, not never.
  absl::Status Ping(std::chrono::milliseconds timeout = std::chrono::seconds(2));

  // Records a hello. A kernel switch in flight is settled here: the board is healthy again
  // only if it came back from a new boot on the kernel asked for (HealthAfterHello).
  // Returns the board's health after the hello.
  absl::StatusOr<BoardHealth> UpsertBoard(const BoardRecord& board);
  absl::StatusOr<std::vector<BoardRecord>> ListBoards();
  // Runs left assigned to a board whose agent restarted go back to the queue (or fail as
  // lost after max_attempts). Returns how many were touched.
  absl::StatusOr<int> ReleaseBoardRuns(const std::string& board);

  // Stores the job and all its runs in one transaction; returns the job id. With a
  // request id, a retry of the same spec returns the first job (created = false) and another
  // spec under the same id is ALREADY_EXISTS.
  struct Created {
    int64_t job_id = 0;
    bool created = true;
  };
  absl::StatusOr<Created> CreateJob(const ValidatedJob& job, const std::string& name,
                                    const std::string& spec_json,
                                    const std::string& request_id = "");
  absl::StatusOr<JobRecord> GetJob(int64_t job_id);
  absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit);
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int64_t job_id);
  absl::StatusOr<JobRecord> CancelJob(int64_t job_id);

  // The board's next step. The first queued run (by job, then the job's planned sequence:
  // kernel blocks alternate) that the board may serve (arch, memory, filters) with any
  // kernel it runs or can boot: claimed under a new attempt id and lease when the board
  // runs its kernel; otherwise the board is ordered to switch (state `switching` until its
  // next hello). Boards that are switching or need a check get nothing.
  absl::StatusOr<WorkOrder> NextWork(const std::string& board);
  // NextWork's run, for boards that never switch.
  absl::StatusOr<std::optional<Assignment>> ClaimRun(const std::string& board);
  // An ordered switch that never reached the agent: the board is back to ok.
  absl::Status AbandonKernelSwitch(const std::string& board);
  // Boards whose switch deadline passed without a hello become needs-check; returns them.
  absl::StatusOr<std::vector<std::string>> ExpireKernelSwitches();
  // Renews the lease of (run, attempt) on this board. Returns false when the attempt is no
  // longer current (cancelled, lapsed, superseded): the agent must stop it.
  absl::StatusOr<bool> RenewLease(const std::string& board, int64_t run_id,
                                  const std::string& attempt_id);
  absl::Status TouchBoard(const std::string& board);
  // Stores a run's outcome in one transaction, fenced by (run, attempt, board). A repeated
  // upload of the same attempt's result is acknowledged without storing twice.
  // Returns the run's job id.
  absl::StatusOr<int64_t> StoreResult(const std::string& board, int64_t run_id, const std::string& attempt_id,
                           bool succeeded, const std::string& failure_reason,
                           const ResultRecord& result);
  absl::StatusOr<ScheduleRecord> CreateSchedule(const std::string& name, const std::string& cron,
                                                const std::string& spec_json, int64_t next_run_ms);
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules();
  absl::Status DeleteSchedule(int64_t id);
  // Schedules whose slot has come, locked for this caller until it records the outcome with
  // FinishScheduleSlot (several controller replicas never fire one slot twice).
  using ScheduleFire = std::function<absl::StatusOr<int64_t>(const ScheduleRecord&)>;
  // Fires every due schedule through `fire` (which submits the job and returns its id) and
  // moves each to next_run_ms(schedule). Returns the number of jobs submitted.
  absl::StatusOr<int> FireDueSchedules(const ScheduleFire& fire,
                                       const std::function<int64_t(const ScheduleRecord&)>& next_run_ms);
  // Jobs created by a schedule carry its id.
  absl::Status TagJobWithSchedule(int64_t job_id, int64_t schedule_id);

  // Histories of every series with at least `min_points` finished jobs.
  absl::StatusOr<std::vector<SeriesHistory>> SeriesHistories(int min_points);
  // Stores newly found change points (known ones are left as they are); returns how many
  // were new.
  absl::StatusOr<int> RecordChangePoints(const std::vector<ChangePointRecord>& points);
  absl::StatusOr<std::vector<ChangePointRecord>> ListChangePoints(bool include_closed);
  absl::StatusOr<ChangePointRecord> SetChangePointState(int64_t id, const std::string& state);

  // API tokens. ALREADY_EXISTS when the name is taken.
  absl::Status CreateToken(const std::string& name, const std::string& role,
                           const std::string& board, const std::string& token_sha256);
  // The live (not revoked) token with this hash.
  absl::StatusOr<std::optional<TokenRecord>> FindToken(const std::string& token_sha256);
  // False when no live token has this name.
  absl::StatusOr<bool> RevokeToken(const std::string& name);
  absl::StatusOr<std::vector<TokenRecord>> ListTokens();

  // Current state for /metrics, computed from the database on each scrape.
  absl::StatusOr<MetricsSnapshot> Snapshot();
  // Returns lapsed leases to the queue (after a backoff, see StoreOptions) or, after
  // max_attempts, fails them as lost; returns the ids of jobs whose state changed.
  absl::StatusOr<std::vector<int64_t>> ReapExpiredLeases();

 private:
  struct ConnectionPool;  // libpqxx stays out of this header

  StoreOptions options_;
  std::unique_ptr<ConnectionPool> pool_;
};

}  // namespace faultline::controller
