#pragma once
// In-memory fakes of the controller's store interfaces (services/controller/storage/
// interfaces.h) for unit tests of the api layer. They follow the PostgreSQL stores' contracts
// where a caller can tell (error codes, request-id idempotence, final jobs, due schedules),
// and are otherwise as simple as possible. Every fake is thread-safe: the dispatcher's thread
// and gRPC's threads may call them while a test inspects them.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"
#include "tests/support/fake_robot_store.h"

namespace faultline::controller::fakes {

// Boards as agents announce them. A hello settles a switch in flight with HealthAfterHello,
// as the PostgreSQL store does.
class FakeBoardStore final : public BoardStore {
 public:
  explicit FakeBoardStore(const Clock* clock) : clock_(clock) {}

  absl::StatusOr<HealthVerdict> UpsertBoard(const BoardRecord& board) override;
  absl::StatusOr<std::vector<BoardRecord>> ListBoards() override;
  // Records the call (the runs live in the job store, which this fake does not touch).
  absl::StatusOr<int> ReleaseBoardRuns(const std::string& board) override;
  absl::Status TouchBoard(const std::string& board) override;

  // Test set-up and inspection.
  void AddBoard(const BoardSummary& summary);  // as if it had said hello
  void SetSwitchInFlight(const std::string& board, SwitchInFlight in_flight);
  std::vector<std::string> released() const;
  int touches(const std::string& board) const;
  void SetUnavailable(bool unavailable);

 private:
  const Clock* clock_;
  mutable std::mutex mu_;
  std::map<std::string, BoardRecord> boards_;
  std::map<std::string, SwitchInFlight> in_flight_;
  std::vector<std::string> released_;
  std::map<std::string, int> touches_;
  bool unavailable_ = false;
};

// Jobs and their runs, created from ValidatedJob. A job's state follows its runs' states
// (JobStateFromRuns) unless it was cancelled.
class FakeJobStore final : public JobStore {
 public:
  explicit FakeJobStore(const Clock* clock) : clock_(clock) {}

  absl::StatusOr<Created> CreateJob(const ValidatedJob& job, const std::string& name,
                                    const std::string& spec_json,
                                    const std::string& request_id) override;
  absl::StatusOr<JobRecord> GetJob(int64_t job_id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(int limit) override;
  absl::StatusOr<std::vector<RunRecord>> ListRuns(int64_t job_id) override;
  absl::StatusOr<std::map<int64_t, std::vector<double>>> RunSamples(int64_t job_id) override;
  absl::StatusOr<JobRecord> CancelJob(int64_t job_id) override;
  // What SetTimeline set, else the job's creation, end and runs (by board, no arch).
  absl::StatusOr<JobTimeline> Timeline(int64_t job_id) override;

  // Test set-up and inspection.
  void SetTimeline(const JobTimeline& timeline);
  // A run's per-second rounds, as RunSamples answers them.
  void SetRunSamples(int64_t run_id, std::vector<double> samples);
  // Sets every run of the job to `state` (and the job's state from them, as the stores do).
  void SetRunStates(int64_t job_id, RunState state);
  // Applies `edit` to every run of the job (results, boards, ...), then recomputes its state.
  void EditRuns(int64_t job_id, const std::function<void(RunRecord&)>& edit);
  // The request id a job was created under ("" without one).
  std::string request_id(int64_t job_id) const;
  // The kernels a job brought to be built (ValidatedJob::builds), as created.
  std::vector<BuildRequest> builds(int64_t job_id) const;
  int create_calls() const;
  void SetUnavailable(bool unavailable);

 private:
  struct Job {
    JobRecord record;
    std::string request_id;
    std::vector<RunRecord> runs;
    std::vector<BuildRequest> builds;
    std::optional<JobTimeline> timeline;
  };
  JobRecord Snapshot(const Job& job) const;
  void Recompute(Job& job);
  int64_t NowMs() const { return clock_->NowMs(); }

  const Clock* clock_;
  std::map<int64_t, std::vector<double>> samples_;  // by run id
  mutable std::mutex mu_;
  std::map<int64_t, Job> jobs_;
  int64_t next_job_id_ = 1;
  int64_t next_run_id_ = 1;
  int create_calls_ = 0;
  bool unavailable_ = false;
};

// Work as the dispatcher and agents see it, scripted by the test: NextWork pops a queue of
// orders per board (an empty order when it is empty); every other call is recorded and
// answers what the test configured.
class FakeWorkStore final : public WorkStore {
 public:
  // One board's scripted step (and the OnNextWork hook).
  absl::StatusOr<WorkOrder> NextWork(const std::string& board);
  // Every board's NextWork in the order they asked, delivered as one group (or, with
  // DeliverEachBoardAlone, one group per board with orders, as the PostgreSQL store
  // delivers its groups). An error after some orders ends the call with those delivered.
  absl::Status DecideWorkForBoards(const std::vector<std::string>& boards,
                                   const OrderSink& deliver) override;
  absl::Status AbandonKernelSwitch(const std::string& board) override;
  absl::StatusOr<std::vector<std::string>> ExpireKernelSwitches() override;
  absl::StatusOr<bool> RenewLease(const std::string& board, int64_t run_id,
                                  const std::string& attempt_id) override;
  // Records each upload (after the OnStoreResult hook) and answers SetStoreResult's answer.
  std::vector<absl::StatusOr<int64_t>> StoreResults(
      const std::vector<ResultUpload>& uploads) override;
  absl::StatusOr<std::vector<int64_t>> ReapExpiredLeases() override;

