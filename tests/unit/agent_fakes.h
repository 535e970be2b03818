#pragma once
// Fakes for the agent's run and kernel-switch flows: a clock that only pretends to wait, a
// controller that records heartbeats and results, a board whose workloads, free space and
// zram swap are made up, and boot commands that are recorded instead of run.
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "agent/clock.h"
#include "agent/kernel_switch.h"
#include "agent/rpc/controller_link.h"
#include "agent/run_executor.h"

namespace faultline::agent::testing {

// Time moves only when someone waits: WaitFor returns at once, `d` later (or at once when
// its condition already holds). No test sleeps.
class FakeClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override {
    std::lock_guard lock(mu_);
    return std::chrono::steady_clock::time_point() + elapsed_;
  }
  int64_t UnixSeconds() override {
    std::lock_guard lock(mu_);
    return kEpoch + std::chrono::duration_cast<std::chrono::seconds>(elapsed_).count();
  }
  bool WaitFor(std::chrono::milliseconds d, const std::function<bool()>& done) override {
    if (done()) return true;
    {
      std::lock_guard lock(mu_);
      elapsed_ += d;
      waits_.push_back(d);
    }
    return done();
  }
  void Wake() override {}

  std::vector<std::chrono::milliseconds> waits() {
    std::lock_guard lock(mu_);
    return waits_;
  }
  static constexpr int64_t kEpoch = 1'700'000'000;

 private:
  std::mutex mu_;
  std::chrono::milliseconds elapsed_{0};
  std::vector<std::chrono::milliseconds> waits_;
};

// Records every heartbeat and result; answers as the test says (renewed, accepted).
class FakeController : public ControllerLink {
 public:
  std::function<LeaseStatus(const v1::HeartbeatRequest&)> on_heartbeat =
      [](const v1::HeartbeatRequest&) { return LeaseStatus::kRenewed; };
  std::function<Delivery(const v1::ReportResultRequest&)> on_report =
      [](const v1::ReportResultRequest&) { return Delivery::kAccepted; };

  LeaseStatus Heartbeat(const v1::HeartbeatRequest& request) override {
    std::lock_guard lock(mu_);
    heartbeats_.push_back(request);
    return on_heartbeat(request);
  }
  Delivery Report(const v1::ReportResultRequest& request) override {
    std::lock_guard lock(mu_);
    reports_.push_back(request);
    return on_report(request);
  }
  std::chrono::seconds heartbeat_interval() const override { return std::chrono::seconds(10); }

  std::vector<v1::HeartbeatRequest> heartbeats() {
    std::lock_guard lock(mu_);
    return heartbeats_;
  }
  std::vector<v1::ReportResultRequest> reports() {
    std::lock_guard lock(mu_);
    return reports_;
  }

 private:
  std::mutex mu_;
  std::vector<v1::HeartbeatRequest> heartbeats_;
  std::vector<v1::ReportResultRequest> reports_;
};

// A workload that printed this result (what faultline-workload prints, abridged).
inline runner::WorkloadOutcome SucceededOutcome() {
  runner::WorkloadOutcome outcome;
  outcome.succeeded = true;
  outcome.result_json =
      R"({"benchmark": "filemap-thrash", "throughput_rounds_per_second": 125.5, "rounds": 251,)"
      R"( "duration_seconds": 2, "environment": {"cgroup.version": "2"}})";
  return outcome;
}

class FakeSwap : public SwapDevice {
 public:
  FakeSwap(std::string path, std::vector<std::string>* events)
      : path_(std::move(path)), events_(events) {}
  const std::string& path() const override { return path_; }
  bool Stop(std::string*) override {
    events_->push_back("stop " + path_);
    return true;
  }

 private:
  std::string path_;
  std::vector<std::string>* events_;
};

// The board: workloads run by `on_run` (default: succeed at once), invocations and swap
// events recorded.
class FakeHost : public WorkloadHost {
 public:
  std::function<runner::WorkloadOutcome(const runner::WorkloadInvocation&)> on_run =
      [](const runner::WorkloadInvocation&) { return SucceededOutcome(); };
  uint64_t free_bytes = 1ull << 40;
  std::string swap_error;  // non-empty: ProvisionSwap fails with it

  runner::WorkloadOutcome RunWorkload(const runner::WorkloadInvocation& invocation) override {
    invocations.push_back(invocation);
    events.push_back("run " + invocation.benchmark);
    return on_run(invocation);
  }
  uint64_t FreeBytes(const std::string&) override { return free_bytes; }
  std::unique_ptr<SwapDevice> ProvisionSwap(uint64_t bytes, std::string* error) override {
    events.push_back("swap " + std::to_string(bytes));
    if (!swap_error.empty()) {
      *error = swap_error;
      return nullptr;
    }
    return std::make_unique<FakeSwap>("/dev/zram0", &events);
  }

  std::vector<runner::WorkloadInvocation> invocations;
  std::vector<std::string> events;
};

// Boot commands recorded with their environment; `on_run` decides their exit status.
class FakeCommandRunner : public CommandRunner {
 public:
  using Env = std::vector<std::pair<std::string, std::string>>;
  std::function<int(const std::vector<std::string>&, const Env&, std::string*)> on_run =
      [](const std::vector<std::string>&, const Env&, std::string*) { return 0; };

  int Run(const std::vector<std::string>& argv, const Env& env, std::string* error) override {
    commands.push_back(argv);
    envs.push_back(env);
    return on_run(argv, env, error);
  }
  std::vector<std::vector<std::string>> commands;
  std::vector<Env> envs;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/faultline-agent-test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace faultline::agent::testing
