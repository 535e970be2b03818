// The agent's run flow on fakes: what the board refuses, how long a run may take, the
// zram swap of swap benchmarks, the result and its environment facts, heartbeats and a
// lost lease, the spool around delivery. No workload runs, nothing sleeps.
#include "agent/run_executor.h"

#include <gtest/gtest.h>

#include <thread>

#include "google/protobuf/util/message_differencer.h"
#include "tests/unit/agent_fakes.h"

namespace faultline::agent {
namespace {

using testing::FakeClock;
using testing::FakeController;
using testing::FakeHost;
using testing::TempDir;

constexpr uint64_t kGiB = 1ull << 30;

v1::Assignment Thrash() {
  v1::Assignment a;
  a.set_run_id(17);
  a.set_attempt_id("0f6c2a4e-attempt");
  a.set_job_id(3);
  a.set_benchmark("filemap-thrash");
  a.set_kernel("vanilla");
  a.set_duration_seconds(10);
  (*a.mutable_params())["threads"] = "2";
  (*a.mutable_params())["file_size"] = "4M";
  a.mutable_limits()->set_memory_max(256ull << 20);
  a.set_lease_seconds(600);
  return a;
}

class RunExecutorTest : public ::testing::Test {
 protected:
  RunExecutorOptions Options() {
    RunExecutorOptions o;
    o.board = "board-1";
    o.workload_binary = "/opt/faultline/faultline-workload";
    o.work_dir = "/var/tmp/faultline";
    o.kernel_release = "6.1.0-18-amd64";
    o.running_kernel_labels = {"vanilla", "vanilla-again"};
    o.memory_bytes = 8 * kGiB;
    return o;
  }
  // Executes `a` with a spool in a temporary directory; returns what was reported.
  std::vector<v1::ReportResultRequest> Execute(const v1::Assignment& a,
                                               RunExecutorOptions options) {
    RunExecutor executor(std::move(options), controller_, host_, &spool_, clock_);
    executor.Execute(a, stopping_);
    return controller_.reports();
  }
  std::vector<v1::ReportResultRequest> Execute(const v1::Assignment& a) {
    return Execute(a, Options());
  }
  std::vector<std::string> Spooled() {
    auto names = spool_.List();
    EXPECT_TRUE(names.ok()) << names.status();
    return names.ok() ? *names : std::vector<std::string>{};
  }

  FakeClock clock_;
  FakeController controller_;
  FakeHost host_;
  TempDir dir_;
  ResultSpool spool_{dir_.path() + "/spool"};
  std::atomic<bool> stopping_{false};
};

TEST_F(RunExecutorTest, RefusesAKernelTheBoardIsNotRunning) {
  v1::Assignment a = Thrash();
  a.set_kernel("patched");
  auto reports = Execute(a);
  EXPECT_TRUE(host_.invocations.empty()) << "nothing may run on the wrong kernel";
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].succeeded());
  EXPECT_EQ(reports[0].failure_reason(),
            "wrong kernel: assigned 'patched', board runs 6.1.0-18-amd64");
  EXPECT_EQ(reports[0].run_id(), 17);
  EXPECT_EQ(reports[0].attempt_id(), "0f6c2a4e-attempt");
  EXPECT_EQ(reports[0].board(), "board-1");
}

TEST_F(RunExecutorTest, RunsUnderAnyLabelOfTheRunningRelease) {
  v1::Assignment a = Thrash();
  a.set_kernel("vanilla-again");  // two labels on one kernel: an A/A check
  auto reports = Execute(a);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].succeeded()) << reports[0].failure_reason();
  EXPECT_EQ(reports[0].result().environment().at("kernel.label"), "vanilla-again");
}

