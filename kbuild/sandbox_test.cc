// A stranger's series, built: its Makefile tries what a hostile one would (read the
// builder's secrets, write outside its slot, reach the network, leave a process, plant a git
// hook, flood the log, fork-bomb, fill the disk, make a huge image), on a small stand-in
// tree whose honest Makefile builds in milliseconds. Each attempt must fail the way
// docs/kernels.md says, the builder must build the next honest series, and nothing outside
// the slot may change. Needs bubblewrap and user namespaces: skipped (and said) without.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kbuild/builder.h"
#include "kbuild/process.h"
#include "kbuild/series.h"
#include "kbuild/testing/test_files.h"

namespace faultline::kbuild {
namespace {
namespace fs = std::filesystem;

using kbuild::testing::Put;
using kbuild::testing::Slurp;

// The honest tree: a config and an image in milliseconds.
constexpr char kHonest[] = R"MK(O ?= .
tinyconfig defconfig:
	@mkdir -p $(O) && cp $(CURDIR)/base.config $(O)/.config
olddefconfig:
	@true
bzImage:
	@mkdir -p $(O)/arch/x86/boot && cat $(CURDIR)/mm/memory.c $(O)/.config >$(O)/arch/x86/boot/bzImage
	@echo "Linux version 6.12.0$(LOCALVERSION) #$$KBUILD_BUILD_VERSION" >>$(O)/arch/x86/boot/bzImage
kernelrelease:
	@echo 6.12.0$(LOCALVERSION)
)MK";

constexpr char kConfig[] =
    "CONFIG_CGROUPS=y\nCONFIG_MEMCG=y\nCONFIG_SWAP=y\nCONFIG_ZRAM=y\nCONFIG_KEXEC=y\n"
    "CONFIG_RELOCATABLE=y\nCONFIG_PERF_EVENTS=y\nCONFIG_TRACING=y\nCONFIG_VM_EVENT_COUNTERS=y\n"
    "CONFIG_BLK_DEV_INITRD=y\nCONFIG_PER_VMA_LOCK=y\n";

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-sandbox-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 0711);
    tree_ = root_ + "/linux";
    cache_ = root_ + "/cache";
    secret_ = root_ + "/agent/agent.yaml";
    Put(secret_, "token: s3cr3t-agent-token\n", 0600);
    Put(tree_ + "/Makefile", kHonest);
    Put(tree_ + "/base.config", kConfig);
    Put(tree_ + "/mm/memory.c", "int a;\nint b;\nint c;\n");
    Put(tree_ + "/mm/Kconfig.debug", "\n");
    Git({"init", "-q"});
    Git({"add", "-A"});
    Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"});
    Git({"tag", "v6.12"});
    Sandbox probe({});
    const absl::Status available = probe.Available();
    if (!available.ok()) GTEST_SKIP() << "no build sandbox here: " << available.message();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Git(std::vector<std::string> args) {
    args.insert(args.begin(), {"git", "-C", tree_});
    absl::StatusOr<std::string> out = RunForOutput({args});
    ASSERT_TRUE(out.ok()) << out.status();
  }
  // A stranger's series: the tree's Makefile with `recipe` added to the bzImage target's (or,
  // `config`, to the config target's), as `git format-patch` mails it.
  std::string SeriesWithRecipe(const std::string& recipe, bool config = false) {
    std::string makefile = kHonest;
    // After the honest recipe's lines: the attack has the last word.
    makefile.insert(makefile.find(config ? "olddefconfig:" : "kernelrelease:"), recipe);
    Git({"checkout", "-q", "-b", "hostile", "v6.12"});
    Put(tree_ + "/Makefile", makefile);
    Git({"-c", "user.name=Stranger", "-c", "user.email=s@example.org", "commit", "-qam",
         "mm: a harmless change"});
    absl::StatusOr<std::string> mbox =
        RunForOutput({{"git", "-C", tree_, "format-patch", "-1", "--stdout"}});
    Git({"checkout", "-q", "v6.12"});
    Git({"branch", "-qD", "hostile"});
    EXPECT_TRUE(mbox.ok()) << mbox.status();
    return mbox.ok() ? *mbox : "";
  }
  BuildRequest Request(const std::string& series = "") {
    BuildRequest r;
    r.tree = tree_;
    r.ref = "v6.12";
    r.arch = "x86_64";
    r.jobs = 1;
    if (!series.empty()) {
      r.series = {{"v1.mbox", series}};
      r.untrusted = true;
    }
    return r;
  }
  std::string root_, tree_, cache_, secret_;
};

