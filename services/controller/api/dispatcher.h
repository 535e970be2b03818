#pragma once
// Hands runs to agents waiting in AcquireWork and progress to WatchJob streams, from one
// background thread. Waiting agents and watchers are parked reactors: no gRPC thread is held
// while they wait, and a submitted job wakes them at once (no polling interval to wait out).
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

#include "faultline/v1/agent.pb.h"
#include "faultline/v1/job.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/controller/storage/store.h"

namespace faultline::controller {

class Dispatcher;

// One parked AcquireWork call.
class AcquireReactor : public grpc::ServerUnaryReactor {
 public:
  AcquireReactor(Dispatcher* dispatcher, std::string board, v1::AcquireWorkResponse* response,
                 std::chrono::steady_clock::time_point deadline)
      : dispatcher_(dispatcher), board_(std::move(board)), response_(response),
        deadline_(deadline) {}
  void OnCancel() override;
  void OnDone() override { delete this; }

  const std::string& board() const { return board_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  v1::AcquireWorkResponse* response() { return response_; }

 private:
  Dispatcher* dispatcher_;
  std::string board_;
  v1::AcquireWorkResponse* response_;
  std::chrono::steady_clock::time_point deadline_;
};

// One WatchJob stream.
class WatchReactor : public grpc::ServerWriteReactor<v1::JobProgress> {
 public:
  WatchReactor(Dispatcher* dispatcher, int64_t job_id) : dispatcher_(dispatcher), job_id_(job_id) {}
  int64_t job_id() const { return job_id_; }
  // Sends progress if it differs from what was last sent; finishes after a final state.
  void Push(const v1::JobProgress& progress);
  void FinishWith(const grpc::Status& status);
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

class Dispatcher {
 public:
  explicit Dispatcher(PgStore* store);
  ~Dispatcher();
  void Start();
  void Stop();

  // Parks an AcquireWork call; the dispatcher thread claims a run for it right away.
  void Park(AcquireReactor* reactor);
  void Unpark(AcquireReactor* reactor);  // from OnCancel
  void AddWatcher(WatchReactor* reactor);
  void RemoveWatcher(WatchReactor* reactor);  // from OnDone

  // Something may be claimable now (job submitted, run requeued, board changed).
  void WorkAvailable();
  // A job's progress changed; watchers of it get an update.
  void JobChanged(int64_t job_id);

  static constexpr std::chrono::seconds kMaxWait{30};
  static constexpr std::chrono::seconds kTick{1};

 private:
  void Loop();
  void ServeParked();
  void ExpireParked(std::chrono::steady_clock::time_point now);
  void UpdateWatchers(const std::set<int64_t>& jobs, bool all);

  PgStore* store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool work_hint_ = false;
  std::set<int64_t> changed_jobs_;
  std::deque<AcquireReactor*> parked_;
  std::set<WatchReactor*> watchers_;
  std::thread thread_;
  int ticks_since_history_ = 29;  // first scan one tick after start
};

v1::JobProgress ProgressFromJob(const JobRecord& job);

}  // namespace faultline::controller
