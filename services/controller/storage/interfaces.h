#pragma once
// The controller's state, behind narrow interfaces: one per concern, so each caller depends
// only on what it uses and unit tests run on in-memory fakes (tests/support/fake_stores.h).
// PostgreSQL implements them all (pg_store.h), one file per interface. Errors: UNAVAILABLE
// when the database is unreachable, FAILED_PRECONDITION for stale writes, NOT_FOUND for
// unknown ids, ALREADY_EXISTS for taken names.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/controller/storage/records.h"

namespace faultline::controller {

// Jobs and their runs as users see them.
class JobStore {
 public:
  virtual ~JobStore() = default;
  struct Created {
    int64_t job_id = 0;
    bool created = true;  // false: a retry under the same request id returned the first job
  };
  // Stores the job and all its runs in one transaction. With a request id, a retry of the
  // same spec returns the first job and another spec under that id is ALREADY_EXISTS.
  virtual absl::StatusOr<Created> CreateJob(const ValidatedJob& job, const std::string& name,
                                            const std::string& spec_json,
                                            const std::string& request_id) = 0;
  virtual absl::StatusOr<JobRecord> GetJob(int64_t job_id) = 0;
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit) = 0;
  virtual absl::StatusOr<std::vector<RunRecord>> ListRuns(int64_t job_id) = 0;
  // The rounds each second of every run of the job that has a result, by run id.
  virtual absl::StatusOr<std::map<int64_t, std::vector<double>>> RunSamples(int64_t job_id) = 0;
  // Cancels every open run; FAILED_PRECONDITION when the job is already final.
  virtual absl::StatusOr<JobRecord> CancelJob(int64_t job_id) = 0;
  // What the job's phases are computed from (core/phases.h): its builds' claims and ends,
  // the kernel switches its runs asked for, its runs' assignments and ends; NOT_FOUND.
  virtual absl::StatusOr<JobTimeline> Timeline(int64_t job_id) = 0;
};

// Runs as boards take them: claims, leases, kernel switches, results.
class WorkStore {
 public:
  virtual ~WorkStore() = default;
  // The next steps of the waiting boards (in the order they asked). A board's step is the
  // first queued run (by job, then the job's planned sequence) that it may serve with any
  // kernel it runs or can boot (core/matching.h): claimed under a new attempt id and lease
  // when the board runs its kernel; otherwise the board is ordered to switch. Boards that
  // are switching or need a check get nothing; only boards that get a run or a switch order
  // are delivered. `deliver` gets each group of orders once it is committed (on the calling
  // thread), so the first boards hear their orders while the rest are still being claimed.
  // The error of a group that could not be taken ends the call; the groups delivered before
  // it stand (a claim must reach its board).
  using BoardOrders = std::vector<std::pair<std::string, WorkOrder>>;
  using OrderSink = std::function<void(BoardOrders&&)>;
  virtual absl::Status DecideWorkForBoards(const std::vector<std::string>& boards,
                                           const OrderSink& deliver) = 0;
  // An ordered switch that never reached the agent: the board is back to ok.
  virtual absl::Status AbandonKernelSwitch(const std::string& board) = 0;
  // Boards whose switch deadline passed without a hello become needs-check; returns them.
  virtual absl::StatusOr<std::vector<std::string>> ExpireKernelSwitches() = 0;
  // Renews the lease of (run, attempt) on this board. False when the attempt is no longer
  // current (cancelled, lapsed, superseded): the agent must stop it.
  virtual absl::StatusOr<bool> RenewLease(const std::string& board, int64_t run_id,
                                          const std::string& attempt_id) = 0;
  // Stores runs' outcomes, one answer per upload in their order (the run's job id, or why
  // the upload was refused). Each is fenced by (run, attempt, board); a repeated upload of
  // the same attempt's result is acknowledged without storing twice. The PostgreSQL store
  // commits them together (one transaction: one commit, one COPY of samples, one recount
  // per job), which is what lets a fleet's results keep up.
  virtual std::vector<absl::StatusOr<int64_t>> StoreResults(
      const std::vector<ResultUpload>& uploads) = 0;
  // Lapsed leases go back to the queue after a backoff, or fail as lost after the last
  // attempt (core/lifecycle.h: AfterLostAttempt); returns the jobs whose state changed.
  virtual absl::StatusOr<std::vector<int64_t>> ReapExpiredLeases() = 0;
};