TEST_F(SandboxTest, AHostileMakefileReadsNoSecretWritesNothingOutsideAndLeavesNoProcess) {
  // A listener the build must not reach (the controller's port, say).
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::setenv("FAULTLINE_S3_SECRET_KEY", "s3cr3t-object-store-key", 1);
  const std::string pid_file = root_ + "/left.pid";
  const std::string recipe = absl::StrCat(
      "\t@cat ", secret_, " 2>&1 | sed 's/^/SECRET: /' || true\n",
      "\t@env | grep -c S3_SECRET | sed 's/^/ENV: /' || true\n", "\t@touch ", root_,
      "/outside 2>/dev/null || true\n", "\t@touch /tmp/faultline-sandbox-escape 2>&1 || true\n",
      "\t@touch $(CURDIR)/mm/planted 2>&1 | sed 's/^/TREE: /' || true\n", "\t@mkdir -p ", tree_,
      "/.git/hooks 2>&1; echo 'touch ", root_, "/hooked' > ", tree_,
      "/.git/hooks/post-checkout 2>&1 | sed 's/^/HOOK: /' || true\n", "\t@touch ", cache_,
      "/kernels/planted 2>&1 | sed 's/^/CACHE: /' || true\n",
      "\t@python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", ", port,
      "), 2)' 2>&1 | tail -1 | sed 's/^/NET: /' || true\n",
      "\t@setsid sh -c 'sleep 6061 & echo $$! > ", pid_file, "' 2>/dev/null || true\n",
      "\t@id -u | sed 's/^/UID: /'\n");
  Builder builder(cache_);
  const absl::StatusOr<Artifact> built = builder.Build(Request(SeriesWithRecipe(recipe)));
  ::unsetenv("FAULTLINE_S3_SECRET_KEY");
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string log = Slurp(built->log);
  EXPECT_TRUE(absl::StrContains(log, "SECRET: cat: " + secret_ + ": No such file")) << log;
  EXPECT_FALSE(absl::StrContains(log, "s3cr3t")) << log;
  EXPECT_TRUE(absl::StrContains(log, "ENV: 0")) << log;
  EXPECT_TRUE(absl::StrContains(log, "TREE: touch")) << log;   // the worktree: read-only
  EXPECT_TRUE(absl::StrContains(log, "CACHE: touch")) << log;  // other kernels: invisible
  EXPECT_TRUE(absl::StrContains(log, "NET: ")) << log;         // refused or unreachable
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("UID: ", kDefaultSandboxUid))) << log;
  EXPECT_FALSE(fs::exists(root_ + "/outside"));
  EXPECT_FALSE(fs::exists("/tmp/faultline-sandbox-escape"));
  EXPECT_FALSE(fs::exists(tree_ + "/.git/hooks/post-checkout"));
  EXPECT_FALSE(fs::exists(cache_ + "/kernels/planted"));
  sockaddr_in peer{};
  socklen_t peer_len = sizeof peer;
  ::fcntl(listener, F_SETFL, O_NONBLOCK);
  EXPECT_LT(::accept(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len), 0)
      << "the build reached a listener on the builder's loopback";
  ::close(listener);
  // The process it left: none (the pid it wrote was in its own namespace, and is gone).
  absl::StatusOr<std::string> sleepers =
      RunForOutput({{"sh", "-c", "pgrep -x -f 'sleep 6061' || true"}});
  ASSERT_TRUE(sleepers.ok());
  EXPECT_EQ(*sleepers, "") << "a process outlived the build";

  // The next build, an honest one, still builds, and runs no hook.
  const absl::StatusOr<Artifact> honest = builder.Build(Request());
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_FALSE(fs::exists(root_ + "/hooked"));
}

struct Attack {
  const char* name;
  std::string recipe;
  const char* stopped;  // what the error must say
  void (*limit)(SandboxLimits&);
  bool config = false;  // in the config step (its recipe) rather than make's
};

