#include "services/controller/orchestration/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "faultline/v1/job_states.h"
#include "google/protobuf/util/message_differencer.h"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/duties.h"

namespace faultline::controller {

v1::JobProgress ProgressFromJob(const JobRecord& job) {
  v1::Job proto;
  JobToProto(job, &proto);
  v1::JobProgress p;
  p.set_job_id(job.id);
  p.set_state(proto.state());
  *p.mutable_runs() = proto.runs();
  return p;
}

void AcquireReactor::OnCancel() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (!parked_) return;  // still being checked: ParkUnless ends it
  }
  dispatcher_->Unpark(this);
}

void AcquireReactor::ParkUnless(const grpc::Status& checked) {
  bool park = false;
  bool cancelled = false;
  {
    std::lock_guard lock(mu_);
    cancelled = cancelled_;
    park = parked_ = checked.ok() && !cancelled;
  }
  if (!park) {
    Finish(cancelled ? grpc::Status::CANCELLED : checked);
    return;
  }
  // A cancel between the lock and Park finds nothing to unpark: the call then ends at its
  // deadline (at most Dispatcher::kMaxWait), like one cancelled while its run is claimed.
  dispatcher_->Park(this);
}

void AcquireReactor::Answer(const WorkOrder& order) {
  if (order.kernel_switch) {
    auto* sw = response_->mutable_switch_kernel();
    sw->set_label(order.kernel_switch->label);
    sw->set_reason(order.kernel_switch->reason);
    sw->set_deadline_seconds(order.kernel_switch->deadline_seconds);
    if (const auto& built = order.kernel_switch->built) {
      sw->mutable_built()->set_build_id(built->build_id);
      sw->mutable_built()->set_image_sha256(built->image_sha256);
      sw->mutable_built()->set_image_bytes(built->image_bytes);
      sw->mutable_built()->set_release(built->release);
      if (built->location == "s3")
        sw->mutable_built()->set_url(dispatcher_->ArtifactUrl(built->image_sha256));
    }
  } else if (order.run) {
    AssignmentToProto(*order.run, response_->mutable_assignment());
  }
  Finish(grpc::Status::OK);
}

void WatchReactor::Push(const v1::JobProgress& progress) {
  std::unique_lock lock(mu_);
  if (finished_ || finish_after_write_) return;
  const v1::JobProgress& reference = has_pending_ ? pending_ : last_;
  if ((has_pending_ || has_last_) &&
      google::protobuf::util::MessageDifferencer::Equals(reference, progress)) {
    return;
  }
  bool final_state = v1::IsFinal(progress.state());
  if (writing_) {
    pending_ = progress;
    has_pending_ = true;
    if (final_state) finish_after_write_ = true;
    return;
  }
  writing_ = true;
  current_ = progress;
  last_ = progress;
  has_last_ = true;
  if (final_state) finish_after_write_ = true;
  lock.unlock();
  StartWrite(&current_);
}

void WatchReactor::OnWriteDone(bool ok) {
  std::unique_lock lock(mu_);
  writing_ = false;
  if (!ok) {
    if (!finished_) {
      finished_ = true;
      lock.unlock();
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream write failed"));
    }
    return;
  }
  if (has_pending_) {
    has_pending_ = false;
    writing_ = true;
    current_ = pending_;
    last_ = pending_;
    lock.unlock();
    StartWrite(&current_);
    return;
  }
  if (finish_after_write_ && !finished_) {
    finished_ = true;
    lock.unlock();
    Finish(grpc::Status::OK);
  }
}

void WatchReactor::FinishWith(const grpc::Status& status) {
  std::unique_lock lock(mu_);
  if (finished_) return;
  finished_ = true;
  lock.unlock();
  Finish(status);
}

void WatchReactor::OnCancel() {
  FinishWith(grpc::Status::CANCELLED);
}

void WatchReactor::OnDone() {
  dispatcher_->RemoveWatcher(this);
  delete this;
}

Answerer::Answerer(std::function<void(int64_t)> job_changed)
    : job_changed_(std::move(job_changed)), thread_([this] { Loop(); }) {}

Answerer::~Answerer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();  // answers every group still queued first: each holds a live gRPC call
}

void Answerer::Post(std::vector<Answer> group) {
  {
    std::lock_guard lock(mu_);
    groups_.push_back(std::move(group));
  }
  cv_.notify_all();
}

void Answerer::WaitIdle() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return groups_.empty() && !busy_; });
}

