// Runs the real faultline-workload under real memory cgroups (and zram swap for the OOM
// case). Skips where the host has no usable memory cgroup.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/runner/runner.h"
#include "agent/sys/testing/cgroup_cleanup.h"
#include "agent/sys/testing/zram_swap.h"
#include "agent/sys/vmstat.h"

namespace faultline::runner {
namespace {

class RunnerIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    auto backend = sys::DetectCgroupBackend({}, &reason);
    if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
    backend_ = *backend;
    char pattern[] = "/tmp/faultline-runner-test-XXXXXX";
    work_dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override {
    if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_);
  }

  WorkloadInvocation Invocation(std::string run_id, std::string benchmark) {
    WorkloadInvocation invocation;
    invocation.workload_binary = FAULTLINE_WORKLOAD_BINARY;
    invocation.benchmark = std::move(benchmark);
    invocation.cgroup_backend = backend_;
    invocation.run_id = std::move(run_id) + "-" + std::to_string(::getpid());
    invocation.work_dir = work_dir_;
    invocation.grace_seconds = 60;
    return invocation;
  }

  std::string CgroupPath(const WorkloadInvocation& invocation) const {
    return backend_.parent_dir + "/faultline/" + sys::RunCgroupName(invocation.run_id);
  }

  sys::CgroupBackend backend_;
  std::string work_dir_;
};

// A preset param runs in the run's cgroup (the workload must not nest a cgroup of its own
// for the preset's limits) and explicit params win over the preset's.
TEST_F(RunnerIntegration, PresetParamRunsInTheRunCgroup) {
  auto invocation = Invocation("preset", "filemap-thrash");
  invocation.params = {{"preset", "v2-file-thrash-small"}, {"threads", "2"}, {"file_size", "4M"}};
  invocation.duration_seconds = 1;
  invocation.limits.memory_max = 256u << 20;
  auto outcome = RunWorkload(invocation);
  ASSERT_TRUE(outcome.succeeded) << outcome.failure_reason << "\n" << outcome.stderr_tail;
  auto result = nlohmann::json::parse(outcome.result_json);
  EXPECT_EQ(result["environment"]["memcg.current"], CgroupPath(invocation));
  EXPECT_EQ(result["params"]["preset"], "v2-file-thrash-small");
  EXPECT_EQ(result["params"]["threads"], "2");
  EXPECT_EQ(result["environment"].count("memcg.memory_max"), 0u);  // the runner records it
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
}

TEST_F(RunnerIntegration, FilemapThrashSucceedsUnderMemcg) {
  auto invocation = Invocation("filemap", "filemap-thrash");
  invocation.params = {{"threads", "2"}, {"file_size", "4M"}};
  invocation.duration_seconds = 2;
  invocation.limits.memory_max = 256u << 20;
  invocation.limits.swap_max = 0;
  std::vector<WorkloadProgress> progress;
  invocation.on_progress = [&](const WorkloadProgress& p) { progress.push_back(p); };

  auto outcome = RunWorkload(invocation);
  ASSERT_TRUE(outcome.succeeded) << outcome.failure_reason << "\n" << outcome.stderr_tail;
  EXPECT_TRUE(outcome.cleanup_error.empty()) << outcome.cleanup_error;
  auto result = nlohmann::json::parse(outcome.result_json);
  EXPECT_EQ(result["benchmark"], "filemap-thrash");
  ASSERT_EQ(result["samples"].size(), 2u);
  EXPECT_GT(result["rounds"].get<uint64_t>(), 0u);
  // The workload ran inside the run's cgroup, not where the test is.
  EXPECT_EQ(result["environment"]["memcg.current"], CgroupPath(invocation));
  EXPECT_EQ(outcome.applied_limits.at("memcg.path"), CgroupPath(invocation));
  if (backend_.version == sys::CgroupVersion::kV1) {
    EXPECT_EQ(outcome.applied_limits.at("memcg.memory_max"), "memory.limit_in_bytes=268435456");
  }
  EXPECT_EQ(outcome.memcg_events.count("oom_kill"), 1u);
  EXPECT_EQ(outcome.memcg_events.at("oom_kill"), 0u);
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
  ASSERT_GE(progress.size(), 3u);  // started + 2 seconds
  EXPECT_EQ(progress.front().phase, WorkloadProgress::Phase::kStarted);
  EXPECT_EQ(progress.back().second, 2u);
  EXPECT_EQ(progress.back().rounds, result["rounds"].get<uint64_t>());
  EXPECT_TRUE(std::filesystem::is_empty(work_dir_));
}