TEST_F(RunExecutorTest, RefusesWhatExceedsTheBoardsOwnBounds) {
  v1::Assignment a = Thrash();
  a.mutable_limits()->set_memory_max(16 * kGiB);
  auto reports = Execute(a);
  EXPECT_TRUE(host_.invocations.empty());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].succeeded());
  EXPECT_EQ(reports[0].failure_reason().rfind("refused by the agent: memcg.memory_max", 0), 0u)
      << reports[0].failure_reason();

  host_.free_bytes = 4ull << 20;  // the files of filemap-thrash do not fit the work dir
  reports = Execute(Thrash());
  EXPECT_TRUE(host_.invocations.empty());
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_NE(reports[1].failure_reason().find("the free space of the work directory"),
            std::string::npos)
      << reports[1].failure_reason();
}

TEST_F(RunExecutorTest, HardTimeoutEndsFiveSecondsBeforeTheLease) {
  v1::Assignment a = Thrash();
  (*a.mutable_params())["warmup"] = "2s";  // the workload's; the agent reads warmup_ms
  a.set_warmup_ms(2000);
  a.set_lease_seconds(30);
  Execute(a);
  ASSERT_EQ(host_.invocations.size(), 1u);
  const auto& inv = host_.invocations[0];
  // The runner's timeout is warmup + duration + grace.
  EXPECT_EQ(inv.grace_seconds, 13u);
  EXPECT_EQ(2 + inv.duration_seconds + inv.grace_seconds, a.lease_seconds() - 5);

  // A long lease leaves the default grace; a lease too short to bound anything, too.
  EXPECT_EQ(LeaseBoundedGraceSeconds(Thrash(), 60), 60u);
  a.set_lease_seconds(1000);
  EXPECT_EQ(LeaseBoundedGraceSeconds(a, 60), 60u);
  a.set_lease_seconds(17);  // 10 s + 2 s warmup + 5 s margin: no room at all
  EXPECT_EQ(LeaseBoundedGraceSeconds(a, 60), 60u);
  a.set_lease_seconds(18);
  EXPECT_EQ(LeaseBoundedGraceSeconds(a, 60), 1u);
  a.set_warmup_ms(1500);  // rounded up to whole seconds
  EXPECT_EQ(LeaseBoundedGraceSeconds(a, 60), 1u);
}

TEST_F(RunExecutorTest, InvocationCarriesTheAssignmentAndTheBoard) {
  v1::Assignment a = Thrash();
  a.mutable_limits()->set_swap_max(0);  // memory_high unset: none
  a.set_warmup_ms(2000);
  a.set_mmap_lock_waits(true);
  a.mutable_profile()->set_frequency_hz(499);
  Execute(a);
  ASSERT_EQ(host_.invocations.size(), 1u);
  const auto& inv = host_.invocations[0];
  EXPECT_EQ(inv.workload_binary, "/opt/faultline/faultline-workload");
  EXPECT_EQ(inv.benchmark, "filemap-thrash");
  EXPECT_EQ(inv.params.at("threads"), "2");
  EXPECT_EQ(inv.duration_seconds, 10u);
  EXPECT_EQ(inv.work_dir, "/var/tmp/faultline");
  EXPECT_EQ(inv.run_id, "17");
  EXPECT_EQ(inv.limits.memory_max, 256ull << 20);
  EXPECT_FALSE(inv.limits.memory_high.has_value());
  EXPECT_EQ(inv.limits.swap_max, 0u);
  EXPECT_NE(inv.cancel, nullptr);
  EXPECT_EQ(inv.warmup, std::chrono::milliseconds(2000));
  // From an older controller's fields (10, 13, 14): the same options, whole.
  EXPECT_EQ(inv.run_options, R"({"mmap_lock_waits":true,"profile":{"frequency_hz":499}})");
}