  // Scripting.
  void Queue(const std::string& board, WorkOrder order);
  void DeliverEachBoardAlone(bool alone);
  // Every call fails with UNAVAILABLE (the database is down) until told otherwise.
  void SetUnavailable(bool unavailable);
  // Runs inside NextWork before it answers (e.g. to cancel the call being served).
  void OnNextWork(std::function<void(const std::string& board)> hook);
  // Runs before each upload is recorded (outside the store's lock).
  void OnStoreResult(std::function<void()> hook);
  void SetRenewLease(absl::StatusOr<bool> answer);
  void SetStoreResult(absl::StatusOr<int64_t> answer);
  void SetAbandonStatus(absl::Status status);
  // What the next ReapExpiredLeases / ExpireKernelSwitches return (once; then empty).
  void SetReaped(std::vector<int64_t> jobs);
  void SetLapsedSwitches(std::vector<std::string> boards);

  // Inspection.
  struct RenewCall {
    std::string board;
    int64_t run_id;
    std::string attempt_id;
  };
  struct ResultCall {
    std::string board;
    int64_t run_id;
    std::string attempt_id;
    bool succeeded;
    std::string failure_reason;
    ResultRecord result;
  };
  int next_work_calls() const;
  // Blocks until NextWork has been called at least `n` times (false after `timeout`, which
  // only guards against a hung test).
  bool WaitForNextWorkCalls(int n, std::chrono::milliseconds timeout);
  std::vector<std::string> abandoned() const;
  std::vector<RenewCall> renewals() const;
  std::vector<ResultCall> results() const;
  int reap_calls() const;
  size_t queued(const std::string& board) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<WorkOrder>> queues_;
  bool unavailable_ = false;
  bool deliver_alone_ = false;
  std::function<void(const std::string&)> on_next_work_;
  std::function<void()> on_store_result_;
  absl::StatusOr<bool> renew_answer_ = true;
  absl::StatusOr<int64_t> store_answer_ = int64_t{1};
  absl::Status abandon_status_;
  std::vector<int64_t> reaped_;
  std::vector<std::string> lapsed_;
  int next_work_calls_ = 0;
  std::vector<std::string> abandoned_;
  std::vector<RenewCall> renewals_;
  std::vector<ResultCall> results_;
  int reap_calls_ = 0;
};

// Schedules. FireDueSchedules fires, in slot order, every schedule whose next_run_ms is at
// or before now_ms and moves it to next_run_ms(schedule); a failed slot records its error and
// moves on just the same (as the PostgreSQL store).
class FakeScheduleStore final : public ScheduleStore {
 public:
  absl::StatusOr<ScheduleRecord> CreateSchedule(const std::string& name, const std::string& cron,
                                                const std::string& spec_json,
                                                int64_t next_run_ms) override;
  absl::StatusOr<std::vector<ScheduleRecord>> ListSchedules() override;
  absl::Status DeleteSchedule(int64_t id) override;
  absl::StatusOr<int> FireDueSchedules(
      int64_t now_ms, const Fire& fire,
      const std::function<int64_t(const ScheduleRecord&)>& next_run_ms) override;
  absl::Status TagJobWithSchedule(int64_t job_id, int64_t schedule_id) override;

