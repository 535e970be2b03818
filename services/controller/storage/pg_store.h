#pragma once
// PostgreSQL implementations of the store interfaces (interfaces.h), one file each
// (pg_jobs.cc, pg_phases.cc, pg_work.cc, pg_boards.cc, pg_schedules.cc, pg_history.cc,
// pg_tokens.cc, pg_store.cc). Several controller replicas may share one database: claims use FOR
// UPDATE SKIP LOCKED and schedule slots are locked while they fire. Leases, switch deadlines and
// backoffs are compared with the database's clock, the one clock every replica shares.
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

namespace pg {
class Pool;
}

class PgJobStore final : public JobStore {
 public:
  PgJobStore(pg::Pool* pool, const StoreOptions& options) : pool_(pool), options_(options) {}
  absl::StatusOr<Created> CreateJob(const ValidatedJob& job, const std::string& name,
                                    const std::string& spec_json,
                                    const std::string& request_id) override;
  absl::StatusOr<JobRecord> GetJob(int64_t job_id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int64_t job_id) override;
  absl::StatusOr<std::map<int64_t, std::vector<double>>> RunSamples(int64_t job_id) override;
  absl::StatusOr<JobRecord> CancelJob(int64_t job_id) override;
  absl::StatusOr<JobTimeline> Timeline(int64_t job_id) override;  // pg_phases.cc

 private:
  pg::Pool* pool_;
  const StoreOptions& options_;
};

class PgBuildStore final : public BuildStore {
 public:
  PgBuildStore(pg::Pool* pool, const StoreOptions& options) : pool_(pool), options_(options) {}
  absl::StatusOr<std::optional<BuildRecord>> ClaimBuild(const std::string& builder,
                                                        const std::vector<std::string>& arches,
                                                        uint32_t lease_seconds) override;
  absl::StatusOr<bool> RenewBuild(int64_t build_id, const std::string& attempt_id,
                                  uint32_t lease_seconds) override;
  absl::Status FinishBuild(int64_t build_id, const std::string& attempt_id, bool succeeded,
                           const BuildRecord& outcome) override;
  absl::StatusOr<int> ExpireBuildLeases(uint32_t max_attempts) override;
  absl::StatusOr<std::vector<BuildRecord>> ListBuilds(int64_t job_id) override;
  absl::Status PutArtifact(const std::string& sha256, const std::string& data) override;
  absl::Status RecordArtifact(const std::string& sha256, uint64_t bytes,
                              const std::string& location) override;
  absl::StatusOr<uint64_t> ArtifactBytes(const std::string& sha256) override;
  absl::Status ReadArtifact(
      const std::string& sha256, uint64_t offset,
      const std::function<absl::Status(const std::string& chunk, uint64_t at)>& sink) override;

 private:
  pg::Pool* pool_;
  const StoreOptions& options_;
};

class PgWorkStore final : public WorkStore {
 public:
  PgWorkStore(pg::Pool* pool, const StoreOptions& options) : pool_(pool), options_(options) {}
  absl::Status DecideWorkForBoards(const std::vector<std::string>& boards,
                                   const OrderSink& deliver) override;
  absl::Status AbandonKernelSwitch(const std::string& board) override;
  absl::StatusOr<std::vector<std::string>> ExpireKernelSwitches() override;
  absl::StatusOr<bool> RenewLease(const std::string& board, int64_t run_id,
                                  const std::string& attempt_id) override;
  std::vector<absl::StatusOr<int64_t>> StoreResults(
      const std::vector<ResultUpload>& uploads) override;
  absl::StatusOr<std::vector<int64_t>> ReapExpiredLeases() override;

 private:
  // One board's step over the whole queue, in a transaction of its own: for the boards that
  // found nothing in the window a pass reads (runs pinned to them far down a long queue).
  absl::StatusOr<WorkOrder> NextWorkFromWholeQueue(const std::string& board);
  // The whole batch in one transaction; per-upload refusals (not found, not current) are
  // answers, a database error fails the call.
  absl::StatusOr<std::vector<absl::StatusOr<int64_t>>> StoreBatch(
      const std::vector<ResultUpload>& uploads);
  pg::Pool* pool_;
  const StoreOptions& options_;
};