// Boards as agents announce them.
class BoardStore {
 public:
  virtual ~BoardStore() = default;
  // Records a hello; a kernel switch in flight is settled here (HealthAfterHello). Returns
  // the board's health after the hello.
  virtual absl::StatusOr<HealthVerdict> UpsertBoard(const BoardRecord& board) = 0;
  virtual absl::StatusOr<std::vector<BoardRecord>> ListBoards() = 0;
  // Runs left assigned to a board whose agent restarted go back to the queue (or fail as
  // lost after the last attempt). Returns how many were touched.
  virtual absl::StatusOr<int> ReleaseBoardRuns(const std::string& board) = 0;
  // FAILED_PRECONDITION for a board that never said hello.
  virtual absl::Status TouchBoard(const std::string& board) = 0;
};

class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  virtual absl::StatusOr<ScheduleRecord> CreateSchedule(const std::string& name,
                                                        const std::string& cron,
                                                        const std::string& spec_json,
                                                        int64_t next_run_ms) = 0;
  virtual absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules() = 0;
  virtual absl::Status DeleteSchedule(int64_t id) = 0;
  // Submits the job of a slot and returns its id.
  using Fire = std::function<absl::StatusOr<int64_t>(const ScheduleRecord&)>;
  // Fires every schedule whose next run is at or before now_ms through `fire` and moves it
  // to next_run_ms(schedule). A slot fires once even with several controller replicas.
  // Returns the number of jobs submitted.
  virtual absl::StatusOr<int> FireDueSchedules(
      int64_t now_ms, const Fire& fire,
      const std::function<int64_t(const ScheduleRecord&)>& next_run_ms) = 0;
  // Jobs created by a schedule carry its id.
  virtual absl::Status TagJobWithSchedule(int64_t job_id, int64_t schedule_id) = 0;
};

// Per-job medians of every series, and the change points found in them.
class HistoryStore {
 public:
  virtual ~HistoryStore() = default;
  // Histories of every series with at least `min_points` finished jobs.
  virtual absl::StatusOr<std::vector<SeriesHistory>> SeriesHistories(int min_points) = 0;
  // Stores newly found change points (known ones are left as they are); returns how many
  // were new.
  virtual absl::StatusOr<int> RecordChangePoints(const std::vector<ChangePointRecord>& points) = 0;
  virtual absl::StatusOr<std::vector<ChangePointRecord>> ListChangePoints(bool include_closed) = 0;
  virtual absl::StatusOr<ChangePointRecord> SetChangePointState(int64_t id,
                                                                ChangePointState state) = 0;
};