TEST_F(RunExecutorTest, RunOptionsReachTheWorkloadWholeAndUnknownOnesAreRefused) {
  v1::Assignment a = Thrash();
  a.mutable_options()->add_events("sw:page-faults");
  a.mutable_options()->mutable_profile()->set_frequency_hz(99);
  a.mutable_options()->mutable_profile()->set_pmu(true);
  Execute(a);
  ASSERT_EQ(host_.invocations.size(), 1u);
  EXPECT_EQ(host_.invocations[0].run_options,
            R"({"events":["sw:page-faults"],"profile":{"frequency_hz":99,"pmu":true}})");

  // An option of a newer controller (a field this agent does not know) is refused: the run
  // would otherwise measure less than its job asked.
  v1::Assignment newer = Thrash();
  newer.mutable_options()->set_mmap_lock_waits(true);
  newer.mutable_options()
      ->GetReflection()
      ->MutableUnknownFields(newer.mutable_options())
      ->AddVarint(99, 1);
  auto reports = Execute(newer);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(host_.invocations.size(), 1u) << "nothing ran";
  EXPECT_EQ(reports[1].failure_reason(),
            "refused by the agent: run_options: field 99 unknown to this agent (a newer "
            "controller's option: upgrade the agent)");
}

TEST_F(RunExecutorTest, EventsReachTheWorkloadAndItsRefusalIsTheReason) {
  v1::Assignment a = Thrash();
  a.add_events("mmap_lock:mmap_lock_start_locking");
  a.add_events("sw:page-faults");
  host_.on_run = [](const runner::WorkloadInvocation&) {
    runner::WorkloadOutcome outcome;
    outcome.failure_reason =
        "exit code 2: --events: 'mmap_lock:mmap_lock_start_locking': no tracepoint "
        "mmap_lock:mmap_lock_start_locking on this kernel (mmap_lock has: nothing)";
    return outcome;
  };
  auto reports = Execute(a);
  ASSERT_EQ(host_.invocations.size(), 1u);
  EXPECT_EQ(host_.invocations[0].run_options,
            R"({"events":["mmap_lock:mmap_lock_start_locking","sw:page-faults"]})");
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].succeeded());
  EXPECT_EQ(reports[0].failure_reason().rfind(
                "exit code 2: --events: 'mmap_lock:mmap_lock_start_locking': no tracepoint", 0),
            0u);

  // A name no board knows is refused before anything runs.
  v1::Assignment bad = Thrash();
  bad.add_events("sw:faults");
  reports = Execute(bad);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(host_.invocations.size(), 1u);
  EXPECT_EQ(
      reports[1].failure_reason().rfind(
          "refused by the agent: run_options.events[0]: 'sw:faults': unknown software event", 0),
      0u)
      << reports[1].failure_reason();
}

TEST_F(RunExecutorTest, ResultCarriesTheRunsEnvironmentFacts) {
  host_.on_run = [](const runner::WorkloadInvocation&) {
    runner::WorkloadOutcome outcome = testing::SucceededOutcome();
    outcome.applied_limits = {{"memcg.memory_max", "memory.max=268435456"}};
    outcome.memcg_events = {{"oom_kill", 0}, {"high", 12}};
    return outcome;
  };
  auto reports = Execute(Thrash());
  ASSERT_EQ(reports.size(), 1u);
  const auto& r = reports[0];
  EXPECT_TRUE(r.succeeded()) << r.failure_reason();
  EXPECT_DOUBLE_EQ(r.result().throughput_rounds_per_second(), 125.5);
  EXPECT_EQ(r.result().rounds(), 251u);
  const auto& env = r.result().environment();
  EXPECT_EQ(env.at("cgroup.version"), "2");  // the workload's own
  EXPECT_EQ(env.at("memcg.memory_max"), "memory.max=268435456");
  EXPECT_EQ(env.at("kernel.label"), "vanilla");
  EXPECT_EQ(env.at("kernel.release"), "6.1.0-18-amd64");
  EXPECT_EQ(env.count("swap.provisioned"), 0u);
  EXPECT_DOUBLE_EQ(r.result().counters().at("memcg_event.high"), 12);
}