  // Inspection.
  std::optional<ScheduleRecord> Find(int64_t id) const;
  std::map<int64_t, int64_t> tags() const;  // job id -> schedule id
  int fire_calls() const;                   // calls of `fire`, over all passes

 private:
  mutable std::mutex mu_;
  std::map<int64_t, ScheduleRecord> schedules_;
  int64_t next_id_ = 1;
  std::map<int64_t, int64_t> tags_;
  int fire_calls_ = 0;
};

// Series histories given by the test; change points kept once per (series, job).
class FakeHistoryStore final : public HistoryStore {
 public:
  absl::StatusOr<std::vector<SeriesHistory>> SeriesHistories(int min_points) override;
  absl::StatusOr<int> RecordChangePoints(const std::vector<ChangePointRecord>& points) override;
  absl::StatusOr<std::vector<ChangePointRecord>> ListChangePoints(bool include_closed) override;
  absl::StatusOr<ChangePointRecord> SetChangePointState(int64_t id,
                                                        ChangePointState state) override;

  void AddSeries(SeriesHistory history);
  int series_calls() const;

 private:
  mutable std::mutex mu_;
  std::vector<SeriesHistory> series_;
  std::vector<ChangePointRecord> points_;
  int64_t next_id_ = 1;
  int series_calls_ = 0;
};

// API tokens by hash.
class FakeTokenStore final : public TokenStore {
 public:
  absl::Status CreateToken(const std::string& name, TokenRole role, const std::string& board,
                           const std::string& token_sha256) override;
  absl::StatusOr<std::optional<TokenRecord>> FindToken(const std::string& token_sha256) override;
  absl::StatusOr<bool> RevokeToken(const std::string& name) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens() override;

  int find_calls() const;
  void SetUnavailable(bool unavailable);

 private:
  struct Token {
    TokenRecord record;
    std::string sha256;
  };
  mutable std::mutex mu_;
  std::map<std::string, Token> tokens_;  // by name
  int find_calls_ = 0;
  bool unavailable_ = false;
};

// Snapshot() is what SetSnapshot set (without its series when the caller knows their
// version), with the newest summarized job per (study, benchmark) as comparison_jobs. Jobs to
// summarize are declared with FinishJob.
class FakeMetricsSource final : public MetricsSource {
 public:
  absl::StatusOr<MetricsSnapshot> Snapshot(int64_t known_series_version = -1) override;
  absl::StatusOr<std::vector<JobVersion>> PendingComparisons(int limit) override;
  absl::StatusOr<bool> StoreComparisons(const JobComparisons& job) override;
  absl::StatusOr<JobComparisons> LoadComparisons(const JobVersion& job) override;
  absl::StatusOr<std::vector<JobTimeline>> PendingPhases(int limit) override;
  absl::StatusOr<bool> StorePhases(int64_t job_id, const std::vector<ArchPhases>& phases) override;
  absl::Status Ping() override;

  void SetSnapshot(MetricsSnapshot snapshot);
  // A finished job whose phases are to be recorded.
  void FinishTimeline(const JobTimeline& timeline);
  // What StorePhases recorded of the job (NOT_FOUND: nothing).
  absl::StatusOr<std::vector<ArchPhases>> phases(int64_t job_id) const;
  void SetPing(absl::Status status);
  // The job (multi-kernel, with results) finished at `finished_ms`: a version to summarize.
  void FinishJob(int64_t job_id, int64_t finished_ms);
  int loads() const;  // LoadComparisons calls answered

