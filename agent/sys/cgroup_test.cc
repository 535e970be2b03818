#include "agent/sys/cgroup.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace faultline::sys {
namespace {

// A fake /sys/fs/cgroup in a temp dir (oomd-style fixture).
class FakeCgroupTree {
 public:
  FakeCgroupTree() {
    char pattern[] = "/tmp/faultline-cgroup-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
  }
  ~FakeCgroupTree() { std::filesystem::remove_all(root_); }
  const std::string& root() const { return root_; }
  void Write(const std::string& relative, const std::string& content) {
    auto path = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }

 private:
  std::string root_;
};

TEST(DetectCgroupBackend, PrefersV2WithMemoryController) {
  FakeCgroupTree tree;
  tree.Write("cgroup.controllers", "cpuset cpu io memory pids\n");
  std::string error;
  auto backend = DetectCgroupBackend({tree.root(), ""}, &error);
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->version, CgroupVersion::kV2);
  EXPECT_EQ(backend->parent_dir, tree.root());
  EXPECT_EQ(backend->hierarchy_root, tree.root());
}

TEST(DetectCgroupBackend, FallsBackToV1MemoryHierarchy) {
  FakeCgroupTree tree;
  tree.Write("unified/cgroup.controllers", "");  // hybrid: v2 without memory
  tree.Write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  tree.Write("memory/cgroup.procs", "1\n");
  std::string error;
  auto backend = DetectCgroupBackend({tree.root(), ""}, &error);
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->version, CgroupVersion::kV1);
  EXPECT_EQ(backend->parent_dir, tree.root() + "/memory");
}

TEST(DetectCgroupBackend, UsesHybridUnifiedWhenItHasMemory) {
  FakeCgroupTree tree;
  tree.Write("unified/cgroup.controllers", "memory pids\n");
  std::string error;
  auto backend = DetectCgroupBackend({tree.root(), ""}, &error);
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->version, CgroupVersion::kV2);
  EXPECT_EQ(backend->hierarchy_root, tree.root() + "/unified");
}

TEST(DetectCgroupBackend, ConfiguredV2ParentMustOfferMemory) {
  FakeCgroupTree tree;
  tree.Write("cgroup.controllers", "cpu memory\n");
  tree.Write("agent.service/cgroup.controllers", "cpu\n");
  std::string error;
  EXPECT_FALSE(DetectCgroupBackend({tree.root(), tree.root() + "/agent.service"}, &error));
  EXPECT_NE(error.find("agent.service"), std::string::npos) << error;

  tree.Write("agent.service/cgroup.controllers", "cpu memory\n");
  auto backend = DetectCgroupBackend({tree.root(), tree.root() + "/agent.service"}, &error);
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->parent_dir, tree.root() + "/agent.service");
  EXPECT_EQ(backend->hierarchy_root, tree.root());
}

// cgroup_parent: delegated (the packaged agent.yaml): on v2 the unit's cgroup, the parent
// of the agent's own leaf; on v1 the v1 hierarchy; refused outside an "agent" leaf.
TEST(DetectCgroupBackend, DelegatedIsTheUnitsCgroupOnV2) {
  FakeCgroupTree tree;
  tree.Write("cgroup.controllers", "cpu memory pids\n");
  tree.Write("system.slice/faultline-agent.service/cgroup.controllers", "memory pids\n");
  tree.Write("self-cgroup", "0::/system.slice/faultline-agent.service/agent\n");
  CgroupBackendOptions options{tree.root(), "delegated", tree.root() + "/self-cgroup"};
  std::string error;
  auto backend = DetectCgroupBackend(options, &error);
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->version, CgroupVersion::kV2);
  EXPECT_EQ(backend->parent_dir, tree.root() + "/system.slice/faultline-agent.service");

  tree.Write("self-cgroup", "0::/user.slice/session-1.scope\n");  // started by hand
  EXPECT_FALSE(DetectCgroupBackend(options, &error));
  EXPECT_NE(error.find("not in an 'agent' leaf"), std::string::npos) << error;
  EXPECT_NE(error.find("/user.slice/session-1.scope"), std::string::npos) << error;
}