TEST_F(RunExecutorTest, AWorkloadWithoutAReadableResultFails) {
  host_.on_run = [](const runner::WorkloadInvocation&) {
    runner::WorkloadOutcome outcome;
    outcome.succeeded = true;
    return outcome;
  };
  auto reports = Execute(Thrash());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].succeeded());
  EXPECT_EQ(reports[0].failure_reason(), "the workload printed no result");
  EXPECT_EQ(reports[0].result().environment().at("kernel.release"), "6.1.0-18-amd64");

  host_.on_run = [](const runner::WorkloadInvocation&) {
    runner::WorkloadOutcome outcome;
    outcome.succeeded = true;
    outcome.result_json = "{rounds: ";
    return outcome;
  };
  reports = Execute(Thrash());
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_FALSE(reports[1].succeeded());
  EXPECT_EQ(reports[1].failure_reason().rfind("unreadable workload output: ", 0), 0u);

  host_.on_run = [](const runner::WorkloadInvocation&) {
    runner::WorkloadOutcome outcome;
    outcome.failure_reason = "oom_killed";
    return outcome;
  };
  reports = Execute(Thrash());
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_FALSE(reports[2].succeeded());
  EXPECT_EQ(reports[2].failure_reason(), "oom_killed");
}

TEST_F(RunExecutorTest, SwapBenchmarksGetAZramDeviceForTheRunOnly) {
  RunExecutorOptions options = Options();
  options.zram_swap_bytes = 1 * kGiB;
  v1::Assignment a = Thrash();
  a.set_benchmark("swap-in");
  a.clear_params();
  (*a.mutable_params())["region_size"] = "64M";
  auto reports = Execute(a, options);
  EXPECT_EQ(host_.events,
            (std::vector<std::string>{"swap 1073741824", "run swap-in", "stop /dev/zram0"}));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].result().environment().at("swap.provisioned"),
            "/dev/zram0 1G (provisioned by the agent for this run)");

  // A benchmark that needs no swap gets none.
  host_.events.clear();
  Execute(Thrash(), options);
  EXPECT_EQ(host_.events, (std::vector<std::string>{"run filemap-thrash"}));

  // No device, no run.
  host_.events.clear();
  host_.swap_error = "/sys/block/zram0: no such device";
  reports = Execute(a, options);
  EXPECT_EQ(host_.events, (std::vector<std::string>{"swap 1073741824"}));
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_FALSE(reports[2].succeeded());
  EXPECT_EQ(reports[2].failure_reason(), "zram_swap: /sys/block/zram0: no such device");
}

TEST_F(RunExecutorTest, ResultIsSpooledBeforeUploadAndRemovedOnAck) {
  std::vector<std::string> spooled_at_upload;
  controller_.on_report = [&](const v1::ReportResultRequest& sent) {
    spooled_at_upload = Spooled();
    if (spooled_at_upload.size() == 1) {
      auto on_disk = spool_.Load(spooled_at_upload[0]);
      EXPECT_TRUE(on_disk.ok()) << on_disk.status();
      if (on_disk.ok()) {
        EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*on_disk, sent));
      }
    }
    return Delivery::kAccepted;
  };
  auto reports = Execute(Thrash());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].succeeded());
  EXPECT_EQ(spooled_at_upload.size(), 1u) << "the result must be on disk before it is sent";
  EXPECT_TRUE(Spooled().empty()) << "an acknowledged result leaves the spool";
}

TEST_F(RunExecutorTest, DeliveryIsRetriedWithBackoffUntilAccepted) {
  int calls = 0;
  controller_.on_report = [&](const v1::ReportResultRequest&) {
    return ++calls < 4 ? Delivery::kFailed : Delivery::kAccepted;
  };
  auto reports = Execute(Thrash());
  EXPECT_EQ(reports.size(), 4u);
  EXPECT_TRUE(Spooled().empty());
  // A backoff between attempts (heartbeat waits are 10 s, these backoffs under 5 s).
  int backoffs = 0;
  for (auto w : clock_.waits()) {
    if (w != std::chrono::seconds(10)) ++backoffs;
  }
  EXPECT_EQ(backoffs, 3);
}

TEST_F(RunExecutorTest, RefusedResultIsFinalAndLeavesTheSpool) {
  controller_.on_report = [](const v1::ReportResultRequest&) { return Delivery::kRefused; };
  auto reports = Execute(Thrash());
  EXPECT_EQ(reports.size(), 1u) << "a refusal is not retried";
  EXPECT_TRUE(Spooled().empty());
}