TEST_F(SandboxTest, EachLimitStopsTheBuildAndSaysWhich) {
  const std::vector<Attack> attacks = {
      {"a flood of log", "\t@yes 'all work and no play' | head -c 50000000\n", "the log limit",
       [](SandboxLimits& l) { l.log_bytes = 1 << 20; }},
      {"a process that never ends", "\t@sleep 600\n", "the wall-time limit",
       [](SandboxLimits& l) { l.wall = std::chrono::seconds(2); }},
      // A config program is held to its own, shorter limit (a Kconfig $(shell) that hangs).
      {"a config step that never ends", "\t@sleep 600\n", "the wall-time limit (2 s)",
       [](SandboxLimits& l) { l.step_wall = std::chrono::seconds(2); }, true},
      {"a file too large", "\t@head -c 20000000 /dev/zero > $(O)/big\n", "the file size limit",
       [](SandboxLimits& l) { l.file_bytes = 4 << 20; }},
      {"a fork bomb", "\t@for i in $$(seq 400); do sleep 1 & done; wait\n", "the process limit",
       [](SandboxLimits& l) { l.pids = 64; }},
      {"memory", "\t@python3 -c 'b = bytearray(512 << 20); print(len(b))'\n", "the memory limit",
       [](SandboxLimits& l) { l.memory_bytes = 64 << 20; }},
      {"a huge image", "\t@head -c 3000000 /dev/zero > $(O)/arch/x86/boot/bzImage; exit 0\n",
       "over the limit", [](SandboxLimits& l) { l.image_bytes = 2 << 20; }},
  };
  for (const Attack& attack : attacks) {
    SCOPED_TRACE(attack.name);
    SandboxOptions options;
    attack.limit(options.limits);
    Builder builder(cache_, options);
    const absl::StatusOr<Artifact> built =
        builder.Build(Request(SeriesWithRecipe(attack.recipe, attack.config)));
    ASSERT_FALSE(built.ok());
    // (A config step that fails is the request's config: INVALID_ARGUMENT, "config.base: ...")
    EXPECT_EQ(built.status().code(), attack.config ? absl::StatusCode::kInvalidArgument
                                                   : absl::StatusCode::kFailedPrecondition)
        << built.status();
    EXPECT_TRUE(absl::StrContains(built.status().message(), attack.stopped)) << built.status();
    EXPECT_LT(built.status().message().size(), 8000u) << "the error is bounded";
    // The builder goes on: the honest base builds.
    const absl::StatusOr<Artifact> honest = Builder(cache_).Build(Request());
    ASSERT_TRUE(honest.ok()) << honest.status();
  }
}

TEST_F(SandboxTest, AStrangersSeriesIsRefusedWhereNoSandboxRunsUnlessTheOperatorOptsOut) {
  SandboxOptions missing;
  missing.bwrap = "/nonexistent/bwrap";
  const std::string series = SeriesWithRecipe("\t@true\n");
  const absl::StatusOr<Artifact> refused = Builder(cache_, missing).Build(Request(series));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "build refused")) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "none-i-trust-every-series"));
  // A trusted build runs without it (said in its progress); so does any, opted out by name.
  EXPECT_TRUE(Builder(cache_, missing).Build(Request()).ok());
  SandboxOptions none;
  none.mode = SandboxMode::kNone;
  const absl::StatusOr<Artifact> opted = Builder(cache_, none).Build(Request(series));
  EXPECT_TRUE(opted.ok()) << opted.status();
}

// A builder killed mid-build leaves its slot (a copy of an object directory): the next
// build removes the slots of builders that are gone, and its own leaves none.
TEST_F(SandboxTest, SlotsOfDeadBuildersAreRemoved) {
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = absl::StrCat(cache_, "/slots/", dead, "-0");
  Put(stale + "/obj/big", "objects");
  const absl::StatusOr<Artifact> built =
      Builder(cache_).Build(Request(SeriesWithRecipe("\t@true\n")));
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::is_empty(cache_ + "/slots"));
}

TEST_F(SandboxTest, APathOutsideTheTreeIsRefusedByName) {
  const std::string mbox =
      "From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\n"
      "From: S <s@example.org>\nSubject: [PATCH] mm: tidy\n\n---\n"
      "diff --git a/../../escape b/../../escape\nnew file mode 100644\n--- /dev/null\n"
      "+++ b/../../escape\n@@ -0,0 +1 @@\n+owned\n-- \n2.39.5\n";
  const absl::StatusOr<Artifact> built = Builder(cache_).Build(Request(mbox));
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  std::optional<ApplyFailure> f = ParseApplyFailure(built.status().message());
  ASSERT_TRUE(f.has_value()) << built.status();
  EXPECT_EQ(f->file, "../../escape");
  EXPECT_EQ(f->reason, "a path outside the tree");
  EXPECT_FALSE(fs::exists(root_ + "/escape"));
  EXPECT_FALSE(fs::exists(cache_ + "/escape"));
  for (const char* bad : {"/etc/passwd", "a/../../b", ".git/hooks/x", "mm/.GIT/x", "", "a//b"}) {
    EXPECT_FALSE(PathInsideTree(bad)) << bad;
  }
  EXPECT_TRUE(PathInsideTree("mm/memory.c"));
}

}  // namespace
}  // namespace faultline::kbuild
