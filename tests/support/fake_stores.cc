// In-memory fakes of every store interface (storage/interfaces.h). Kept in one file on
// purpose although it passes our ~600-line guide: the fakes share one job/run model (a
// cancelled job, a stored result and the work queue must agree), like the one database the
// PostgreSQL stores share.
#include "tests/support/fake_stores.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace faultline::controller::fakes {
namespace {

absl::Status Unavailable() {
  return absl::UnavailableError("fake store: database unavailable");
}

}  // namespace

// ---- FakeBoardStore ----

absl::StatusOr<HealthVerdict> FakeBoardStore::UpsertBoard(const BoardRecord& board) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  BoardSummary hello = board.summary;
  if (hello.running_kernel_labels.empty() && !hello.running_kernel_label.empty()) {
    hello.running_kernel_labels.push_back(hello.running_kernel_label);
  }
  std::optional<SwitchInFlight> in_flight;
  if (auto it = in_flight_.find(hello.name); it != in_flight_.end()) {
    in_flight = it->second;
    in_flight_.erase(it);
  }
  HealthVerdict health = HealthAfterHello(in_flight, hello);
  BoardRecord& stored = boards_[hello.name];
  const uint64_t switches = stored.summary.kernel_switches;
  stored = board;
  stored.summary = hello;
  stored.summary.health = health.health;
  stored.summary.health_reason = health.reason;
  stored.summary.kernel_switches = switches;
  stored.last_seen_ms = clock_->NowMs();
  stored.online = true;
  return health;
}

absl::StatusOr<std::vector<BoardRecord>> FakeBoardStore::ListBoards() {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  std::vector<BoardRecord> out;
  for (const auto& [name, b] : boards_) out.push_back(b);  // by name, as the real one
  return out;
}

absl::StatusOr<int> FakeBoardStore::ReleaseBoardRuns(const std::string& board) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  released_.push_back(board);
  return 0;
}

absl::Status FakeBoardStore::TouchBoard(const std::string& board) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  auto it = boards_.find(board);
  if (it == boards_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("board '", board, "' has not said hello"));
  }
  it->second.last_seen_ms = clock_->NowMs();
  ++touches_[board];
  return absl::OkStatus();
}

void FakeBoardStore::AddBoard(const BoardSummary& summary) {
  BoardRecord record;
  record.summary = summary;
  record.facts_json = "{}";
  std::lock_guard lock(mu_);
  record.last_seen_ms = clock_->NowMs();
  record.online = true;
  boards_[summary.name] = record;
}

void FakeBoardStore::SetSwitchInFlight(const std::string& board, SwitchInFlight in_flight) {
  std::lock_guard lock(mu_);
  in_flight_[board] = std::move(in_flight);
}

std::vector<std::string> FakeBoardStore::released() const {
  std::lock_guard lock(mu_);
  return released_;
}

int FakeBoardStore::touches(const std::string& board) const {
  std::lock_guard lock(mu_);
  auto it = touches_.find(board);
  return it == touches_.end() ? 0 : it->second;
}

void FakeBoardStore::SetUnavailable(bool unavailable) {
  std::lock_guard lock(mu_);
  unavailable_ = unavailable;
}

// ---- FakeJobStore ----

absl::StatusOr<JobStore::Created> FakeJobStore::CreateJob(const ValidatedJob& job,
                                                          const std::string& name,
                                                          const std::string& spec_json,
                                                          const std::string& request_id) {
  std::lock_guard lock(mu_);
  ++create_calls_;
  if (unavailable_) return Unavailable();
  if (!request_id.empty()) {
    for (const auto& [id, existing] : jobs_) {
      if (existing.request_id != request_id) continue;
      // The real store compares digests of the spec; equal text is equal digests.
      if (existing.record.spec_json != spec_json) {
        return absl::AlreadyExistsError(absl::StrCat(
            "request_id '", request_id, "' was used for job ", id, " with another spec"));
      }
      return Created{id, false};
    }
  }
  Job stored;
  stored.request_id = request_id;
  stored.builds = job.builds;
  JobRecord& r = stored.record;
  r.id = next_job_id_++;
  r.name = name;
  r.benchmark = job.benchmark;
  r.spec_json = spec_json;
  for (const auto& [key, values] : job.matrix) r.matrix_keys.push_back(key);
  r.state = JobState::kQueued;
  r.created_at_ms = NowMs();
  r.baseline = job.baseline;
  r.alpha = job.alpha;
  r.min_effect = job.min_effect;
  r.shuffle_seed = job.shuffle_seed;
  for (const auto& planned : job.runs) {
    RunRecord run;
    run.id = next_run_id_++;
    run.job_id = r.id;
    run.cell_index = planned.cell_index;
    for (const auto& [k, v] : planned.cell) run.cell[k] = v;
    run.kernel = planned.kernel;
    run.repetition = planned.repetition;
    run.state = RunState::kQueued;
    stored.runs.push_back(std::move(run));
  }
  const int64_t id = r.id;
  jobs_.emplace(id, std::move(stored));
  return Created{id, true};
}

