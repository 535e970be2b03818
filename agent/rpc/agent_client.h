#pragma once
// The agent's conversation with the controller: hello, long-poll for work, run it with
// heartbeats, report the result (retrying until the controller acknowledges or refuses it).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "agent/rpc/result_spool.h"
#include "faultline/v1/agent.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace faultline::agent {

struct RunReport {
  bool succeeded = false;
  std::string failure_reason;
  v1::WorkloadResult result;
};

// Runs one assignment to the end (or until *cancel becomes true) and says how it went.
using RunFunction = std::function<RunReport(const v1::Assignment&, std::atomic<bool>* cancel)>;
// Boots the kernel asked for. Returns only when the board did not go down: with the reason
// it now needs a check (already recorded on disk), or "" when the agent is stopping.
// *stopping turns true when the agent is asked to stop (the reboot's SIGTERM).
using SwitchFunction =
    std::function<std::string(const v1::KernelSwitch&, const std::atomic<bool>* stopping)>;
// The board's needs-check reason as recorded on disk, or "" when it is healthy.
using HealthFunction = std::function<std::string()>;

struct AgentClientOptions {
  v1::Board board;  // facts + kernels + labels, sent on hello
  uint32_t acquire_wait_seconds = 30;
  std::chrono::milliseconds min_backoff{500};
  std::chrono::milliseconds max_backoff{10'000};
  std::string spool_dir;  // results wait here until acknowledged; empty: no spool
  std::string token;      // bearer token of this board's agent (empty: none)
};

class AgentClient {
 public:
  AgentClient(AgentClientOptions options, std::shared_ptr<grpc::Channel> channel, RunFunction run,
              SwitchFunction kernel_switch = nullptr, HealthFunction health = nullptr);
  // Serves until Stop(); returns 0.
  int Serve();
  // Thread-safe: interrupts waits and cancels the running workload.
  void Stop();

 private:
  bool Hello();
  // One AcquireWork long poll; false on RPC failure.
  bool AcquireOnce(v1::AcquireWorkResponse* response);
  void RefreshHealth();
  void Execute(const v1::Assignment& assignment);
  void HeartbeatLoop(const v1::Assignment& assignment, std::atomic<bool>* cancel,
                     std::atomic<bool>* done);
  bool Report(const v1::ReportResultRequest& request);
  // Sends every spooled result; false when the controller could not be reached.
  bool FlushSpool();
  void Backoff(int failures);
  bool WaitFor(std::chrono::milliseconds d);  // false when stopping
  void Authorize(grpc::ClientContext* ctx) const;

  AgentClientOptions options_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  RunFunction run_;
  SwitchFunction switch_;
  HealthFunction health_;
  uint32_t heartbeat_seconds_ = 10;
  std::atomic<bool> stopping_flag_{false};
  std::unique_ptr<ResultSpool> spool_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  grpc::ClientContext* inflight_ = nullptr;  // the long poll to cancel on Stop
  std::atomic<bool>* run_cancel_ = nullptr;
};

}  // namespace faultline::agent