TEST(DetectCgroupBackend, DelegatedIsTheV1HierarchyOnV1) {
  FakeCgroupTree tree;
  tree.Write("unified/cgroup.controllers", "");
  tree.Write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  tree.Write("memory/cgroup.procs", "1\n");
  tree.Write("self-cgroup", "12:memory:/system.slice/faultline-agent.service\n0::/x\n");
  std::string error;
  auto backend =
      DetectCgroupBackend({tree.root(), "delegated", tree.root() + "/self-cgroup"}, &error);
  ASSERT_TRUE(backend) << error;
  EXPECT_EQ(backend->version, CgroupVersion::kV1);
  EXPECT_EQ(backend->parent_dir, tree.root() + "/memory");
}

// A v2 directory configured on a board that has only v1: the message says what to do.
TEST(DetectCgroupBackend, V2ParentOnAV1BoardSaysWhatToDo) {
  FakeCgroupTree tree;
  tree.Write("unified/cgroup.controllers", "");
  tree.Write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  tree.Write("memory/cgroup.procs", "1\n");
  std::string error;
  EXPECT_FALSE(DetectCgroupBackend(
      {tree.root(), "/sys/fs/cgroup/system.slice/faultline-agent.service"}, &error));
  EXPECT_NE(error.find("this board has cgroup v1"), std::string::npos) << error;
  EXPECT_NE(error.find("'delegated'"), std::string::npos) << error;
}

TEST(DetectCgroupBackend, FailsWithoutMemoryCgroup) {
  FakeCgroupTree tree;
  tree.Write("cgroup.controllers", "cpu io\n");
  std::string error;
  EXPECT_FALSE(DetectCgroupBackend({tree.root(), ""}, &error));
  EXPECT_NE(error.find("no memory cgroup"), std::string::npos) << error;
}

TEST(PlanMemcgLimits, V2WritesHighThenMaxThenSwap) {
  MemcgLimits limits{256u << 20, 192u << 20, 0};
  auto plan = PlanMemcgLimits(CgroupVersion::kV2, limits, {false, true});
  ASSERT_EQ(plan.writes.size(), 3u);
  EXPECT_EQ(plan.writes[0].file, "memory.high");
  EXPECT_EQ(plan.writes[0].value, "201326592");
  EXPECT_EQ(plan.writes[1].file, "memory.max");
  EXPECT_EQ(plan.writes[1].value, "268435456");
  EXPECT_EQ(plan.writes[2].file, "memory.swap.max");
  EXPECT_EQ(plan.writes[2].value, "0");
  EXPECT_EQ(plan.applied["memcg.memory_max"], "memory.max=268435456");
  EXPECT_EQ(plan.applied["memcg.swap_max"], "memory.swap.max=0");
}

TEST(PlanMemcgLimits, V2WithoutSwapAccountingSaysSo) {
  auto plan = PlanMemcgLimits(CgroupVersion::kV2, {std::nullopt, std::nullopt, 0}, {false, false});
  EXPECT_TRUE(plan.writes.empty());
  EXPECT_EQ(plan.applied["memcg.swap_max"].rfind("not applied", 0), 0u);
}

TEST(PlanMemcgLimits, V1MapsHighToSoftLimitAndSwapToMemsw) {
  MemcgLimits limits{256u << 20, 192u << 20, 64u << 20};
  auto plan = PlanMemcgLimits(CgroupVersion::kV1, limits, {true, false});
  ASSERT_EQ(plan.writes.size(), 3u);
  // memsw must come after limit_in_bytes (the kernel rejects memsw < limit).
  EXPECT_EQ(plan.writes[0].file, "memory.limit_in_bytes");
  EXPECT_EQ(plan.writes[1].file, "memory.soft_limit_in_bytes");
  EXPECT_EQ(plan.writes[2].file, "memory.memsw.limit_in_bytes");
  EXPECT_EQ(plan.writes[2].value, std::to_string((256u + 64u) << 20));
  EXPECT_EQ(plan.applied["memcg.memory_max"], "memory.limit_in_bytes=268435456");
  EXPECT_EQ(plan.applied["memcg.memory_high"],
            "memory.soft_limit_in_bytes=201326592 (v1 has no memory.high)");
  EXPECT_NE(plan.applied["memcg.swap_max"].find("memory.memsw.limit_in_bytes=335544320"),
            std::string::npos);
}