JobRecord FakeJobStore::Snapshot(const Job& job) const {
  JobRecord r = job.record;
  r.counts = RunCounts{};
  for (const auto& run : job.runs) {
    ++r.counts.total;
    switch (run.state) {
      case RunState::kQueued:
        ++r.counts.queued;
        break;
      case RunState::kAssigned:
        ++r.counts.assigned;
        break;
      case RunState::kRunning:
        ++r.counts.running;
        break;
      case RunState::kSucceeded:
        ++r.counts.succeeded;
        break;
      case RunState::kFailed:
        ++r.counts.failed;
        break;
      case RunState::kCancelled:
        ++r.counts.cancelled;
        break;
    }
  }
  return r;
}

void FakeJobStore::Recompute(Job& job) {
  if (job.record.state == JobState::kCancelled) return;
  int open = 0, started = 0, failed = 0;
  for (const auto& run : job.runs) {
    if (IsOpen(run.state)) ++open;
    if (run.state != RunState::kQueued) ++started;
    if (run.state == RunState::kFailed) ++failed;
  }
  job.record.state = JobStateFromRuns(open, started, failed);
  if (open == 0) {
    if (job.record.finished_at_ms == 0) job.record.finished_at_ms = NowMs();
  } else {
    job.record.finished_at_ms = 0;
  }
}

absl::StatusOr<JobRecord> FakeJobStore::GetJob(int64_t job_id) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return Snapshot(it->second);
}

absl::StatusOr<std::vector<JobRecord>> FakeJobStore::ListJobs(int limit) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  std::vector<JobRecord> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend() && static_cast<int>(out.size()) < limit; ++it) {
    out.push_back(Snapshot(it->second));
  }
  return out;
}

absl::StatusOr<std::vector<RunRecord>> FakeJobStore::ListRuns(int64_t job_id) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  std::vector<RunRecord> out;
  if (auto it = jobs_.find(job_id); it != jobs_.end()) out = it->second.runs;
  std::sort(out.begin(), out.end(), [](const RunRecord& a, const RunRecord& b) {
    return std::tie(a.cell_index, a.kernel, a.repetition) <
           std::tie(b.cell_index, b.kernel, b.repetition);
  });
  return out;
}

absl::StatusOr<std::map<int64_t, std::vector<double>>> FakeJobStore::RunSamples(int64_t job_id) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  std::map<int64_t, std::vector<double>> out;
  if (auto it = jobs_.find(job_id); it != jobs_.end()) {
    for (const RunRecord& r : it->second.runs) {
      if (auto s = samples_.find(r.id); s != samples_.end() && r.has_result) out[r.id] = s->second;
    }
  }
  return out;
}

void FakeJobStore::SetRunSamples(int64_t run_id, std::vector<double> samples) {
  std::lock_guard lock(mu_);
  samples_[run_id] = std::move(samples);
}

absl::StatusOr<JobRecord> FakeJobStore::CancelJob(int64_t job_id) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  Job& job = it->second;
  if (IsFinal(job.record.state)) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is already ",
                                                      std::string(ToString(job.record.state)),
                                                      "; nothing to cancel"));
  }
  for (auto& run : job.runs) {
    if (IsOpen(run.state)) run.state = RunState::kCancelled;
  }
  job.record.state = JobState::kCancelled;
  job.record.finished_at_ms = NowMs();
  return Snapshot(job);
}

absl::StatusOr<JobTimeline> FakeJobStore::Timeline(int64_t job_id) {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  if (it->second.timeline) return *it->second.timeline;
  JobTimeline t;
  t.job_id = job_id;
  t.created_ms = it->second.record.created_at_ms;
  t.finished_ms = it->second.record.finished_at_ms;
  for (const RunRecord& r : it->second.runs) {
    t.runs.push_back({"", r.board, 0, r.finished_ms});
  }
  return t;
}

