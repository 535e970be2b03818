#include "agent/runner/runner.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace faultline::runner {
namespace {

TEST(BuildWorkloadArgv, PassesKnobsDurationDirAndProgressFd) {
  WorkloadInvocation invocation;
  invocation.workload_binary = "/opt/faultline-workload";
  invocation.benchmark = "filemap-thrash";
  invocation.params = {{"threads", "40"}, {"file_size", "16M"}};
  invocation.duration_seconds = 60;
  invocation.work_dir = "/scratch";
  invocation.limits.memory_max = 1 << 30;  // applied by the cgroup, not passed
  EXPECT_EQ(BuildWorkloadArgv(invocation),
            (std::vector<std::string>{"/opt/faultline-workload", "filemap-thrash", "--file_size",
                                      "16M", "--threads", "40", "--duration", "60s", "--dir",
                                      "/scratch", "--progress-fd", "3", "--inherit-cgroup"}));
}

// The job's run options go whole, as the JSON the agent was given; none: no flag.
TEST(BuildWorkloadArgv, PassesTheRunOptionsWhole) {
  WorkloadInvocation invocation;
  invocation.workload_binary = "/opt/faultline-workload";
  invocation.benchmark = "swap-in";
  invocation.duration_seconds = 5;
  invocation.run_options =
      R"({"events":["sw:page-faults"],"mmap_lock_waits":true,"profile":{"frequency_hz":99}})";
  EXPECT_EQ(BuildWorkloadArgv(invocation),
            (std::vector<std::string>{"/opt/faultline-workload", "swap-in", "--duration", "5s",
                                      "--run-options", invocation.run_options, "--progress-fd", "3",
                                      "--inherit-cgroup"}));
  invocation.run_options = "{}";
  EXPECT_EQ(BuildWorkloadArgv(invocation),
            (std::vector<std::string>{"/opt/faultline-workload", "swap-in", "--duration", "5s",
                                      "--progress-fd", "3", "--inherit-cgroup"}));
}

TEST(ParseProgressLine, StartedAndMeasuring) {
  auto started = ParseProgressLine("phase=started");
  ASSERT_TRUE(started);
  EXPECT_EQ(started->phase, WorkloadProgress::Phase::kStarted);
  auto measuring = ParseProgressLine("phase=measuring second=3 rounds=1234");
  ASSERT_TRUE(measuring);
  EXPECT_EQ(measuring->phase, WorkloadProgress::Phase::kMeasuring);
  EXPECT_EQ(measuring->second, 3u);
  EXPECT_EQ(measuring->rounds, 1234u);
  EXPECT_FALSE(ParseProgressLine("hello"));
  EXPECT_FALSE(ParseProgressLine("phase=exploded"));
  EXPECT_FALSE(ParseProgressLine("phase=measuring second=x"));
}

TEST(LastLine, SkipsTrailingNewlines) {
  EXPECT_EQ(LastLine("a\nb\n\n"), "b");
  EXPECT_EQ(LastLine("only"), "only");
  EXPECT_EQ(LastLine(""), "");
}

ChildObservations Exited(int code) {
  ChildObservations o;
  o.exited = true;
  o.exit_code = code;
  return o;
}

ChildObservations Signalled(int sig) {
  ChildObservations o;
  o.signal = sig;
  return o;
}

TEST(ClassifyChildOutcome, SuccessNeedsExitZeroAndAResult) {
  auto ok = Exited(0);
  ok.stdout_text = "{\"benchmark\":\"swap-in\"}\n";
  EXPECT_TRUE(ClassifyChildOutcome(ok).succeeded);
  auto empty = Exited(0);
  EXPECT_FALSE(ClassifyChildOutcome(empty).succeeded);
  EXPECT_EQ(ClassifyChildOutcome(empty).failure_reason, "exit code 0 without a result on stdout");
}

TEST(ClassifyChildOutcome, ExitCodeCarriesLastStderrLine) {
  auto o = Exited(3);
  o.stderr_tail = "warming up\nfaultline-workload: no swap: swap-in needs swap\n";
  EXPECT_EQ(ClassifyChildOutcome(o).failure_reason, "exit code 3: no swap: swap-in needs swap");
  EXPECT_EQ(ClassifyChildOutcome(Exited(1)).failure_reason, "exit code 1");
}

TEST(ClassifyChildOutcome, OomBeatsCancelAndTimeout) {
  auto o = Signalled(SIGKILL);
  o.memcg_oom_kills = 1;
  o.cancel_requested = true;
  o.timed_out = true;
  EXPECT_EQ(ClassifyChildOutcome(o).failure_reason, "oom_killed");
}

TEST(ClassifyChildOutcome, UnexplainedSigkillDuringSystemOomIsOom) {
  auto o = Signalled(SIGKILL);
  o.system_oom_kills_during_run = 1;
  EXPECT_EQ(ClassifyChildOutcome(o).failure_reason, "oom_killed");
  o.we_sent_sigkill = true;
  o.timed_out = true;
  EXPECT_EQ(ClassifyChildOutcome(o).failure_reason, "timeout");
  EXPECT_EQ(ClassifyChildOutcome(Signalled(SIGKILL)).failure_reason, "killed by signal 9");
}

TEST(ClassifyChildOutcome, CancelledEvenIfItExitedCleanly) {
  auto o = Exited(0);
  o.stdout_text = "{}";
  o.cancel_requested = true;
  EXPECT_EQ(ClassifyChildOutcome(o).failure_reason, "cancelled");
  auto interrupted = Exited(4);
  interrupted.cancel_requested = true;
  EXPECT_EQ(ClassifyChildOutcome(interrupted).failure_reason, "cancelled");
}

TEST(ClassifyChildOutcome, TimeoutWhenNotCancelled) {
  auto o = Exited(4);
  o.timed_out = true;
  EXPECT_EQ(ClassifyChildOutcome(o).failure_reason, "timeout");
}

TEST(RunWorkload, RejectsBadParamsBeforeTouchingCgroups) {
  WorkloadInvocation invocation;
  invocation.benchmark = "filemap-thrash";
  invocation.params = {{"threads", "0"}};
  invocation.duration_seconds = 1;
  invocation.cgroup_backend = {sys::CgroupVersion::kV2, "/nonexistent", "/nonexistent"};
  auto outcome = RunWorkload(invocation);
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_EQ(outcome.failure_reason.rfind("invalid params: threads: ", 0), 0u)
      << outcome.failure_reason;
  invocation.params = {{"bogus", "1"}};
  EXPECT_NE(RunWorkload(invocation).failure_reason.find("unknown knob"), std::string::npos);
}

}  // namespace
}  // namespace faultline::runner
