#pragma once
// The run flow of the agent: one assignment from the controller's hand-out to its
// acknowledged result. The board checks the assignment itself (kernel, bounds), bounds the
// run by the lease it was granted, provisions zram swap for benchmarks that need it, runs
// the workload while heartbeats renew the lease (a lost lease stops the run), assembles the
// result with the run's environment facts, spools it and delivers it.
//
// Seams for the unit tests: the controller (ControllerLink), the board's processes and
// resources (WorkloadHost) and time (Clock).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/clock.h"
#include "agent/rpc/controller_link.h"
#include "agent/rpc/result_spool.h"
#include "agent/runner/runner.h"
#include "agent/sys/cgroup.h"
#include "faultline/v1/agent.pb.h"

namespace faultline::agent {

// A swap device provisioned for one run; Stop() takes it out of service.
class SwapDevice {
 public:
  virtual ~SwapDevice() = default;
  virtual const std::string& path() const = 0;
  virtual bool Stop(std::string* error) = 0;
};

// What the executor needs from the board: running workloads, free space, zram swap.
class WorkloadHost {
 public:
  virtual ~WorkloadHost() = default;
  virtual runner::WorkloadOutcome RunWorkload(const runner::WorkloadInvocation& invocation) = 0;
  // Free bytes (for unprivileged use) of the file system holding `dir`; 0 when unknown.
  virtual uint64_t FreeBytes(const std::string& dir) = 0;
  // nullptr with *error when the device cannot be set up.
  virtual std::unique_ptr<SwapDevice> ProvisionSwap(uint64_t bytes, std::string* error) = 0;
};

// runner::RunWorkload, statvfs(3) and sys::ZramSwap.
class SystemWorkloadHost : public WorkloadHost {
 public:
  runner::WorkloadOutcome RunWorkload(const runner::WorkloadInvocation& invocation) override;
  uint64_t FreeBytes(const std::string& dir) override;
  std::unique_ptr<SwapDevice> ProvisionSwap(uint64_t bytes, std::string* error) override;
};

// The board as the run flow sees it.
struct RunExecutorOptions {
  std::string board;
  std::string workload_binary;
  std::string work_dir;
  sys::CgroupBackend cgroup_backend;
  std::string kernel_release;                      // running
  std::vector<std::string> running_kernel_labels;  // the configured labels of that release
  uint64_t memory_bytes = 0;
  uint64_t zram_swap_bytes = 0;  // 0: never provision swap
  uint32_t grace_seconds = 60;   // runner's timeout = warmup + duration + grace (at most)
  std::chrono::milliseconds min_backoff{500};  // between deliveries that failed
  std::chrono::milliseconds max_backoff{10'000};
};

// How one run ended, before it is sent.
struct RunReport {
  bool succeeded = false;
  std::string failure_reason;
  v1::WorkloadResult result;
};

class RunExecutor {
 public:
  // `spool` may be null (no spool: a result lives only in memory until delivered).
  RunExecutor(RunExecutorOptions options, ControllerLink& controller, WorkloadHost& host,
              ResultSpool* spool, Clock& clock);

  // Runs `assignment` and delivers its result: spooled first, sent until the controller
  // accepts or refuses it, then removed from the spool. Returns early, leaving the result in
  // the spool for the next life, once `stopping` holds (which also cancels the workload).
  void Execute(const v1::Assignment& assignment, const std::atomic<bool>& stopping);

  // The run itself, without heartbeats or delivery (*cancel stops it).
  RunReport Run(const v1::Assignment& assignment, std::atomic<bool>* cancel);

 private:
  // Heartbeats every interval until `done`; on a lost lease or `stopping` sets *cancel.
  void Heartbeats(const v1::Assignment& a, const std::atomic<bool>& stopping,
                  const std::atomic<bool>& done, std::atomic<bool>* cancel,
                  std::atomic<bool>* lease_lost);
  void Deliver(const v1::ReportResultRequest& request, const std::atomic<bool>& stopping);

  RunExecutorOptions options_;
  ControllerLink& controller_;
  WorkloadHost& host_;
  ResultSpool* spool_;
  Clock& clock_;
};

// How long before the lease the controller granted a run's hard timeout must end: the time
// to stop the workload and report, so a run whose lease lapsed never has a twin still
// running here.
inline constexpr uint32_t kLeaseMarginSeconds = 5;
// The runner's grace (timeout = warmup + duration + grace) for an assignment: at most
// `grace`, and small enough that the hard timeout ends kLeaseMarginSeconds before the lease
// (warmup_ms and lease_seconds as the controller sent them).
uint32_t LeaseBoundedGraceSeconds(const v1::Assignment& assignment, uint32_t grace);

}  // namespace faultline::agent