void FakeJobStore::SetTimeline(const JobTimeline& timeline) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(timeline.job_id);
  if (it != jobs_.end()) it->second.timeline = timeline;
}

void FakeJobStore::SetRunStates(int64_t job_id, RunState state) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  for (auto& run : it->second.runs) run.state = state;
  Recompute(it->second);
}

void FakeJobStore::EditRuns(int64_t job_id, const std::function<void(RunRecord&)>& edit) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  for (auto& run : it->second.runs) edit(run);
  Recompute(it->second);
}

std::string FakeJobStore::request_id(int64_t job_id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? std::string() : it->second.request_id;
}

std::vector<BuildRequest> FakeJobStore::builds(int64_t job_id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? std::vector<BuildRequest>{} : it->second.builds;
}

int FakeJobStore::create_calls() const {
  std::lock_guard lock(mu_);
  return create_calls_;
}

void FakeJobStore::SetUnavailable(bool unavailable) {
  std::lock_guard lock(mu_);
  unavailable_ = unavailable;
}

// ---- FakeWorkStore ----

absl::StatusOr<WorkOrder> FakeWorkStore::NextWork(const std::string& board) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard lock(mu_);
    hook = on_next_work_;
  }
  if (hook) hook(board);  // outside the lock: the hook may call back into the store
  std::lock_guard lock(mu_);
  ++next_work_calls_;
  cv_.notify_all();
  if (unavailable_) return Unavailable();
  auto& queue = queues_[board];
  if (queue.empty()) return WorkOrder{};
  WorkOrder order = std::move(queue.front());
  queue.pop_front();
  return order;
}

absl::Status FakeWorkStore::DecideWorkForBoards(const std::vector<std::string>& boards,
                                                const OrderSink& deliver) {
  bool alone;
  {
    std::lock_guard lock(mu_);
    alone = deliver_alone_;
  }
  BoardOrders group;
  absl::Status status = absl::OkStatus();
  for (const auto& board : boards) {
    auto next = NextWork(board);
    if (!next.ok()) {
      status = next.status();
      break;
    }
    if (!next->run && !next->kernel_switch) continue;
    group.emplace_back(board, *std::move(next));
    if (alone) deliver(std::exchange(group, {}));
  }
  if (!group.empty()) deliver(std::move(group));
  return status;
}

void FakeWorkStore::DeliverEachBoardAlone(bool alone) {
  std::lock_guard lock(mu_);
  deliver_alone_ = alone;
}

absl::Status FakeWorkStore::AbandonKernelSwitch(const std::string& board) {
  std::lock_guard lock(mu_);
  abandoned_.push_back(board);
  if (unavailable_) return Unavailable();
  return abandon_status_;
}

absl::StatusOr<std::vector<std::string>> FakeWorkStore::ExpireKernelSwitches() {
  std::lock_guard lock(mu_);
  if (unavailable_) return Unavailable();
  return std::exchange(lapsed_, {});
}

absl::StatusOr<bool> FakeWorkStore::RenewLease(const std::string& board, int64_t run_id,
                                               const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  renewals_.push_back({board, run_id, attempt_id});
  if (unavailable_) return Unavailable();
  return renew_answer_;
}

std::vector<absl::StatusOr<int64_t>> FakeWorkStore::StoreResults(
    const std::vector<ResultUpload>& uploads) {
  std::vector<absl::StatusOr<int64_t>> answers;
  for (const ResultUpload& u : uploads) {
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      hook = on_store_result_;
    }
    if (hook) hook();
    std::lock_guard lock(mu_);
    results_.push_back({u.board, u.run_id, u.attempt_id, u.succeeded, u.failure_reason, u.result});
    answers.push_back(unavailable_ ? absl::StatusOr<int64_t>(Unavailable()) : store_answer_);
  }
  return answers;
}

absl::StatusOr<std::vector<int64_t>> FakeWorkStore::ReapExpiredLeases() {
  std::lock_guard lock(mu_);
  ++reap_calls_;
  if (unavailable_) return Unavailable();
  return std::exchange(reaped_, {});
}

void FakeWorkStore::Queue(const std::string& board, WorkOrder order) {
  std::lock_guard lock(mu_);
  queues_[board].push_back(std::move(order));
}