class PgBoardStore final : public BoardStore {
 public:
  PgBoardStore(pg::Pool* pool, const StoreOptions& options) : pool_(pool), options_(options) {}
  absl::StatusOr<HealthVerdict> UpsertBoard(const BoardRecord& board) override;
  absl::StatusOr<std::vector<BoardRecord>> ListBoards() override;
  absl::StatusOr<int> ReleaseBoardRuns(const std::string& board) override;
  absl::Status TouchBoard(const std::string& board) override;

 private:
  pg::Pool* pool_;
  const StoreOptions& options_;
};

class PgScheduleStore final : public ScheduleStore {
 public:
  explicit PgScheduleStore(pg::Pool* pool) : pool_(pool) {}
  absl::StatusOr<ScheduleRecord> CreateSchedule(const std::string& name, const std::string& cron,
                                                const std::string& spec_json,
                                                int64_t next_run_ms) override;
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules() override;
  absl::Status DeleteSchedule(int64_t id) override;
  absl::StatusOr<int> FireDueSchedules(
      int64_t now_ms, const Fire& fire,
      const std::function<int64_t(const ScheduleRecord&)>& next_run_ms) override;
  absl::Status TagJobWithSchedule(int64_t job_id, int64_t schedule_id) override;

 private:
  pg::Pool* pool_;
};

// series_latest's rows (and each one's job) as of series_generation n: they change only
// when a job finishes, and reading 40,000 rows on every scrape was most of a scrape's time.
struct FinishedSeriesCache {
  std::mutex mu;
  int64_t generation = -1;
  std::vector<SeriesPoint> series;
  std::vector<int64_t> jobs;
};

class PgHistoryStore final : public HistoryStore, public MetricsSource {
 public:
  PgHistoryStore(pg::Pool* pool, std::string url) : pool_(pool), url_(std::move(url)) {}
  absl::StatusOr<std::vector<SeriesHistory>> SeriesHistories(int min_points) override;
  absl::StatusOr<int> RecordChangePoints(const std::vector<ChangePointRecord>& points) override;
  absl::StatusOr<std::vector<ChangePointRecord>> ListChangePoints(bool include_closed) override;
  absl::StatusOr<ChangePointRecord> SetChangePointState(int64_t id,
                                                        ChangePointState state) override;
  absl::StatusOr<MetricsSnapshot> Snapshot(int64_t known_series_version = -1) override;
  absl::StatusOr<std::vector<JobVersion>> PendingComparisons(int limit) override;
  absl::StatusOr<bool> StoreComparisons(const JobComparisons& job) override;
  absl::StatusOr<JobComparisons> LoadComparisons(const JobVersion& job) override;
  absl::StatusOr<std::vector<JobTimeline>> PendingPhases(int limit) override;  // pg_phases.cc
  absl::StatusOr<bool> StorePhases(int64_t job_id, const std::vector<ArchPhases>& phases) override;
  // On a connection of its own, answered within 2 s, never waiting for the pool: /readyz.
  absl::Status Ping() override;

 private:
  pg::Pool* pool_;
  std::string url_;
  FinishedSeriesCache finished_;
};

class PgTokenStore final : public TokenStore {
 public:
  explicit PgTokenStore(pg::Pool* pool) : pool_(pool) {}
  absl::Status CreateToken(const std::string& name, TokenRole role, const std::string& board,
                           const std::string& token_sha256) override;
  absl::StatusOr<std::optional<TokenRecord>> FindToken(const std::string& token_sha256) override;
  absl::StatusOr<bool> RevokeToken(const std::string& name) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens() override;

 private:
  pg::Pool* pool_;
};

class PgDutyLeaseStore final : public DutyLeaseStore {
 public:
  explicit PgDutyLeaseStore(pg::Pool* pool) : pool_(pool) {}
  absl::StatusOr<bool> HoldDutyLease(const std::string& holder, std::chrono::seconds ttl) override;
  absl::Status ReleaseDutyLease(const std::string& holder) override;

