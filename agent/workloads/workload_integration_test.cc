// Runs the real faultline-workload binary. Touches real swap and cgroups, so "integration".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "agent/sys/cgroup.h"
#include "agent/sys/testing/cgroup_cleanup.h"
#include "agent/sys/testing/zram_swap.h"
#include "agent/sys/vmstat.h"

extern char** environ;

namespace faultline::workloads {
namespace {

struct ProcessResult {
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
};

// Spawns the workload with stdout, stderr and a progress pipe on fd 3, reads all three to
// EOF, and calls on_progress with each chunk of progress text (for signalling tests).
ProcessResult RunWorkload(std::vector<std::string> args,
                          const std::function<void(pid_t, const std::string&)>& on_progress = {}) {
  int out[2], err[2], progress[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(progress, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_adddup2(&actions, progress[1], 3);
  args.insert(args.begin(), FAULTLINE_WORKLOAD_BINARY);
  args.push_back("--progress-fd");
  args.push_back("3");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  ::close(progress[1]);
  ProcessResult result;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << rc;
    return result;
  }
  struct pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {progress[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 3;
  while (open_fds > 0) {
    ::poll(fds, 3, -1);
    for (int i = 0; i < 3; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i < 2) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (on_progress) {
        on_progress(pid, std::string(buffer, static_cast<size_t>(n)));
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/faultline-workload-test-XXXXXX";
    path_ = ::mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::string path_;
};

void ExpectConsistentResult(const nlohmann::json& result, uint32_t seconds) {
  ASSERT_EQ(result["samples"].size(), seconds);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < seconds; ++i) {
    EXPECT_EQ(result["samples"][i]["second"], i + 1);
    sum += result["samples"][i]["rounds"].get<uint64_t>();
  }
  const uint64_t rounds = result["rounds"].get<uint64_t>();
  EXPECT_GT(rounds, 0u);
  EXPECT_EQ(sum, rounds);
  EXPECT_EQ(result["duration_seconds"], seconds);
  EXPECT_NEAR(result["throughput_rounds_per_second"].get<double>(),
              static_cast<double>(rounds) / seconds, 1e-9);
  EXPECT_EQ(result["environment"]["page_size"], std::to_string(::sysconf(_SC_PAGESIZE)));
  EXPECT_TRUE(result["counters"].contains("pgfault"));
  EXPECT_TRUE(result["counters"].contains("rusage_minflt"));
}

TEST(WorkloadBinary, FilemapThrashPrintsResultAndLeavesNoFiles) {
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "4M", "--duration",
                          "2s", "--dir", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["benchmark"], "filemap-thrash");
  ExpectConsistentResult(result, 2);
  EXPECT_EQ(result["params"]["threads"], "2");
  EXPECT_EQ(result["params"]["file_size"], "4M");
  EXPECT_EQ(result["params"]["file_fill"], "sparse");
  EXPECT_EQ(result["warmup_seconds"], 0);
  EXPECT_EQ(result["environment"]["work_dir"], dir.path());
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, FilemapThrashWrittenWithMunmapChurn) {
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "1", "--file-size", "1M",
                          "--file_fill", "written", "--munmap-threads", "1", "--duration", "1s",
                          "--dir", dir.path()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  EXPECT_GT(result["counters"]["munmap_rounds"].get<double>(), 0);
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, BadKnobIsAUsageError) {
  auto run = RunWorkload({"filemap-thrash", "--threads", "0", "--duration", "1s"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--threads"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("between 1 and 4096"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(WorkloadBinary, SigtermInterruptsAndCleansUp) {
  TempDir dir;
  bool signalled = false;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "1M", "--duration",
                          "600s", "--dir", dir.path()},
                         [&](pid_t pid, const std::string& progress) {
                           if (!signalled && progress.find("phase=started") != std::string::npos) {
                             ::kill(pid, SIGTERM);
                             signalled = true;
                           }
                         });
  EXPECT_TRUE(signalled);
  EXPECT_EQ(run.exit_code, 4);
  EXPECT_NE(run.err.find("interrupted"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
  EXPECT_TRUE(dir.empty());
}

TEST(WorkloadBinary, OwnMemcgWhenLimitsGiven) {
  std::string reason;
  auto backend = sys::DetectCgroupBackend({}, &reason);
  if (::geteuid() != 0 || !backend) GTEST_SKIP() << "no usable memory cgroup: " << reason;
  TempDir dir;
  auto run = RunWorkload({"filemap-thrash", "--threads", "2", "--file-size", "4M", "--duration",
                          "1s", "--dir", dir.path(), "--memory-max", "256M", "--memory-high",
                          "192M", "--swap-max", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  const auto& env = result["environment"];
  ASSERT_TRUE(env.contains("memcg.path")) << env.dump();
  EXPECT_EQ(env["memcg.version"], sys::CgroupVersionName(backend->version));
  EXPECT_EQ(env["memcg.current"], env["memcg.path"]);
  if (backend->version == sys::CgroupVersion::kV1) {
    EXPECT_EQ(env["memcg.memory_max"], "memory.limit_in_bytes=268435456");
    EXPECT_EQ(env["memcg.memory_high"], "memory.soft_limit_in_bytes=201326592 (v1 has no memory.high)");
  } else {
    EXPECT_EQ(env["memcg.memory_max"], "memory.max=268435456");
  }
  EXPECT_FALSE(std::filesystem::exists(env["memcg.path"].get<std::string>()));
}

TEST(WorkloadBinary, SwapInRefusesWithoutSwap) {
  if (sys::HasSwap()) GTEST_SKIP() << "swap is active on this host; refusal cannot be observed";
  auto run = RunWorkload({"swap-in", "--duration", "1s"});
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.err.find("no swap"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(WorkloadBinary, SwapInRunsWithZramSwap) {
  std::string reason;
  auto swap = sys::testing::ScopedZramSwap::Start(512ull << 20, &reason);
  if (!swap) GTEST_SKIP() << "zram swap unavailable: " << reason;
  auto run = RunWorkload({"swap-in", "--region-size", "64M", "--readers", "2",
                          "--pageout-threads", "1", "--fill", "nonzero", "--duration", "2s"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["benchmark"], "swap-in");
  ExpectConsistentResult(result, 2);
  EXPECT_EQ(result["environment"]["swap_present"], "true");
  EXPECT_GT(result["counters"]["pageout_rounds"].get<double>(), 0);
  EXPECT_GT(result["counters"]["pswpout"].get<double>(), 0);
}

TEST(WorkloadBinary, MmapWriterPressureRunsWithZramSwap) {
  std::string reason;
  auto swap = sys::testing::ScopedZramSwap::Start(512ull << 20, &reason);
  if (!swap) GTEST_SKIP() << "zram swap unavailable: " << reason;
  auto run = RunWorkload({"mmap-writer-pressure", "--region-size", "32M", "--readers", "2",
                          "--writers", "2", "--duration", "1s"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto result = nlohmann::json::parse(run.out);
  ExpectConsistentResult(result, 1);
  EXPECT_GT(result["counters"]["writer_rounds"].get<double>(), 0);
  EXPECT_EQ(result["params"]["writers"], "2");
  EXPECT_EQ(result["params"]["fill"], "nonzero");
}

FAULTLINE_REMOVE_EMPTY_CGROUP_PARENT_AT_EXIT();

}  // namespace
}  // namespace faultline::workloads