void FakeWorkStore::SetUnavailable(bool unavailable) {
  std::lock_guard lock(mu_);
  unavailable_ = unavailable;
}

void FakeWorkStore::OnStoreResult(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  on_store_result_ = std::move(hook);
}

void FakeWorkStore::OnNextWork(std::function<void(const std::string&)> hook) {
  std::lock_guard lock(mu_);
  on_next_work_ = std::move(hook);
}

void FakeWorkStore::SetRenewLease(absl::StatusOr<bool> answer) {
  std::lock_guard lock(mu_);
  renew_answer_ = std::move(answer);
}

void FakeWorkStore::SetStoreResult(absl::StatusOr<int64_t> answer) {
  std::lock_guard lock(mu_);
  store_answer_ = std::move(answer);
}

void FakeWorkStore::SetAbandonStatus(absl::Status status) {
  std::lock_guard lock(mu_);
  abandon_status_ = std::move(status);
}

void FakeWorkStore::SetReaped(std::vector<int64_t> jobs) {
  std::lock_guard lock(mu_);
  reaped_ = std::move(jobs);
}

void FakeWorkStore::SetLapsedSwitches(std::vector<std::string> boards) {
  std::lock_guard lock(mu_);
  lapsed_ = std::move(boards);
}

int FakeWorkStore::next_work_calls() const {
  std::lock_guard lock(mu_);
  return next_work_calls_;
}

bool FakeWorkStore::WaitForNextWorkCalls(int n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return next_work_calls_ >= n; });
}

std::vector<std::string> FakeWorkStore::abandoned() const {
  std::lock_guard lock(mu_);
  return abandoned_;
}

std::vector<FakeWorkStore::RenewCall> FakeWorkStore::renewals() const {
  std::lock_guard lock(mu_);
  return renewals_;
}

std::vector<FakeWorkStore::ResultCall> FakeWorkStore::results() const {
  std::lock_guard lock(mu_);
  return results_;
}

int FakeWorkStore::reap_calls() const {
  std::lock_guard lock(mu_);
  return reap_calls_;
}

size_t FakeWorkStore::queued(const std::string& board) const {
  std::lock_guard lock(mu_);
  auto it = queues_.find(board);
  return it == queues_.end() ? 0 : it->second.size();
}

// ---- FakeScheduleStore ----

absl::StatusOr<ScheduleRecord> FakeScheduleStore::CreateSchedule(const std::string& name,
                                                                 const std::string& cron,
                                                                 const std::string& spec_json,
                                                                 int64_t next_run_ms) {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : schedules_) {
    if (s.name == name) {
      return absl::AlreadyExistsError(absl::StrCat("a schedule named '", name, "' exists"));
    }
  }
  ScheduleRecord s;
  s.id = next_id_++;
  s.name = name;
  s.cron = cron;
  s.spec_json = spec_json;
  s.next_run_ms = next_run_ms;
  schedules_[s.id] = s;
  return s;
}

absl::StatusOr<std::vector<ScheduleRecord>> FakeScheduleStore::ListSchedules() {
  std::lock_guard lock(mu_);
  std::vector<ScheduleRecord> out;
  for (const auto& [id, s] : schedules_) out.push_back(s);
  return out;
}