// The job's perf events reach the workload (in its run options, whole); a tracepoint this
// kernel lacks fails the run with the workload's reason, naming the events and the event.
TEST_F(RunnerIntegration, EventsAreCountedOrTheirRefusalIsTheReason) {
  auto invocation = Invocation("events", "filemap-thrash");
  invocation.params = {{"threads", "2"}, {"file_size", "4M"}};
  invocation.duration_seconds = 1;
  invocation.limits.memory_max = 256u << 20;
  invocation.run_options = R"({"events":["mmap_lock:mmap_lock_start_locking","sw:page-faults"]})";
  auto outcome = RunWorkload(invocation);
  ASSERT_TRUE(outcome.succeeded) << outcome.failure_reason << "\n" << outcome.stderr_tail;
  auto result = nlohmann::json::parse(outcome.result_json);
  EXPECT_GE(result["counters"]["perf.mmap_lock:mmap_lock_start_locking"].get<double>(),
            result["rounds"].get<double>())
      << result["counters"].dump();
  EXPECT_GT(result["counters"]["perf.sw:page-faults"].get<double>(), 0);

  invocation = Invocation("events-refused", "filemap-thrash");
  invocation.params = {{"threads", "1"}, {"file_size", "1M"}};
  invocation.duration_seconds = 1;
  invocation.limits.memory_max = 256u << 20;
  invocation.run_options = R"({"events":["sw:page-faults","mmap_lock:no_such_tracepoint"]})";
  outcome = RunWorkload(invocation);
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_EQ(outcome.failure_reason.rfind("exit code 2: --events: 'mmap_lock:no_such_tracepoint': "
                                         "no tracepoint mmap_lock:no_such_tracepoint on this "
                                         "kernel (mmap_lock has: ",
                                         0),
            0u)
      << outcome.failure_reason;
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
  EXPECT_TRUE(std::filesystem::is_empty(work_dir_));
}

TEST_F(RunnerIntegration, CancelStopsTheRunQuickly) {
  auto invocation = Invocation("cancel", "filemap-thrash");
  invocation.params = {{"threads", "2"}, {"file_size", "1M"}};
  invocation.duration_seconds = 600;
  std::atomic<bool> cancel{false};
  invocation.cancel = &cancel;
  invocation.on_progress = [&](const WorkloadProgress& p) {
    if (p.phase == WorkloadProgress::Phase::kStarted) cancel.store(true);
  };
  const auto start = std::chrono::steady_clock::now();
  auto outcome = RunWorkload(invocation);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_EQ(outcome.failure_reason, "cancelled") << outcome.stderr_tail;
  EXPECT_TRUE(outcome.result_json.empty());
  EXPECT_LT(took, std::chrono::seconds(10));  // SIGTERM honoured, not the 600 s duration
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
}

TEST_F(RunnerIntegration, TimeoutEscalatesToSigkill) {
  // A stand-in workload that ignores SIGTERM and never finishes.
  const std::string script = work_dir_ + "/stubborn-workload";
  std::ofstream(script) << "#!/bin/sh\ntrap '' TERM\nexec sleep 1000\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  auto invocation = Invocation("timeout", "filemap-thrash");
  invocation.workload_binary = script;
  invocation.duration_seconds = 1;
  invocation.grace_seconds = 0;
  invocation.kill_after_term = std::chrono::milliseconds(200);
  auto outcome = RunWorkload(invocation);
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_EQ(outcome.failure_reason, "timeout");
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
}

TEST_F(RunnerIntegration, ExecFailureIsReported) {
  auto invocation = Invocation("noexec", "filemap-thrash");
  invocation.workload_binary = work_dir_ + "/does-not-exist";
  invocation.duration_seconds = 1;
  auto outcome = RunWorkload(invocation);
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_NE(outcome.failure_reason.find("No such file"), std::string::npos)
      << outcome.failure_reason;
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
}

TEST_F(RunnerIntegration, NoSwapExitCodeBecomesTheReason) {
  if (sys::HasSwap()) GTEST_SKIP() << "swap is active on this host";
  auto invocation = Invocation("noswap", "swap-in");
  invocation.duration_seconds = 1;
  auto outcome = RunWorkload(invocation);
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_EQ(outcome.failure_reason.rfind("exit code 3: no swap", 0), 0u) << outcome.failure_reason;
}

TEST_F(RunnerIntegration, RegionLargerThanMemoryMaxIsOomKilled) {
  FAULTLINE_ZRAM_SWAP_OR_SKIP(swap, 512ull << 20);
  if (backend_.version == sys::CgroupVersion::kV1 &&
      !std::filesystem::exists(backend_.parent_dir + "/memory.memsw.limit_in_bytes")) {
    GTEST_SKIP() << "v1 without swap accounting: swap_max 0 cannot be enforced";
  }
  auto invocation = Invocation("oom", "swap-in");
  // With swap_max 0 the region cannot go to swap, so filling 256M in 64M must OOM.
  invocation.params = {{"region_size", "256M"}, {"readers", "1"}, {"pageout_threads", "0"}};
  invocation.duration_seconds = 2;
  invocation.limits.memory_max = 64u << 20;
  invocation.limits.swap_max = 0;
  auto outcome = RunWorkload(invocation);
  EXPECT_FALSE(outcome.succeeded);
  EXPECT_EQ(outcome.failure_reason, "oom_killed") << outcome.stderr_tail;
  EXPECT_GE(outcome.memcg_events["oom_kill"], 1u);
  EXPECT_FALSE(std::filesystem::exists(CgroupPath(invocation)));
}

FAULTLINE_REMOVE_EMPTY_CGROUP_PARENT_AT_EXIT();

}  // namespace
}  // namespace faultline::runner
