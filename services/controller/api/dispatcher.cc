#include "services/controller/api/dispatcher.h"

#include <algorithm>
#include <vector>

#include "google/protobuf/util/message_differencer.h"
#include "services/common/log.h"
#include "services/controller/api/convert.h"
#include "services/controller/api/history.h"
#include "services/controller/api/submission.h"

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

void AcquireReactor::OnCancel() { dispatcher_->Unpark(this); }

void WatchReactor::Push(const v1::JobProgress& progress) {
  std::unique_lock lock(mu_);
  if (finished_ || finish_after_write_) return;
  const v1::JobProgress& reference = has_pending_ ? pending_ : last_;
  if ((has_pending_ || has_last_) &&
      google::protobuf::util::MessageDifferencer::Equals(reference, progress)) {
    return;
  }
  bool final_state = IsFinal(progress.state());
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

void WatchReactor::OnCancel() { FinishWith(grpc::Status::CANCELLED); }

void WatchReactor::OnDone() {
  dispatcher_->RemoveWatcher(this);
  delete this;
}

Dispatcher::Dispatcher(PgStore* store) : store_(store) {}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::Start() { thread_ = std::thread([this] { Loop(); }); }

void Dispatcher::Stop() {
  std::deque<AcquireReactor*> parked;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    parked.swap(parked_);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto* r : parked) r->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller stopping"));
  std::set<WatchReactor*> watchers;
  {
    std::lock_guard lock(mu_);
    watchers = watchers_;
  }
  for (auto* w : watchers) w->FinishWith(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller stopping"));
}

void Dispatcher::Park(AcquireReactor* reactor) {
  bool stopping;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
    if (!stopping) {
      parked_.push_back(reactor);
      work_hint_ = true;
    }
  }
  if (stopping) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller stopping"));
    return;
  }
  cv_.notify_all();
}

void Dispatcher::Unpark(AcquireReactor* reactor) {
  bool found = false;
  {
    std::lock_guard lock(mu_);
    auto it = std::find(parked_.begin(), parked_.end(), reactor);
    if (it != parked_.end()) {
      parked_.erase(it);
      found = true;
    }
  }
  if (found) reactor->Finish(grpc::Status::CANCELLED);
}

void Dispatcher::AddWatcher(WatchReactor* reactor) {
  {
    std::lock_guard lock(mu_);
    watchers_.insert(reactor);
    changed_jobs_.insert(reactor->job_id());
  }
  cv_.notify_all();
}

void Dispatcher::RemoveWatcher(WatchReactor* reactor) {
  std::lock_guard lock(mu_);
  watchers_.erase(reactor);
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
  auto next_tick = std::chrono::steady_clock::now() + kTick;
  while (true) {
    bool work = false;
    bool tick = false;
    std::set<int64_t> changed;
    {
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, next_tick,
                     [&] { return stopping_ || work_hint_ || !changed_jobs_.empty(); });
      if (stopping_) return;
      work = work_hint_;
      work_hint_ = false;
      changed.swap(changed_jobs_);
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= next_tick) {
      tick = true;
      next_tick = now + kTick;
      auto reaped = store_->ReapExpiredLeases();
      if (reaped.ok() && !reaped->empty()) {
        log::warn("event=leases_expired jobs={}", reaped->size());
        changed.insert(reaped->begin(), reaped->end());
        work = true;
      }
      ExpireParked(now);
      auto lapsed = store_->ExpireKernelSwitches();
      if (lapsed.ok()) {
        for (const auto& board : *lapsed) {
          log::error("event=kernel_switch_lapsed board={} health=needs-check", board);
        }
      }
      // History change points: cheap enough to rescan every 30 s.
      if (++ticks_since_history_ >= 30) {
        ticks_since_history_ = 0;
        auto found = DetectHistoryChangePoints(store_);
        if (found.ok() && *found > 0) log::warn("event=change_points_found count={}", *found);
      }
      auto fired = FireDueSchedules(store_);
      if (fired.ok() && *fired > 0) {
        log::info("event=schedules_fired jobs={}", *fired);
        work = true;
      }
    }
    // Waiting agents retry on every tick too, so a database outage heals by itself.
    if (work || tick) ServeParked();
    if (tick || !changed.empty()) UpdateWatchers(changed, tick);
  }
}

void Dispatcher::ServeParked() {
  std::vector<AcquireReactor*> snapshot;
  {
    std::lock_guard lock(mu_);
    snapshot.assign(parked_.begin(), parked_.end());
  }
  for (auto* reactor : snapshot) {
    // Only a reactor still parked may be served; OnCancel may have taken it meanwhile.
    {
      std::lock_guard lock(mu_);
      if (std::find(parked_.begin(), parked_.end(), reactor) == parked_.end()) continue;
    }
    auto next = store_->NextWork(reactor->board());
    if (!next.ok()) {
      log::warn("event=claim_failed board={} error=\"{}\"", reactor->board(),
                std::string(next.status().message()));
      return;
    }
    if (!next->run && !next->kernel_switch) continue;
    bool still_parked = false;
    {
      std::lock_guard lock(mu_);
      auto it = std::find(parked_.begin(), parked_.end(), reactor);
      if (it != parked_.end()) {
        parked_.erase(it);
        still_parked = true;
      }
    }
    if (next->kernel_switch) {
      const KernelSwitchOrder& order = *next->kernel_switch;
      if (!still_parked) {
        // The agent went away before hearing it: the order never happened.
        log::warn("event=kernel_switch_undelivered board={} label={}", reactor->board(), order.label);
        auto abandoned = store_->AbandonKernelSwitch(reactor->board());
        if (!abandoned.ok()) {
          log::warn("event=kernel_switch_abandon_failed board={} error=\"{}\"", reactor->board(),
                    std::string(abandoned.message()));
        }
        continue;
      }
      log::info("event=kernel_switch_ordered board={} label={} reason=\"{}\"", reactor->board(),
                order.label, order.reason);
      auto* sw = reactor->response()->mutable_switch_kernel();
      sw->set_label(order.label);
      sw->set_reason(order.reason);
      sw->set_deadline_seconds(order.deadline_seconds);
      reactor->Finish(grpc::Status::OK);
      continue;
    }
    const Assignment& a = *next->run;
    if (!still_parked) {
      // The agent went away between claim and answer; the lease returns the run to the
      // queue when it lapses.
      log::warn("event=assignment_undelivered run={} board={}", a.run_id, reactor->board());
      continue;
    }
    log::info("event=run_assigned run={} job={} board={} kernel={} attempt_id={}", a.run_id,
              a.job_id, reactor->board(), a.kernel, a.attempt_id);
    AssignmentToProto(a, reactor->response()->mutable_assignment());
    reactor->Finish(grpc::Status::OK);
    JobChanged(a.job_id);
  }
}

void Dispatcher::ExpireParked(std::chrono::steady_clock::time_point now) {
  std::vector<AcquireReactor*> expired;
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
  for (auto* r : expired) r->Finish(grpc::Status::OK);  // empty answer: ask again
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
    auto job = store_->GetJob(job_id);
    if (!job.ok()) continue;
    v1::JobProgress progress = ProgressFromJob(*job);
    std::lock_guard lock(mu_);  // watchers are removed under this lock before deletion
    for (auto* w : watchers_) {
      if (w->job_id() == job_id) w->Push(progress);
    }
  }
}

}  // namespace faultline::controller