 private:
  pg::Pool* pool_;
};

class PgRobotStore final : public RobotStore {
 public:
  explicit PgRobotStore(pg::Pool* pool) : pool_(pool) {}
  absl::StatusOr<std::map<int, std::string>> Cursor(const std::string& archive) override;
  absl::Status KeepMails(const std::string& archive, const std::vector<KeptMail>& mails,
                         const std::map<int, std::string>& cursor) override;
  absl::StatusOr<std::vector<std::string>> ThreadMails(const std::string& thread_root,
                                                       int version) override;
  absl::StatusOr<std::optional<SeriesRecord>> GetSeries(const std::string& id) override;
  absl::Status PutSeries(const SeriesRecord& series) override;
  absl::Status PutSeriesMbox(const std::string& id, const std::string& mbox) override;
  absl::StatusOr<std::string> SeriesMbox(const std::string& id) override;
  absl::StatusOr<std::vector<SeriesRecord>> ListSeries(std::optional<SeriesState> state,
                                                       int limit) override;
  absl::StatusOr<bool> QueueReply(const ReplyRecord& reply) override;
  absl::StatusOr<std::vector<ReplyRecord>> ListReplies(ReplyState state, int limit) override;
  absl::StatusOr<bool> MoveReply(const std::string& message_id, ReplyState from,
                                 ReplyState to) override;
  absl::StatusOr<int> RepliesSentSince(int64_t since_ms) override;
  absl::Status QueueChecks(const std::vector<CheckRecord>& checks) override;
  absl::StatusOr<std::vector<CheckRecord>> DueChecks(int64_t now_ms, int limit) override;
  absl::Status SettleCheck(const CheckRecord& check) override;

 private:
  pg::Pool* pool_;
};

class PgBisectionStore final : public BisectionStore {
 public:
  explicit PgBisectionStore(pg::Pool* pool) : pool_(pool) {}
  absl::StatusOr<Created> CreateBisection(const std::string& request_id,
                                          const std::string& doc_json) override;
  absl::StatusOr<BisectionRecord> GetBisection(int64_t id) override;
  absl::StatusOr<std::vector<BisectionRecord>> ListBisections(int limit,
                                                              bool running_only) override;
  absl::StatusOr<bool> UpdateBisection(int64_t id, BisectionState state,
                                       const std::string& doc_json, int64_t current_job) override;
  absl::StatusOr<BisectionRecord> CancelBisection(int64_t id) override;

 private:
  pg::Pool* pool_;
};

// One database: the pool, the migrations and every store on it.
class PgStore {
 public:
  explicit PgStore(StoreOptions options);
  ~PgStore();
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;

  // Applies pending migrations under a transaction-scoped advisory lock; refuses to start
  // when an applied migration's checksum differs from the code's.
  absl::Status Migrate();
  absl::Status Ping(std::chrono::milliseconds timeout = std::chrono::seconds(2));

  Stores stores() {
    return {&jobs_,    &work_,       &boards_, &schedules_,  &history_, &tokens_,
            &history_, &duty_lease_, &builds_, &bisections_, &robot_};
  }
  PgJobStore& jobs() { return jobs_; }
  PgWorkStore& work() { return work_; }
  PgBoardStore& boards() { return boards_; }
  PgScheduleStore& schedules() { return schedules_; }
  PgHistoryStore& history() { return history_; }
  PgTokenStore& tokens() { return tokens_; }
  PgDutyLeaseStore& duty_lease() { return duty_lease_; }
  PgBuildStore& builds() { return builds_; }
  PgBisectionStore& bisections() { return bisections_; }
  PgRobotStore& robot() { return robot_; }

 private:
  StoreOptions options_;
  std::unique_ptr<pg::Pool> pool_;
  PgJobStore jobs_;
  PgWorkStore work_;
  PgBoardStore boards_;
  PgScheduleStore schedules_;
  PgHistoryStore history_;
  PgTokenStore tokens_;
  PgDutyLeaseStore duty_lease_;
  PgBuildStore builds_;
  PgBisectionStore bisections_;
  PgRobotStore robot_;
};

}  // namespace faultline::controller