TEST_F(RunExecutorTest, ResultStaysSpooledWhenDeliveryFailsAndTheAgentStops) {
  int calls = 0;
  controller_.on_report = [&](const v1::ReportResultRequest&) {
    if (++calls == 3) stopping_ = true;  // SIGTERM while the controller is away
    return Delivery::kFailed;
  };
  auto reports = Execute(Thrash());
  EXPECT_EQ(reports.size(), 3u);
  auto spooled = Spooled();
  ASSERT_EQ(spooled.size(), 1u) << "the next life sends it";
  auto on_disk = spool_.Load(spooled[0]);
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->run_id(), 17);
  EXPECT_TRUE(on_disk->succeeded());
}

TEST_F(RunExecutorTest, StoppingCancelsTheRun) {
  stopping_ = true;
  bool cancelled = false;
  host_.on_run = [&](const runner::WorkloadInvocation& inv) {
    cancelled = inv.cancel->load();
    runner::WorkloadOutcome outcome;
    outcome.failure_reason = "cancelled";
    return outcome;
  };
  controller_.on_report = [](const v1::ReportResultRequest&) { return Delivery::kFailed; };
  auto reports = Execute(Thrash());
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(reports.size(), 1u) << "one try, then the spool keeps it";
  EXPECT_EQ(Spooled().size(), 1u);
}

TEST_F(RunExecutorTest, HeartbeatsRenewTheLeaseWhileTheWorkloadRuns) {
  host_.on_run = [&](const runner::WorkloadInvocation& inv) {
    // Runs until three heartbeats went out (the fake clock makes each interval pass at once).
    while (controller_.heartbeats().size() < 3 && !inv.cancel->load()) std::this_thread::yield();
    return testing::SucceededOutcome();
  };
  auto reports = Execute(Thrash());
  auto heartbeats = controller_.heartbeats();
  ASSERT_GE(heartbeats.size(), 3u);
  for (const auto& h : heartbeats) {
    EXPECT_EQ(h.board(), "board-1");
    EXPECT_EQ(h.run_id(), 17);
    EXPECT_EQ(h.attempt_id(), "0f6c2a4e-attempt");
  }
  for (auto w : clock_.waits()) EXPECT_EQ(w, std::chrono::seconds(10));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].succeeded()) << reports[0].failure_reason();
}

TEST_F(RunExecutorTest, LostLeaseStopsTheRunAndNoSuccessIsUploaded) {
  controller_.on_heartbeat = [](const v1::HeartbeatRequest&) { return LeaseStatus::kLost; };
  bool stopped = false;
  host_.on_run = [&](const runner::WorkloadInvocation& inv) {
    while (!inv.cancel->load()) std::this_thread::yield();  // runs until stopped
    stopped = true;
    // The workload finished in the same instant: its result must still not count.
    return testing::SucceededOutcome();
  };
  auto reports = Execute(Thrash());
  EXPECT_TRUE(stopped);
  EXPECT_EQ(controller_.heartbeats().size(), 1u) << "no heartbeats for a lost lease";
  for (const auto& r : reports) EXPECT_FALSE(r.succeeded());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].failure_reason(), "cancelled");
}

TEST_F(RunExecutorTest, AnUnreachableControllerDoesNotStopTheRun) {
  controller_.on_heartbeat = [](const v1::HeartbeatRequest&) { return LeaseStatus::kUnreachable; };
  host_.on_run = [&](const runner::WorkloadInvocation& inv) {
    while (controller_.heartbeats().size() < 2 && !inv.cancel->load()) std::this_thread::yield();
    EXPECT_FALSE(inv.cancel->load());
    return testing::SucceededOutcome();
  };
  auto reports = Execute(Thrash());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].succeeded()) << reports[0].failure_reason();
}

}  // namespace
}  // namespace faultline::agent