void Answerer::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !groups_.empty(); });
    if (groups_.empty()) return;  // stopping, nothing left
    std::vector<Answer> group = std::move(groups_.front());
    groups_.pop_front();
    busy_ = true;
    lock.unlock();
    // The answers first (each may write to its connection), then the log and the watchers.
    for (auto& a : group) a.call->Answer(a.order);
    std::set<int64_t> jobs;
    for (const auto& a : group) {
      if (a.order.kernel_switch) {
        const KernelSwitchOrder& order = *a.order.kernel_switch;
        log::info("event=kernel_switch_ordered board={} label={} reason=\"{}\"", a.board,
                  order.label, order.reason);
      } else if (a.order.run) {
        const Assignment& r = *a.order.run;
        log::info("event=run_assigned run={} job={} board={} kernel={} attempt_id={}", r.run_id,
                  r.job_id, a.board, r.kernel, r.attempt_id);
        jobs.insert(r.job_id);
      }
    }
    for (int64_t job : jobs) job_changed_(job);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

Dispatcher::Dispatcher(WorkStore* work, JobStore* jobs, const Clock* clock,
                       BackgroundDuties* duties)
    : work_(work), jobs_(jobs), clock_(clock), duties_(duties), answerer_([this](int64_t job_id) {
        JobChanged(job_id);
      }) {}

Dispatcher::~Dispatcher() {
  Stop();
}

void Dispatcher::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Dispatcher::Stop() {
  std::deque<ParkedCall*> parked;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    parked.swap(parked_);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  const grpc::Status stopping(grpc::StatusCode::UNAVAILABLE, "controller stopping");
  for (auto* call : parked) call->Fail(stopping);
  std::set<ProgressWatcher*> watchers;
  {
    std::lock_guard lock(mu_);
    watchers = watchers_;
  }
  for (auto* w : watchers) w->FinishWith(stopping);
}

void Dispatcher::Park(ParkedCall* call) {
  bool stopping;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
    if (!stopping) {
      parked_.push_back(call);
      work_hint_ = true;
    }
  }
  if (stopping) {
    call->Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller stopping"));
    return;
  }
  cv_.notify_all();
}

void Dispatcher::Unpark(ParkedCall* call) {
  bool found = false;
  {
    std::lock_guard lock(mu_);
    auto it = std::find(parked_.begin(), parked_.end(), call);
    if (it != parked_.end()) {
      parked_.erase(it);
      found = true;
    }
  }
  if (found) call->Fail(grpc::Status::CANCELLED);
}

void Dispatcher::AddWatcher(ProgressWatcher* watcher) {
  {
    std::lock_guard lock(mu_);
    watchers_.insert(watcher);
    changed_jobs_.insert(watcher->job_id());
  }
  cv_.notify_all();
}

void Dispatcher::RemoveWatcher(ProgressWatcher* watcher) {
  std::lock_guard lock(mu_);
  watchers_.erase(watcher);
}

void Dispatcher::WorkAvailable() {
  {
    std::lock_guard lock(mu_);
    work_hint_ = true;
  }
  cv_.notify_all();
}

void Dispatcher::JobChanged(int64_t job_id) {
  {
    std::lock_guard lock(mu_);
    changed_jobs_.insert(job_id);
  }
  cv_.notify_all();
}

void Dispatcher::Loop() {
  // Ticks follow the machine's steady clock; what a tick decides (deadlines, slots) reads
  // the Clock.
  auto next_tick = std::chrono::steady_clock::now() + kTick;
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, next_tick,
                     [&] { return stopping_ || work_hint_ || !changed_jobs_.empty(); });
      if (stopping_) return;
    }
    const auto now = std::chrono::steady_clock::now();
    const bool tick = now >= next_tick;
    if (tick) next_tick = now + kTick;
    Step(tick);
  }
}

void Dispatcher::Step(bool tick) {
  bool work = false;
  std::set<int64_t> changed;
  {
    std::lock_guard lock(mu_);
    work = work_hint_;
    work_hint_ = false;
    changed.swap(changed_jobs_);
  }
  if (tick && duties_ != nullptr) {
    DutyOutcome done = duties_->RunOnce();
    changed.insert(done.changed_jobs.begin(), done.changed_jobs.end());
    work = work || done.work_available;
  }
  // Waiting agents retry on every tick too (so a database outage heals by itself), and
  // calls past their deadline get their empty answer.
  if (work || tick) ServeParked();
  if (tick || !changed.empty()) UpdateWatchers(changed, tick);
}

