#pragma once
// Hands runs to agents waiting in AcquireWork and progress to WatchJob streams, from one
// background thread. Waiting agents and watchers are parked reactors: no gRPC thread is held
// while they wait, and a submitted job wakes them at once (no polling interval to wait out).
// The background duties (lease reaping, switch expiry, change points, schedules) are a
// separate class (duties.h) that the dispatcher's thread runs once a tick. Tests drive the
// dispatcher without its thread (Step) through the ParkedCall/ProgressWatcher seams.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "faultline/v1/agent.pb.h"
#include "faultline/v1/job.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class Dispatcher;
class BackgroundDuties;

// An agent waiting for work.
class ParkedCall {
 public:
  virtual ~ParkedCall() = default;
  virtual const std::string& board() const = 0;
  virtual std::chrono::system_clock::time_point deadline() const = 0;
  // Ends the call with OK: a run, a kernel switch, or neither (the agent asks again).
  virtual void Answer(const WorkOrder& order) = 0;
  virtual void Fail(const grpc::Status& status) = 0;
};

// A client following one job's progress.
class ProgressWatcher {
 public:
  virtual ~ProgressWatcher() = default;
  virtual int64_t job_id() const = 0;
  // Sends progress if it differs from what was last sent; finishes after a final state.
  virtual void Push(const v1::JobProgress& progress) = 0;
  virtual void FinishWith(const grpc::Status& status) = 0;
};

// One parked AcquireWork call.
class AcquireReactor : public grpc::ServerUnaryReactor, public ParkedCall {
 public:
  AcquireReactor(Dispatcher* dispatcher, std::string board, v1::AcquireWorkResponse* response,
                 std::chrono::system_clock::time_point deadline)
      : dispatcher_(dispatcher),
        board_(std::move(board)),
        response_(response),
        deadline_(deadline) {}
  void OnCancel() override;
  void OnDone() override { delete this; }

  // Parks the call once the board's checks are done (on a handler pool thread), or ends it
  // with `checked` when they failed, or CANCELLED when the client went away meanwhile.
  void ParkUnless(const grpc::Status& checked);

  const std::string& board() const override { return board_; }
  std::chrono::system_clock::time_point deadline() const override { return deadline_; }
  void Answer(const WorkOrder& order) override;
  void Fail(const grpc::Status& status) override { Finish(status); }

 private:
  Dispatcher* dispatcher_;
  std::string board_;
  v1::AcquireWorkResponse* response_;
  std::chrono::system_clock::time_point deadline_;
  std::mutex mu_;
  bool cancelled_ = false;  // OnCancel ran
  bool parked_ = false;     // handed to the dispatcher
};

// One WatchJob stream.
class WatchReactor : public grpc::ServerWriteReactor<v1::JobProgress>, public ProgressWatcher {
 public:
  WatchReactor(Dispatcher* dispatcher, int64_t job_id) : dispatcher_(dispatcher), job_id_(job_id) {}
  int64_t job_id() const override { return job_id_; }
  void Push(const v1::JobProgress& progress) override;
  void FinishWith(const grpc::Status& status) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  Dispatcher* dispatcher_;
  int64_t job_id_;
  std::mutex mu_;
  bool writing_ = false;
  bool finished_ = false;
  bool finish_after_write_ = false;
  bool has_pending_ = false;
  bool has_last_ = false;
  v1::JobProgress current_, pending_, last_;
};

// Ends parked calls with their orders on a thread of its own, so that the dispatcher can
// claim the next group of runs while gRPC writes the answers of the last one. The run log
// lines and watcher updates of a group follow its answers.
class Answerer {
 public:
  struct Answer {
    ParkedCall* call = nullptr;  // may be deleted once answered
    std::string board;
    WorkOrder order;
  };
  // `job_changed` is called once per job of each group, after its answers.
  explicit Answerer(std::function<void(int64_t)> job_changed);
  ~Answerer();
  void Post(std::vector<Answer> group);
  // Returns once every group posted so far is answered.
  void WaitIdle();

 private:
  void Loop();
  std::function<void(int64_t)> job_changed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<Answer>> groups_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

class Dispatcher {
 public:
  // `duties` may be null (nothing runs on ticks but parked-call expiry).
  Dispatcher(WorkStore* work, JobStore* jobs, const Clock* clock = SystemClock::Get(),
             BackgroundDuties* duties = nullptr);
  ~Dispatcher();
  void Start();
  void Stop();

  // Parks an AcquireWork call; the dispatcher thread claims a run for it right away.
  void Park(ParkedCall* call);
  void Unpark(ParkedCall* call);  // from OnCancel: the call ends CANCELLED
  void AddWatcher(ProgressWatcher* watcher);
  void RemoveWatcher(ProgressWatcher* watcher);  // from OnDone

  // Something may be claimable now (job submitted, run requeued, board changed).
  void WorkAvailable();
  // A job's progress changed; watchers of it get an update.
  void JobChanged(int64_t job_id);

  // One pass of the loop, on the caller's thread (the loop calls it; tests call it instead
  // of Start): with `tick`, the duties run, calls past their deadline (by the clock) get an
  // empty answer and every watcher is refreshed; parked calls are served when work may be
  // available or on a tick; watchers of changed jobs are updated.
  void Step(bool tick);

  size_t parked() {
    std::lock_guard lock(mu_);
    return parked_.size();
  }

  // Where boards fetch images kept in an object store (a presigned URL by sha256); set
  // before Start when the controller has one (--artifact-s3-endpoint).
  void SetArtifactUrls(std::function<std::string(const std::string& sha256)> urls) {
    artifact_urls_ = std::move(urls);
  }
  std::string ArtifactUrl(const std::string& sha256) const {
    return artifact_urls_ ? artifact_urls_(sha256) : std::string();
  }

  static constexpr std::chrono::seconds kMaxWait{30};
  static constexpr std::chrono::seconds kTick{1};

 private:
  void Loop();
  void ServeParked();
  // Hands one group of decided orders to their boards' oldest parked calls.
  void Deliver(WorkStore::BoardOrders&& orders);
  void ExpireParked(std::chrono::system_clock::time_point now);
  void UpdateWatchers(const std::set<int64_t>& jobs, bool all);

  WorkStore* work_;
  JobStore* jobs_;
  const Clock* clock_;
  BackgroundDuties* duties_;
  std::function<std::string(const std::string&)> artifact_urls_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool work_hint_ = false;
  std::set<int64_t> changed_jobs_;
  std::deque<ParkedCall*> parked_;
  std::set<ProgressWatcher*> watchers_;
  Answerer answerer_;  // after the state it may use (JobChanged), before the thread
  std::thread thread_;
};

v1::JobProgress ProgressFromJob(const JobRecord& job);

}  // namespace faultline::controller