// API credentials; only the SHA-256 of a token is stored.
class TokenStore {
 public:
  virtual ~TokenStore() = default;
  // ALREADY_EXISTS when the name is taken.
  virtual absl::Status CreateToken(const std::string& name, TokenRole role,
                                   const std::string& board, const std::string& token_sha256) = 0;
  // The live (not revoked) token with this hash.
  virtual absl::StatusOr<std::optional<TokenRecord>> FindToken(const std::string& token_sha256) = 0;
  // False when no live token has this name.
  virtual absl::StatusOr<bool> RevokeToken(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens() = 0;
};

// Kernels jobs bring: builds claimed by builders under leases, like runs, and the images
// they produce, content-addressed, in the database (every controller replica serves them).
class BuildStore {
 public:
  virtual ~BuildStore() = default;
  // A queued build of one of `arches` (or a prebuilt image of any), now `builder`'s under a
  // new attempt id and a lease of `lease_seconds`; nullopt when there is none. The shortest
  // expected first: prebuilt images, then builds on a warm object directory (a kernel of
  // the same tree, arch and config is built), then cold ones, oldest first within each; a
  // build queued for 30 minutes is passed over no more.
  virtual absl::StatusOr<std::optional<BuildRecord>> ClaimBuild(
      const std::string& builder, const std::vector<std::string>& arches,
      uint32_t lease_seconds) = 0;
  // False when the attempt is no longer the build's (lapsed and retried elsewhere).
  virtual absl::StatusOr<bool> RenewBuild(int64_t build_id, const std::string& attempt_id,
                                          uint32_t lease_seconds) = 0;
  // Ends the attempt: done (with `outcome`'s key, release, ... and an image already stored
  // by PutArtifact: FAILED_PRECONDITION otherwise) or failed (`outcome.error`). A failed
  // build fails the queued runs that needed it once no other build of its label can serve
  // them. FAILED_PRECONDITION when the attempt is not current.
  virtual absl::Status FinishBuild(int64_t build_id, const std::string& attempt_id, bool succeeded,
                                   const BuildRecord& outcome) = 0;
  // Builds whose lease lapsed go back to the queue (another builder takes them), or fail
  // after `max_attempts`. Returns how many were touched.
  virtual absl::StatusOr<int> ExpireBuildLeases(uint32_t max_attempts) = 0;
  // Every build (job_id 0) or a job's, newest first.
  virtual absl::StatusOr<std::vector<BuildRecord>> ListBuilds(int64_t job_id) = 0;
  // Stores a verified image (idempotent: an image already stored is kept).
  virtual absl::Status PutArtifact(const std::string& sha256, const std::string& data) = 0;
  // Records a verified image stored elsewhere (`location`: "s3", the object store; boards
  // fetch it by URL and ReadArtifact refuses it). Idempotent.
  virtual absl::Status RecordArtifact(const std::string& sha256, uint64_t bytes,
                                      const std::string& location) = 0;
  // The image's size, or NOT_FOUND.
  virtual absl::StatusOr<uint64_t> ArtifactBytes(const std::string& sha256) = 0;
  // Streams the image from `offset` in chunks (NOT_FOUND when unknown).
  virtual absl::Status ReadArtifact(
      const std::string& sha256, uint64_t offset,
      const std::function<absl::Status(const std::string& chunk, uint64_t at)>& sink) = 0;
};

// What /metrics shows, read on each scrape; and /readyz. A finished job's series medians
// are kept when it finishes; its comparisons are summarized afterwards (PendingComparisons,
// StoreComparisons) by the controller holding the duty lease, so a scrape never recomputes
// statistics over stored results.
class MetricsSource {
 public:
  virtual ~MetricsSource() = default;
  // With `known_series_version` (a MetricsSnapshot::series_version the caller has the
  // series of): when the series are still that version, `series` is left empty and
  // series_version says so.
  virtual absl::StatusOr<MetricsSnapshot> Snapshot(int64_t known_series_version = -1) = 0;
  // Up to `limit` finished multi-kernel jobs whose comparisons are not summarized for the
  // version they are at, newest first.
  virtual absl::StatusOr<std::vector<JobVersion>> PendingComparisons(int limit) = 0;
  // Stores (or replaces) a job's comparisons. Summaries of a version the job has left
  // (finished_ms differs from the job's now) are dropped: returns false then.
  virtual absl::StatusOr<bool> StoreComparisons(const JobComparisons& job) = 0;
  // The stored comparisons of that job version; NOT_FOUND when the job has none or another
  // version's.
  virtual absl::StatusOr<JobComparisons> LoadComparisons(const JobVersion& job) = 0;
  // Up to `limit` finished jobs whose phases are not recorded, oldest first, as timelines.
  virtual absl::StatusOr<std::vector<JobTimeline>> PendingPhases(int limit) = 0;
  // Records a finished job's phases; false when they were recorded already (by another
  // controller): the caller does not observe them then.
  virtual absl::StatusOr<bool> StorePhases(int64_t job_id,
                                           const std::vector<ArchPhases>& phases) = 0;
  // Cheap liveness check of the database and the schema.
  virtual absl::Status Ping() = 0;
};

// Every interface, as the api layer is wired (one implementation may serve several).
// Bisections: the API creates and cancels them; the duties' driver advances the running ones.
class BisectionStore {
 public:
  virtual ~BisectionStore() = default;
  // A new running bisection; with a request id already used, the first one (created false).
  struct Created {
    BisectionRecord record;
    bool created = false;
  };
  virtual absl::StatusOr<Created> CreateBisection(const std::string& request_id,
                                                  const std::string& doc_json) = 0;
  virtual absl::StatusOr<BisectionRecord> GetBisection(int64_t id) = 0;  // NOT_FOUND
  // Newest first; only running ones when asked.
  virtual absl::StatusOr<std::vector<BisectionRecord>> ListBisections(int limit,
                                                                      bool running_only) = 0;
  // The driver's progress; false (nothing written) when it is no longer running.
  virtual absl::StatusOr<bool> UpdateBisection(int64_t id, BisectionState state,
                                               const std::string& doc_json,
                                               int64_t current_job) = 0;
  // Running -> cancelled (a final one is returned as it is); NOT_FOUND.
  virtual absl::StatusOr<BisectionRecord> CancelBisection(int64_t id) = 0;
};

// The series robot's memory: where it is in the archive, the patch mails it keeps, and
// what it decided per series. Keeping a read's mails and moving the cursor past them is one
// transaction: a crash keeps both or neither, so no mail is read twice or lost.
class RobotStore {
 public:
  virtual ~RobotStore() = default;
  // Epoch -> the last commit read in `archive` (empty: nothing read yet).
  virtual absl::StatusOr<std::map<int, std::string>> Cursor(const std::string& archive) = 0;
  virtual absl::Status KeepMails(const std::string& archive, const std::vector<KeptMail>& mails,
                                 const std::map<int, std::string>& cursor) = 0;
  // The raw mails kept for a thread root and version, in arrival order.
  virtual absl::StatusOr<std::vector<std::string>> ThreadMails(const std::string& thread_root,
                                                               int version) = 0;
  virtual absl::StatusOr<std::optional<SeriesRecord>> GetSeries(const std::string& id) = 0;
  // Inserts or replaces the record (updated_ms is the store's clock).
  virtual absl::Status PutSeries(const SeriesRecord& series) = 0;
  // A chosen series as one mbox, assembled once by the intake: what its kernels are built
  // from. SeriesMbox is "" when none is stored (decided before mboxes were kept).
  virtual absl::Status PutSeriesMbox(const std::string& id, const std::string& mbox) = 0;
  virtual absl::StatusOr<std::string> SeriesMbox(const std::string& id) = 0;
  // Oldest first; only those in `state` when given.
  virtual absl::StatusOr<std::vector<SeriesRecord>> ListSeries(std::optional<SeriesState> state,
                                                               int limit) = 0;
  // The outbox. QueueReply stores a reply unless its (series, kind) has one: false then.
  virtual absl::StatusOr<bool> QueueReply(const ReplyRecord& reply) = 0;
  virtual absl::StatusOr<std::vector<ReplyRecord>> ListReplies(ReplyState state, int limit) = 0;
  // Moves a reply from `from` to `to` (sent: with the time); false when it was not in `from`.
  virtual absl::StatusOr<bool> MoveReply(const std::string& message_id, ReplyState from,
                                         ReplyState to) = 0;
  // Replies sent (or uncertain) since `since_ms`: the rate limit's count.
  virtual absl::StatusOr<int> RepliesSentSince(int64_t since_ms) = 0;
  // The checks' outbox. QueueChecks stores each unless its (patch, kind) has one; a verdict
  // supersedes its patch's pending check if that is still queued.
  virtual absl::Status QueueChecks(const std::vector<CheckRecord>& checks) = 0;
  // Queued checks due at `now_ms` (next_ms <= now_ms), oldest first.
  virtual absl::StatusOr<std::vector<CheckRecord>> DueChecks(int64_t now_ms, int limit) = 0;
  // Writes an attempt's outcome: status, attempts, error and next_ms.
  virtual absl::Status SettleCheck(const CheckRecord& check) = 0;
};

// The background duties (lease reaping, switch expiry, change points, schedules) run on
// one controller at a time: the one holding this lease, kept in the database and renewed on
// every pass. A controller that dies stops renewing; another takes over when it lapses.
class DutyLeaseStore {
 public:
  virtual ~DutyLeaseStore() = default;
  // Takes the lease for `holder` (when free or lapsed) or renews it (when `holder` has it),
  // for `ttl` from the database's now. True when `holder` holds it afterwards.
  virtual absl::StatusOr<bool> HoldDutyLease(const std::string& holder,
                                             std::chrono::seconds ttl) = 0;
  // Gives the lease up, if `holder` has it: another controller takes over on its next pass.
  virtual absl::Status ReleaseDutyLease(const std::string& holder) = 0;
};

struct Stores {
  JobStore* jobs = nullptr;
  WorkStore* work = nullptr;
  BoardStore* boards = nullptr;
  ScheduleStore* schedules = nullptr;
  HistoryStore* history = nullptr;
  TokenStore* tokens = nullptr;
  MetricsSource* metrics = nullptr;
  DutyLeaseStore* duty_lease = nullptr;  // none: this controller always runs the duties
  BuildStore* builds = nullptr;          // none: jobs cannot bring kernels
  BisectionStore* bisections = nullptr;  // none: no bisections
  RobotStore* robot = nullptr;           // none: no series robot
};

}  // namespace faultline::controller