void Dispatcher::ServeParked() {
  // A call past its deadline gets the empty answer and never a claim: the agent waits 15 s
  // longer than this deadline, and a run claimed for a call nobody waits for any more is
  // lost until the agent's next Hello releases it (an attempt spent).
  ExpireParked(clock_->Now());
  // The boards still waiting, oldest call first.
  std::vector<std::string> boards;
  {
    std::lock_guard lock(mu_);
    std::set<std::string> seen;
    for (auto* call : parked_) {
      if (seen.insert(call->board()).second) boards.push_back(call->board());
    }
  }
  if (boards.empty()) return;
  // One pass for all of them: one read of the queue, claims in groups, each group answered
  // (on the answerer's thread) while the next is claimed.
  const auto pass_start = std::chrono::steady_clock::now();
  size_t orders = 0;
  auto decided = work_->DecideWorkForBoards(boards, [&](WorkStore::BoardOrders&& group) {
    orders += group.size();
    Deliver(std::move(group));
  });
  const auto claimed = std::chrono::steady_clock::now();
  answerer_.WaitIdle();  // the pass ends with its answers sent
  if (!decided.ok()) {
    log::warn("event=claim_failed boards={} orders={} error=\"{}\"", boards.size(), orders,
              std::string(decided.message()));
  }
  if (orders > 0) {
    const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    log::info("event=dispatch_pass waiting={} orders={} claim_ms={:.1f} answered_ms={:.1f}",
              boards.size(), orders, ms(claimed - pass_start),
              ms(std::chrono::steady_clock::now() - pass_start));
  }
}

void Dispatcher::Deliver(WorkStore::BoardOrders&& orders) {
  // Each order goes to its board's oldest call, if that board still waits. Only a call still
  // parked may be answered: OnCancel may have taken it meanwhile (and the reactor may be
  // deleted once Unpark has taken it).
  std::vector<ParkedCall*> callers(orders.size(), nullptr);
  {
    std::lock_guard lock(mu_);
    std::map<std::string, ParkedCall*> oldest;
    for (auto* call : parked_) oldest.emplace(call->board(), call);
    std::set<ParkedCall*> taken;
    for (size_t i = 0; i < orders.size(); ++i) {
      auto it = oldest.find(orders[i].first);
      if (it == oldest.end()) continue;
      callers[i] = it->second;
      taken.insert(it->second);
      oldest.erase(it);
    }
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                                 [&](ParkedCall* call) { return taken.count(call) > 0; }),
                  parked_.end());
  }
  std::vector<Answerer::Answer> answers;
  answers.reserve(orders.size());
  for (size_t i = 0; i < orders.size(); ++i) {
    const std::string& board = orders[i].first;
    WorkOrder& next = orders[i].second;
    ParkedCall* call = callers[i];
    if (call != nullptr) {
      if (next.run || next.kernel_switch) answers.push_back({call, board, std::move(next)});
      continue;
    }
    if (next.kernel_switch) {
      // The agent went away before hearing it: the order never happened.
      log::warn("event=kernel_switch_undelivered board={} label={}", board,
                next.kernel_switch->label);
      auto abandoned = work_->AbandonKernelSwitch(board);
      if (!abandoned.ok()) {
        log::warn("event=kernel_switch_abandon_failed board={} error=\"{}\"", board,
                  std::string(abandoned.message()));
      }
    } else if (next.run) {
      // The agent went away between claim and answer; the lease returns the run to the
      // queue when it lapses.
      log::warn("event=assignment_undelivered run={} board={}", next.run->run_id, board);
    }
  }
  if (!answers.empty()) answerer_.Post(std::move(answers));
}

void Dispatcher::ExpireParked(std::chrono::system_clock::time_point now) {
  std::vector<ParkedCall*> expired;
  {
    std::lock_guard lock(mu_);
    for (auto it = parked_.begin(); it != parked_.end();) {
      if ((*it)->deadline() <= now) {
        expired.push_back(*it);
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto* call : expired) call->Answer(WorkOrder{});  // empty answer: ask again
}

void Dispatcher::UpdateWatchers(const std::set<int64_t>& jobs, bool all) {
  std::set<int64_t> wanted;
  {
    std::lock_guard lock(mu_);
    for (auto* w : watchers_) {
      if (all || jobs.count(w->job_id())) wanted.insert(w->job_id());
    }
  }
  for (int64_t job_id : wanted) {
    auto job = jobs_->GetJob(job_id);
    if (!job.ok()) continue;
    v1::JobProgress progress = ProgressFromJob(*job);
    std::lock_guard lock(mu_);  // watchers are removed under this lock before deletion
    for (auto* w : watchers_) {
      if (w->job_id() == job_id) w->Push(progress);
    }
  }
}

}  // namespace faultline::controller