absl::Status FakeScheduleStore::DeleteSchedule(int64_t id) {
  std::lock_guard lock(mu_);
  if (schedules_.erase(id) == 0) {
    return absl::NotFoundError(absl::StrCat("schedule ", id, " not found"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> FakeScheduleStore::FireDueSchedules(
    int64_t now_ms, const Fire& fire,
    const std::function<int64_t(const ScheduleRecord&)>& next_run_ms) {
  std::vector<ScheduleRecord> due;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : schedules_) {
      if (s.next_run_ms <= now_ms) due.push_back(s);
    }
  }
  std::stable_sort(due.begin(), due.end(), [](const ScheduleRecord& a, const ScheduleRecord& b) {
    return a.next_run_ms < b.next_run_ms;
  });
  int fired = 0;
  // `fire` runs without the lock: it tags the job through this store.
  for (const auto& sched : due) {
    auto job = fire(sched);
    const int64_t next = next_run_ms(sched);
    std::lock_guard lock(mu_);
    ++fire_calls_;
    auto it = schedules_.find(sched.id);
    if (it == schedules_.end()) continue;
    ScheduleRecord& s = it->second;
    s.last_run_ms = now_ms;
    s.next_run_ms = next;
    if (job.ok()) {
      ++fired;
      s.last_job_id = *job;
      s.last_error.clear();
    } else {
      s.last_error = std::string(job.status().message());
    }
  }
  return fired;
}

absl::Status FakeScheduleStore::TagJobWithSchedule(int64_t job_id, int64_t schedule_id) {
  std::lock_guard lock(mu_);
  tags_[job_id] = schedule_id;
  return absl::OkStatus();
}

std::optional<ScheduleRecord> FakeScheduleStore::Find(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = schedules_.find(id);
  if (it == schedules_.end()) return std::nullopt;
  return it->second;
}

std::map<int64_t, int64_t> FakeScheduleStore::tags() const {
  std::lock_guard lock(mu_);
  return tags_;
}

int FakeScheduleStore::fire_calls() const {
  std::lock_guard lock(mu_);
  return fire_calls_;
}

// ---- FakeHistoryStore ----

absl::StatusOr<std::vector<SeriesHistory>> FakeHistoryStore::SeriesHistories(int min_points) {
  std::lock_guard lock(mu_);
  ++series_calls_;
  std::vector<SeriesHistory> out;
  for (const auto& h : series_) {
    if (static_cast<int>(h.medians.size()) >= min_points) out.push_back(h);
  }
  return out;
}

absl::StatusOr<int> FakeHistoryStore::RecordChangePoints(
    const std::vector<ChangePointRecord>& points) {
  std::lock_guard lock(mu_);
  auto key = [](const ChangePointRecord& p) {
    return std::tie(p.study, p.benchmark, p.config, p.arch, p.board, p.kernel, p.job_id);
  };
  int added = 0;
  for (const auto& p : points) {
    bool known = std::any_of(points_.begin(), points_.end(),
                             [&](const ChangePointRecord& q) { return key(q) == key(p); });
    if (known) continue;
    ChangePointRecord stored = p;
    stored.id = next_id_++;
    stored.state = ChangePointState::kOpen;
    points_.push_back(std::move(stored));
    ++added;
  }
  return added;
}

absl::StatusOr<std::vector<ChangePointRecord>> FakeHistoryStore::ListChangePoints(
    bool include_closed) {
  std::lock_guard lock(mu_);
  std::vector<ChangePointRecord> out;
  for (const auto& p : points_) {
    if (include_closed || p.state == ChangePointState::kOpen ||
        p.state == ChangePointState::kAcknowledged) {
      out.push_back(p);
    }
  }
  return out;
}

absl::StatusOr<ChangePointRecord> FakeHistoryStore::SetChangePointState(int64_t id,
                                                                        ChangePointState state) {
  std::lock_guard lock(mu_);
  for (auto& p : points_) {
    if (p.id == id) {
      p.state = state;
      return p;
    }
  }
  return absl::NotFoundError(absl::StrCat("change point ", id, " not found"));
}

void FakeHistoryStore::AddSeries(SeriesHistory history) {
  std::lock_guard lock(mu_);
  series_.push_back(std::move(history));
}

int FakeHistoryStore::series_calls() const {
  std::lock_guard lock(mu_);
  return series_calls_;
}

// ---- FakeTokenStore ----

absl::Status FakeTokenStore::CreateToken(const std::string& name, TokenRole role,
                                         const std::string& board,
                                         const std::string& token_sha256) {
  std::lock_guard lock(mu_);
  if (tokens_.count(name)) {
    return absl::AlreadyExistsError(absl::StrCat("a token named '", name, "' exists"));
  }
  Token t;
  t.record.name = name;
  t.record.role = role;
  t.record.board = board;
  t.sha256 = token_sha256;
  tokens_[name] = std::move(t);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<TokenRecord>> FakeTokenStore::FindToken(
    const std::string& token_sha256) {
  std::lock_guard lock(mu_);
  ++find_calls_;
  if (unavailable_) return Unavailable();
  for (const auto& [name, t] : tokens_) {
    if (t.sha256 == token_sha256 && !t.record.revoked) return std::optional<TokenRecord>(t.record);
  }
  return std::optional<TokenRecord>();
}

absl::StatusOr<bool> FakeTokenStore::RevokeToken(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = tokens_.find(name);
  if (it == tokens_.end() || it->second.record.revoked) return false;
  it->second.record.revoked = true;
  return true;
}

absl::StatusOr<std::vector<TokenRecord>> FakeTokenStore::ListTokens() {
  std::lock_guard lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [name, t] : tokens_) out.push_back(t.record);
  return out;
}

int FakeTokenStore::find_calls() const {
  std::lock_guard lock(mu_);
  return find_calls_;
}

void FakeTokenStore::SetUnavailable(bool unavailable) {
  std::lock_guard lock(mu_);
  unavailable_ = unavailable;
}

// ---- FakeMetricsSource ----

absl::StatusOr<MetricsSnapshot> FakeMetricsSource::Snapshot(int64_t known_series_version) {
  std::lock_guard lock(mu_);
  if (!ping_.ok()) return ping_;
  MetricsSnapshot out = snapshot_;
  if (out.series_version >= 0 && out.series_version == known_series_version) out.series.clear();
  std::map<std::pair<std::string, std::string>, const JobComparisons*> newest;
  for (const auto& [id, job] : summaries_) newest[{job.study, job.benchmark}] = &job;  // id order
  for (const auto& [key, job] : newest)
    out.comparison_jobs.push_back({job->job_id, job->finished_ms});
  return out;
}

absl::StatusOr<std::vector<JobVersion>> FakeMetricsSource::PendingComparisons(int limit) {
  std::lock_guard lock(mu_);
  if (!ping_.ok()) return ping_;
  std::vector<JobVersion> out;
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it) {
    auto kept = summaries_.find(it->first);
    if (kept != summaries_.end() && kept->second.finished_ms == it->second) continue;
    if (static_cast<int>(out.size()) == limit) break;
    out.push_back({it->first, it->second});
  }
  return out;
}

absl::StatusOr<bool> FakeMetricsSource::StoreComparisons(const JobComparisons& job) {
  std::lock_guard lock(mu_);
  if (!ping_.ok()) return ping_;
  auto it = finished_.find(job.job_id);
  if (it == finished_.end() || it->second != job.finished_ms) return false;
  summaries_[job.job_id] = job;
  return true;
}

absl::StatusOr<JobComparisons> FakeMetricsSource::LoadComparisons(const JobVersion& job) {
  std::lock_guard lock(mu_);
  if (!ping_.ok()) return ping_;
  auto it = summaries_.find(job.job_id);
  if (it == summaries_.end() || it->second.finished_ms != job.finished_ms) {
    return absl::NotFoundError("no such summary");
  }
  ++loads_;
  return it->second;
}

int FakeMetricsSource::loads() const {
  std::lock_guard lock(mu_);
  return loads_;
}

void FakeMetricsSource::FinishJob(int64_t job_id, int64_t finished_ms) {
  std::lock_guard lock(mu_);
  finished_[job_id] = finished_ms;
}

absl::StatusOr<std::vector<JobTimeline>> FakeMetricsSource::PendingPhases(int limit) {
  std::lock_guard lock(mu_);
  std::vector<JobTimeline> out;
  for (const auto& [id, t] : timelines_) {
    if (static_cast<int>(out.size()) >= limit) break;
    if (!phases_.count(id)) out.push_back(t);
  }
  return out;
}

absl::StatusOr<bool> FakeMetricsSource::StorePhases(int64_t job_id,
                                                    const std::vector<ArchPhases>& phases) {
  std::lock_guard lock(mu_);
  if (!timelines_.count(job_id) || phases_.count(job_id)) return false;
  phases_[job_id] = phases;
  return true;
}

void FakeMetricsSource::FinishTimeline(const JobTimeline& timeline) {
  std::lock_guard lock(mu_);
  timelines_[timeline.job_id] = timeline;
}

absl::StatusOr<std::vector<ArchPhases>> FakeMetricsSource::phases(int64_t job_id) const {
  std::lock_guard lock(mu_);
  auto it = phases_.find(job_id);
  if (it == phases_.end()) return absl::NotFoundError(absl::StrCat("no phases of job ", job_id));
  return it->second;
}

absl::Status FakeMetricsSource::Ping() {
  std::lock_guard lock(mu_);
  return ping_;
}

void FakeMetricsSource::SetSnapshot(MetricsSnapshot snapshot) {
  std::lock_guard lock(mu_);
  snapshot_ = std::move(snapshot);
}

void FakeMetricsSource::SetPing(absl::Status status) {
  std::lock_guard lock(mu_);
  ping_ = std::move(status);
}

}  // namespace faultline::controller::fakes