 private:
  mutable std::mutex mu_;
  MetricsSnapshot snapshot_;
  absl::Status ping_;
  std::map<int64_t, int64_t> finished_;          // job -> finished_ms
  std::map<int64_t, JobComparisons> summaries_;  // by job
  std::map<int64_t, JobTimeline> timelines_;     // finished, phases not recorded
  std::map<int64_t, std::vector<ArchPhases>> phases_;
  int loads_ = 0;
};

// An x86_64 board with 8 GiB, running `vanilla`, that can run `kernels`.
inline BoardSummary VanillaBoard(std::string name, std::vector<std::string> kernels) {
  return BoardSummary{.name = std::move(name),
                      .arch = "x86_64",
                      .memory_bytes = 8ull << 30,
                      .kernel_labels = std::move(kernels),
                      .running_kernel_label = "vanilla",
                      .running_kernel_labels = {"vanilla"}};
}

// The duty lease in memory, timed by the clock.
class FakeDutyLeaseStore final : public DutyLeaseStore {
 public:
  explicit FakeDutyLeaseStore(const Clock* clock) : clock_(clock) {}
  absl::StatusOr<bool> HoldDutyLease(const std::string& holder, std::chrono::seconds ttl) override {
    std::lock_guard lock(mu_);
    const auto now = clock_->Now();
    if (!holder_.empty() && holder_ != holder && expires_ >= now) return false;
    holder_ = holder;
    expires_ = now + ttl;
    return true;
  }
  absl::Status ReleaseDutyLease(const std::string& holder) override {
    std::lock_guard lock(mu_);
    if (holder_ == holder) holder_.clear();
    return absl::OkStatus();
  }

 private:
  const Clock* clock_;
  std::mutex mu_;
  std::string holder_;
  std::chrono::system_clock::time_point expires_{};
};

// One of each, wired as a Stores bundle.
// Without a clock of the test's, the fakes stamp times from one of their own (a fixed
// start, 2026-01-01 UTC), never 0.
// Bisections in a map, with the PostgreSQL store's rules: request-id idempotence, updates
// only while running, cancel leaves a final one as it is.
class FakeBisectionStore final : public BisectionStore {
 public:
  absl::StatusOr<Created> CreateBisection(const std::string& request_id,
                                          const std::string& doc_json) override {
    std::lock_guard lock(mu_);
    if (!request_id.empty()) {
      for (const auto& [id, b] : rows_) {
        if (request_ids_.at(id) == request_id) return Created{b, false};
      }
    }
    BisectionRecord b{.id = next_id_++, .state = BisectionState::kRunning, .doc_json = doc_json};
    rows_[b.id] = b;
    request_ids_[b.id] = request_id;
    return Created{b, true};
  }
  absl::StatusOr<BisectionRecord> GetBisection(int64_t id) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) return absl::NotFoundError(absl::StrCat("bisection ", id, " not found"));
    return it->second;
  }
  absl::StatusOr<std::vector<BisectionRecord>> ListBisections(int limit,
                                                              bool running_only) override {
    std::lock_guard lock(mu_);
    std::vector<BisectionRecord> out;
    for (auto it = rows_.rbegin(); it != rows_.rend() && static_cast<int>(out.size()) < limit;
         ++it) {
      if (!running_only || it->second.state == BisectionState::kRunning) out.push_back(it->second);
    }
    return out;
  }
  absl::StatusOr<bool> UpdateBisection(int64_t id, BisectionState state,
                                       const std::string& doc_json, int64_t current_job) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end() || it->second.state != BisectionState::kRunning) return false;
    it->second.state = state;
    it->second.doc_json = doc_json;
    it->second.current_job = current_job;
    return true;
  }
  absl::StatusOr<BisectionRecord> CancelBisection(int64_t id) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find(id);
    if (it == rows_.end()) return absl::NotFoundError(absl::StrCat("bisection ", id, " not found"));
    if (it->second.state == BisectionState::kRunning) it->second.state = BisectionState::kCancelled;
    return it->second;
  }

 private:
  std::mutex mu_;
  std::map<int64_t, BisectionRecord> rows_;
  std::map<int64_t, std::string> request_ids_;
  int64_t next_id_ = 1;
};

struct FakeStores {
  explicit FakeStores(const Clock* clock = nullptr)
      : boards(clock != nullptr ? clock : &own_clock),
        jobs(clock != nullptr ? clock : &own_clock),
        robot(clock != nullptr ? clock : &own_clock) {}
  FakeClock own_clock{std::chrono::system_clock::time_point(std::chrono::seconds(1767225600))};
  FakeBoardStore boards;
  FakeJobStore jobs;
  FakeWorkStore work;
  FakeScheduleStore schedules;
  FakeHistoryStore history;
  FakeTokenStore tokens;
  FakeMetricsSource metrics;
  FakeBisectionStore bisections;
  FakeRobotStore robot;
  Stores stores() {
    Stores s{&jobs, &work, &boards, &schedules, &history, &tokens, &metrics};
    s.bisections = &bisections;
    s.robot = &robot;
    return s;
  }
};

}  // namespace faultline::controller::fakes