TEST(PlanMemcgLimits, V1CannotLimitSwapWithoutMemswOrMax) {
  auto no_memsw = PlanMemcgLimits(CgroupVersion::kV1, {1u << 30, std::nullopt, 0}, {false, false});
  ASSERT_EQ(no_memsw.writes.size(), 1u);
  EXPECT_NE(no_memsw.applied["memcg.swap_max"].find("swapaccount=1"), std::string::npos);

  auto no_max = PlanMemcgLimits(CgroupVersion::kV1, {std::nullopt, std::nullopt, 0}, {true, false});
  EXPECT_TRUE(no_max.writes.empty());
  EXPECT_NE(no_max.applied["memcg.swap_max"].find("needs memory_max"), std::string::npos);
}

TEST(PlanMemcgLimits, V1MemswSaturatesInsteadOfOverflowing) {
  auto plan =
      PlanMemcgLimits(CgroupVersion::kV1, {UINT64_MAX - 1, std::nullopt, 10}, {true, false});
  ASSERT_EQ(plan.writes.size(), 2u);
  EXPECT_EQ(plan.writes[1].value, std::to_string(UINT64_MAX));
}

TEST(ParseProcCgroupPath, FindsV1MemoryLineAndV2UnifiedLine) {
  const char* text =
      "9:name=systemd:/\n4:cpu,memory:/process_api/abc\n1:cpuacct:/x\n0::/user.slice/s\n";
  EXPECT_EQ(ParseProcCgroupPath(text, CgroupVersion::kV1), "/process_api/abc");
  EXPECT_EQ(ParseProcCgroupPath(text, CgroupVersion::kV2), "/user.slice/s");
  EXPECT_FALSE(ParseProcCgroupPath("3:cpu:/\n", CgroupVersion::kV1));
}

TEST(ParseCgroupProcs, SkipsJunk) {
  EXPECT_EQ(ParseCgroupProcs("12\n345\n\nx\n0\n"), (std::vector<pid_t>{12, 345}));
}

TEST(ParseCgroupKeyValues, ReadsOomControlAndEvents) {
  auto oom = ParseCgroupKeyValues("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  EXPECT_EQ(oom["oom_kill"], 3u);
  auto events =
      ParseCgroupKeyValues("low 0\nhigh 17\nmax 2\noom 1\noom_kill 1\noom_group_kill 0\n");
  EXPECT_EQ(events["high"], 17u);
  EXPECT_EQ(events["oom_kill"], 1u);
}

TEST(MemoryCgroup, RejectsNamesThatAreNotOneComponent) {
  FakeCgroupTree tree;
  CgroupBackend backend{CgroupVersion::kV1, tree.root(), tree.root()};
  std::string error;
  EXPECT_FALSE(MemoryCgroup::Create(backend, "../escape", {}, &error));
  EXPECT_NE(error.find("invalid cgroup name"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(tree.root() + "/faultline"));
}

TEST(RemoveStaleRunCgroups, NothingToDoWithoutFaultlineDir) {
  FakeCgroupTree tree;
  std::string error;
  auto removed = RemoveStaleRunCgroups({CgroupVersion::kV1, tree.root(), tree.root()}, &error);
  ASSERT_TRUE(removed) << error;
  EXPECT_EQ(*removed, 0);
}

TEST(WriteSelfToCgroupProcs, WritesOwnPidAsDecimal) {
  FakeCgroupTree tree;
  tree.Write("cgroup.procs", "");
  std::string path = tree.root() + "/cgroup.procs";
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(WriteSelfToCgroupProcs(fd));
  ::close(fd);
  std::ifstream in(path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, std::to_string(::getpid()));
}

}  // namespace
}  // namespace faultline::sys
