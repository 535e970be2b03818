// Creates real memory cgroups on this host (root needed); skips where none is usable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "agent/sys/cgroup.h"
#include "agent/sys/file_io.h"
#include "agent/sys/testing/cgroup_cleanup.h"

namespace faultline::sys {
namespace {

std::optional<CgroupBackend> BackendOrSkipReason(std::string* reason) {
  if (::geteuid() != 0) {
    *reason = "needs root to create cgroups";
    return std::nullopt;
  }
  return DetectCgroupBackend({}, reason);
}

std::string TestName(std::string_view stem) {
  return std::string(stem) + "-" + std::to_string(::getpid());
}

TEST(MemoryCgroupIntegration, CreateLimitAddStatsDestroy) {
  std::string reason;
  auto backend = BackendOrSkipReason(&reason);
  if (!backend) GTEST_SKIP() << "no memory cgroup: " << reason;

  MemcgLimits limits{256u << 20, 192u << 20, 64u << 20};
  std::string error;
  auto cgroup = MemoryCgroup::Create(*backend, TestName("test-create"), limits, &error);
  ASSERT_TRUE(cgroup) << error;
  const std::string path = cgroup->path();
  ASSERT_TRUE(std::filesystem::is_directory(path));

  const auto& applied = cgroup->AppliedLimits();
  EXPECT_EQ(applied.at("memcg.version"), CgroupVersionName(backend->version));
  EXPECT_EQ(applied.at("memcg.path"), path);
  if (backend->version == CgroupVersion::kV1) {
    EXPECT_EQ(applied.at("memcg.memory_max"), "memory.limit_in_bytes=268435456");
    EXPECT_EQ(ReadFileToString(path + "/memory.limit_in_bytes", nullptr), "268435456\n");
    EXPECT_EQ(ReadFileToString(path + "/memory.soft_limit_in_bytes", nullptr), "201326592\n");
    if (PathExists(path + "/memory.memsw.limit_in_bytes")) {
      EXPECT_EQ(ReadFileToString(path + "/memory.memsw.limit_in_bytes", nullptr), "335544320\n");
    }
  } else {
    EXPECT_EQ(ReadFileToString(path + "/memory.max", nullptr), "268435456\n");
    EXPECT_EQ(ReadFileToString(path + "/memory.high", nullptr), "201326592\n");
  }

  // A child that blocks on a pipe until killed: no timing involved.
  int block[2];
  ASSERT_EQ(::pipe(block), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(block[1]);
    char c;
    while (::read(block[0], &c, 1) != 0) {
    }
    ::_exit(0);
  }
  ::close(block[0]);
  ASSERT_TRUE(cgroup->AddProcess(child, &error)) << error;
  auto procs = cgroup->Processes(&error);
  ASSERT_TRUE(procs) << error;
  EXPECT_NE(std::find(procs->begin(), procs->end(), child), procs->end());

  auto stats = cgroup->ReadStats(&error);
  ASSERT_TRUE(stats) << error;
  EXPECT_GT(stats->size(), 5u);
  auto events = cgroup->ReadEvents(&error);
  ASSERT_TRUE(events) << error;
  EXPECT_EQ(events->count("oom_kill"), 1u);
  EXPECT_EQ(events->at("oom_kill"), 0u);

  ASSERT_TRUE(cgroup->Destroy(&error)) << error;
  EXPECT_FALSE(std::filesystem::exists(path));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(block[1]);
}

TEST(MemoryCgroupIntegration, DestructorRemovesAndMoveTransfersOwnership) {
  std::string reason;
  auto backend = BackendOrSkipReason(&reason);
  if (!backend) GTEST_SKIP() << "no memory cgroup: " << reason;
  std::string error;
  std::string path;
  {
    auto cgroup = MemoryCgroup::Create(*backend, TestName("test-raii"), {}, &error);
    ASSERT_TRUE(cgroup) << error;
    MemoryCgroup moved = std::move(*cgroup);
    path = moved.path();
    EXPECT_TRUE(cgroup->path().empty());
    EXPECT_TRUE(std::filesystem::is_directory(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(MemoryCgroupIntegration, CreateFailsWhenNameExists) {
  std::string reason;
  auto backend = BackendOrSkipReason(&reason);
  if (!backend) GTEST_SKIP() << "no memory cgroup: " << reason;
  std::string error;
  auto first = MemoryCgroup::Create(*backend, TestName("test-dup"), {}, &error);
  ASSERT_TRUE(first) << error;
  EXPECT_FALSE(MemoryCgroup::Create(*backend, TestName("test-dup"), {}, &error));
  EXPECT_NE(error.find("File exists"), std::string::npos) << error;
}

TEST(MemoryCgroupIntegration, RemoveStaleRunCgroupsKillsLeftovers) {
  std::string reason;
  auto backend = BackendOrSkipReason(&reason);
  if (!backend) GTEST_SKIP() << "no memory cgroup: " << reason;

  const std::string base = TestName("stale");  // the parent's pid: the same name in the child
  // A "crashed agent": creates the cgroup, puts a process in, dies without cleaning up.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    std::string child_error;
    auto cgroup = MemoryCgroup::Create(*backend, RunCgroupName(base), {}, &child_error);
    if (!cgroup) ::_exit(1);
    pid_t orphan = ::fork();
    if (orphan == 0) {
      ::close(ready[1]);  // EOF once the test closes its end, or dies
      char c;
      while (::read(ready[0], &c, 1) != 0) {
      }
      ::_exit(0);
    }
    if (!cgroup->AddProcess(orphan, &child_error)) ::_exit(2);
    ::_exit(0);  // no destructors: the cgroup and the orphan stay behind
  }
  ::close(ready[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(agent, &status, 0), agent);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::string path = backend->parent_dir + "/faultline/" + RunCgroupName(base, agent);
  ASSERT_TRUE(std::filesystem::is_directory(path));

  // Another agent on this host, alive, with a run going: its cgroup stays (the live agent
  // here is a child that waits, so that the remover is not the same process).
  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t live = ::fork();
  ASSERT_GE(live, 0);
  if (live == 0) {
    ::close(hold[1]);
    char c;
    while (::read(hold[0], &c, 1) != 0) {
    }
    ::_exit(0);
  }
  ::close(hold[0]);
  std::string error;
  const std::string live_name = RunCgroupName(TestName("live"), live);
  auto live_cgroup = MemoryCgroup::Create(*backend, live_name, {}, &error);
  ASSERT_TRUE(live_cgroup) << error;

  auto removed = RemoveStaleRunCgroups(*backend, &error);
  ASSERT_TRUE(removed) << error;
  EXPECT_GE(*removed, 1);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(live_cgroup->path())) << "another agent's run was killed";
  ::close(ready[1]);
  ::close(hold[1]);
  ASSERT_EQ(::waitpid(live, &status, 0), live);
  EXPECT_TRUE(live_cgroup->Destroy(&error)) << error;
}

TEST(MemoryCgroupIntegration, CurrentCgroupDirExists) {
  std::string reason;
  auto backend = BackendOrSkipReason(&reason);
  if (!backend) GTEST_SKIP() << "no memory cgroup: " << reason;
  std::string error;
  auto dir = CurrentCgroupDir(*backend, &error);
  ASSERT_TRUE(dir) << error;
  EXPECT_TRUE(std::filesystem::is_directory(*dir)) << *dir;
}

FAULTLINE_REMOVE_EMPTY_CGROUP_PARENT_AT_EXIT();

}  // namespace
}  // namespace faultline::sys
