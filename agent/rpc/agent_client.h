#pragma once
// The agent's conversation with the controller: hello, long-poll for work and hand it to the
// run flow (RunExecutor) or the kernel-switch flow (KernelSwitcher); the heartbeat and
// result RPCs those flows use (ControllerLink).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "agent/clock.h"
#include "agent/rpc/controller_link.h"
#include "agent/rpc/result_spool.h"
#include "faultline/v1/agent.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace faultline::agent {

// Runs one assignment and delivers its result (RunExecutor::Execute); returns early once
// `stopping` holds.
using RunFunction = std::function<void(const v1::Assignment&, const std::atomic<bool>& stopping)>;
// Boots the kernel asked for (KernelSwitcher::Switch). Returns only when the board did not
// go down: with the reason it now needs a check (already recorded on disk), or "" when the
// agent is stopping. `stopping` turns true when the agent is asked to stop (the reboot's
// SIGTERM).
using SwitchFunction =
    std::function<std::string(const v1::KernelSwitch&, const std::atomic<bool>& stopping)>;
// The board's needs-check reason as recorded on disk, or "" when it is healthy.
using HealthFunction = std::function<std::string()>;

// What the agent does with the work the controller hands out.
struct WorkHandlers {
  RunFunction run;
  SwitchFunction kernel_switch;  // null: this agent cannot switch kernels
  HealthFunction health;         // null: always healthy
};

struct AgentClientOptions {
  v1::Board board;  // facts + kernels + labels, sent on hello
  uint32_t acquire_wait_seconds = 30;
  std::chrono::milliseconds min_backoff{500};
  std::chrono::milliseconds max_backoff{10'000};
  ResultSpool* spool = nullptr;  // results waiting for the controller; null: no spool
  std::string token;             // bearer token of this board's agent (empty: none)
};

class AgentClient : public ControllerLink {
 public:
  AgentClient(AgentClientOptions options, std::shared_ptr<grpc::Channel> channel, Clock& clock);
  // Serves until Stop() and returns 0: sends the spool, says hello (again after every lost
  // connection, with backoff), polls for work and hands each piece to `handlers`.
  int Serve(const WorkHandlers& handlers);
  // Thread-safe: interrupts waits, the long poll and (through `stopping`) the running work.
  void Stop();

  // ControllerLink, for the run flow.
  LeaseStatus Heartbeat(const v1::HeartbeatRequest& request) override;
  Delivery Report(const v1::ReportResultRequest& request) override;
  std::chrono::seconds heartbeat_interval() const override;

 private:
  bool Hello();
  // One AcquireWork long poll; false on RPC failure.
  bool AcquireOnce(v1::AcquireWorkResponse* response);
  void RefreshHealth(const WorkHandlers& handlers);
  // Sends every spooled result; false when the controller could not be reached.
  bool FlushSpool();
  void Backoff(int failures);
  bool WaitFor(std::chrono::milliseconds d);  // false when stopping
  void Authorize(grpc::ClientContext* ctx) const;

  AgentClientOptions options_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  Clock& clock_;
  std::atomic<uint32_t> heartbeat_seconds_{10};
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  grpc::ClientContext* inflight_ = nullptr;  // the long poll to cancel on Stop
};

}  // namespace faultline::agent
