// The build cache's rules on a small stand-in for a kernel tree: a real git repository
// whose Makefile answers the targets faultline-kbuild uses (tinyconfig, olddefconfig,
// bzImage, kernelrelease) in milliseconds, writes each target it ran to a log (so a test
// sees which steps a build ran), and links a version banner as the kernel's does (the
// build number counts the object directory's links unless KBUILD_BUILD_VERSION is set); a
// merge_config.sh that appends fragments. The real kernel is built by the lab tests
// (tests/e2e/lab_kernel_test.sh, tests/e2e/kbuild_reproducible_test.sh).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"

#include "kbuild/builder.h"
#include "kbuild/kconfig.h"
#include "kbuild/process.h"
#include "kbuild/series.h"
#include "kbuild/testing/test_files.h"

namespace faultline::kbuild {
namespace {
namespace fs = std::filesystem;

using kbuild::testing::Put;
using kbuild::testing::Slurp;

// STEPS is the log of the targets run (set by the fixture).
constexpr char kFakeMakefile[] = R"MK(O ?= .
tinyconfig defconfig:
	@echo $@ >>$(STEPS)
	@mkdir -p $(O) && cp $(CURDIR)/base.config $(O)/.config
olddefconfig:
	@echo $@ >>$(STEPS)
	@sed -i '/CONFIG_IMPOSSIBLE=/d' $(O)/.config
bzImage:
	@echo $@ >>$(STEPS)
	@test ! -f $(CURDIR)/BROKEN || { echo "mm/memory.c:1:1: error: it is broken"; exit 2; }
	@v=$${KBUILD_BUILD_VERSION:-$$(( $$(cat $(O)/.version 2>/dev/null || echo 0) + 1 ))}; \
	  echo $$v >$(O)/.version; mkdir -p $(O)/arch/x86/boot && \
	  { cat $(CURDIR)/mm/memory.c $(O)/.config; \
	    echo "Linux version 6.12.0$(LOCALVERSION) ($$KBUILD_BUILD_USER@$$KBUILD_BUILD_HOST) #$$v $$KBUILD_BUILD_TIMESTAMP"; \
	  } >$(O)/arch/x86/boot/bzImage
	@echo "  LD  vmlinux (LOCALVERSION=$(LOCALVERSION))"
kernelrelease:
	@echo 6.12.0$(LOCALVERSION)
)MK";

constexpr char kBaseConfig[] =
    "CONFIG_CGROUPS=y\nCONFIG_MEMCG=y\nCONFIG_SWAP=y\nCONFIG_ZRAM=y\nCONFIG_KEXEC=y\nCONFIG_"
    "RELOCATABLE=y\n"
    "CONFIG_PERF_EVENTS=y\nCONFIG_TRACING=y\nCONFIG_VM_EVENT_COUNTERS=y\n"
    "CONFIG_BLK_DEV_INITRD=y\nCONFIG_PER_VMA_LOCK=y\nCONFIG_PER_VMA_LOCK_STATS=y\n";

// A series patch of mm/memory.c, as `git format-patch` writes it.
std::string PatchMail(const std::string& subject, const std::string& from_line,
                      const std::string& to_line, int line = 2) {
  return "From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\n"
         "From: A Developer <dev@example.org>\nSubject: " +
         subject +
         "\n\n"
         "Body.\n---\n"
         "diff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n+++ b/mm/memory.c\n"
         "@@ -" +
         std::to_string(line) + ",3 +" + std::to_string(line) +
         ",3 @@\n"
         " int a;\n-" +
         from_line + "\n+" + to_line + "\n int c;\n-- \n2.39.5\n\n";
}

class KbuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-kbuild-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    tree_ = root_ + "/linux";
    // The sandbox's uid passes the fixture's root (mkdtemp makes it 0700), and writes the
    // step log in a directory the builder binds for it (SandboxOptions::extra_writable).
    ::chmod(root_.c_str(), 0711);
    fs::create_directories(root_ + "/steps");
    ::chmod((root_ + "/steps").c_str(), 0777);
    steps_ = root_ + "/steps/steps.log";
    Put(tree_ + "/Makefile", "STEPS := " + steps_ + "\n" + kFakeMakefile);
    Put(tree_ + "/base.config", kBaseConfig);
    Put(tree_ + "/mm/memory.c", "// memory\nint a;\nint b;\nint c;\n");
    Put(tree_ + "/mm/Kconfig.debug", "config PER_VMA_LOCK_STATS\n\tbool\n");
    Put(tree_ + "/arch/x86/mm/fault.c", "int fault;\n");
    Put(tree_ + "/scripts/kconfig/merge_config.sh",
        "#!/bin/sh\n# -m -O DIR BASE FRAGMENTS...\nshift; shift; out=$1; shift; base=$1; shift\n"
        "for f in \"$@\"; do sed -n 's/^\\(# \\)\\{0,1\\}\\(CONFIG_[A-Z0-9_]*\\).*/\\2/p' \"$f\" |"
        " while read -r o; do sed -i \"/^$o=/d; /^# $o is not set/d\" \"$base\"; done;"
        " cat \"$f\" >>\"$base\"; done\n",
        0755);
    Git({"init", "-q"});
    Git({"add", "-A"});
    Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"});
    Git({"tag", "v6.12"});
    cache_ = root_ + "/cache";
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
  BuildRequest Request() {
    BuildRequest r;
    r.tree = tree_;
    r.ref = "v6.12";
    r.arch = "x86_64";
    r.jobs = 1;
    r.fragments = {{"lab.config", "CONFIG_VIRTIO_BLK=y\n"}};
    return r;
  }
  // The make targets run since the last call, one a line.
  SandboxOptions Sandboxed() {
    SandboxOptions o;
    o.extra_writable = {root_ + "/steps"};
    return o;
  }
  std::string Steps() {
    const std::string steps = Slurp(steps_);
    fs::remove(steps_);
    return steps;
  }
  std::string root_, tree_, cache_, steps_;
};

// An environment variable set (or unset) for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

TEST_F(KbuildTest, BuildsOnceAndRecordsWhatItBuilt) {
  Builder builder(cache_, Sandboxed());
  absl::StatusOr<Artifact> first = builder.Build(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cached);
  EXPECT_EQ(first->release, "6.12.0-fl" + first->key.substr(0, 10));
  EXPECT_EQ(first->arch, "x86_64");
  EXPECT_EQ(first->tree_hash.size(), 40u);
  EXPECT_NE(first->compiler.find("gcc"), std::string::npos) << first->compiler;
  // The artifact: under arch/compiler/config/tree, with the image whose sha256 it records.
  EXPECT_NE(first->dir.find("/kernels/x86_64/"), std::string::npos);
  EXPECT_NE(first->dir.find("/" + first->config_sha256 + "/" + first->tree_hash),
            std::string::npos);
  const std::string image = Slurp(first->image);
  EXPECT_NE(image.find("int b;"), std::string::npos);
  EXPECT_NE(image.find("CONFIG_VIRTIO_BLK=y"), std::string::npos);  // the fragment merged
  EXPECT_EQ(first->image_bytes, image.size());
  absl::StatusOr<std::string> sum = RunForOutput({{"sha256sum", first->image}});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(sum->substr(0, 64), first->image_sha256);
  EXPECT_NE(Slurp(first->log).find("LOCALVERSION=-fl"), std::string::npos);

  absl::StatusOr<Artifact> again = builder.Build(Request());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(again->image_sha256, first->image_sha256);
}

TEST_F(KbuildTest, ASeriesMakesAnotherKernelAndTheBaseStaysCached) {
  Builder builder(cache_, Sandboxed());
  absl::StatusOr<Artifact> vanilla = builder.Build(Request());
  ASSERT_TRUE(vanilla.ok()) << vanilla.status();
  BuildRequest patched = Request();
  patched.series = {{"v5.mbox", PatchMail("[PATCH] mm: b becomes B", "int b;", "int B;")}};
  absl::StatusOr<Artifact> built = builder.Build(patched);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_FALSE(built->cached);
  EXPECT_NE(built->key, vanilla->key);
  EXPECT_NE(built->tree_hash, vanilla->tree_hash);
  EXPECT_EQ(built->config_sha256, vanilla->config_sha256);
  EXPECT_EQ(built->base_commit, vanilla->base_commit);
  EXPECT_NE(built->release, vanilla->release);
  EXPECT_EQ(built->series, std::vector<std::string>{"[PATCH] mm: b becomes B"});
  EXPECT_NE(Slurp(built->image).find("int B;"), std::string::npos);
  // The worktree goes back to the base for the next build: vanilla is found, not rebuilt,
  // and its image still has the base's line.
  absl::StatusOr<Artifact> back = builder.Build(Request());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->cached);
  EXPECT_EQ(back->key, vanilla->key);
  EXPECT_NE(Slurp(back->image).find("int b;"), std::string::npos);
  // A ref naming the same commit is the same kernel.
  Git({"branch", "same", "v6.12"});
  BuildRequest by_branch = Request();
  by_branch.ref = "same";
  absl::StatusOr<Artifact> same = builder.Build(by_branch);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->cached);
  EXPECT_EQ(same->key, vanilla->key);
}

TEST_F(KbuildTest, ARevertBuildsTheRefWithoutThatCommit) {
  Put(tree_ + "/mm/memory.c", "// memory\nint a;\nint CULPRIT;\nint c;\n");
  Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "mm: the culprit"});
  Put(tree_ + "/arch/x86/mm/fault.c", "int fault2;\n");
  Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x86: later"});
  Git({"tag", "bad"});
  Builder builder(cache_, Sandboxed());
  absl::StatusOr<Artifact> base = builder.Build(Request());
  ASSERT_TRUE(base.ok()) << base.status();
  BuildRequest reverted = Request();
  reverted.ref = "bad";
  reverted.revert = {"bad~1"};
  absl::StatusOr<Artifact> built = builder.Build(reverted);
  ASSERT_TRUE(built.ok()) << built.status();
  const std::string image = Slurp(built->image);
  EXPECT_NE(image.find("int b;"), std::string::npos);  // the culprit's change undone
  EXPECT_EQ(image.find("CULPRIT"), std::string::npos);
  EXPECT_NE(built->key, base->key);
  // A commit whose lines a later one changed again does not revert cleanly: named.
  Put(tree_ + "/mm/memory.c", "// memory\nint a;\nint LATER;\nint c;\n");
  Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "mm: later"});
  BuildRequest conflict = Request();
  conflict.ref = "HEAD";
  conflict.revert = {"bad~1"};
  absl::StatusOr<Artifact> refused = builder.Build(conflict);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("revert[0]: "), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("does not revert cleanly on HEAD"), std::string::npos)
      << refused.status();
  BuildRequest unknown = Request();
  unknown.revert = {"0123456789abcdef"};
  absl::StatusOr<Artifact> none = builder.Build(unknown);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("is not a commit"), std::string::npos) << none.status();
}

TEST_F(KbuildTest, ASeriesThatDoesNotApplyNamesThePatchTheFileAndTheHunk) {
  Builder builder(cache_, Sandboxed());
  BuildRequest r = Request();
  r.series = {{"good.mbox", PatchMail("[PATCH 1/2] mm: b becomes B", "int b;", "int B;")},
              {"bad.mbox", PatchMail("[PATCH 2/2] mm: x becomes y", "int x;", "int y;")}};
  absl::StatusOr<Artifact> built = builder.Build(r);
  ASSERT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument) << built.status();
  const std::string message(built.status().message());
  EXPECT_NE(message.find("patch 2 \"[PATCH 2/2] mm: x becomes y\" (bad.mbox) does not apply"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("mm/memory.c, hunk @@ -2,3 +2,3 @@"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(cache_ + "/kernels/x86_64")) << "nothing built";
  // The error carries the failure itself (the series robot answers with it).
  std::optional<ApplyFailure> failure = ApplyFailureOf(built.status());
  ASSERT_TRUE(failure.has_value()) << message;
  EXPECT_EQ(failure->index, 2);
  EXPECT_EQ(failure->subject, "[PATCH 2/2] mm: x becomes y");
  EXPECT_EQ(failure->source, "bad.mbox");
  EXPECT_EQ(failure->file, "mm/memory.c");
  EXPECT_EQ(failure->hunk, "@@ -2,3 +2,3 @@");
  EXPECT_EQ(failure->reason, "");
  // A build's error stored before the failure was carried reads back the same.
  std::optional<ApplyFailure> older = ParseApplyFailure(message);
  ASSERT_TRUE(older.has_value()) << message;
  EXPECT_EQ(older->index, 2);
  EXPECT_EQ(older->subject, failure->subject);
  EXPECT_EQ(older->file, failure->file);
  EXPECT_EQ(older->hunk, failure->hunk);
}

// A stranger's subject is any text: the failure carried on the error is it, byte for byte,
// where the words of the reason could be read more than one way.
TEST(ApplyFailureTest, TheFailureOnTheErrorIsExactWhateverTheSubjectSays) {
  Patch patch;
  patch.index = 3;
  patch.subject = "12:x\" (v9.mbox) does not apply: etc/passwd, hunk @@ -1 +1 @@\n\xff:";
  patch.source = "v2.mbox";
  patch.text = "diff --git a/mm/a.c b/mm/a.c\n--- a/mm/a.c\n+++ b/mm/a.c\n@@ -5,2 +5,2 @@ f\n";
  const absl::Status error = ApplyFailureError(
      patch, "error: patch failed: mm/a.c:5\nerror: mm/a.c: patch does not apply\n");
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error.message().substr(0, 8), "series: ");
  std::optional<ApplyFailure> f = ApplyFailureOf(error);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->index, 3);
  EXPECT_EQ(f->subject, patch.subject);
  EXPECT_EQ(f->source, "v2.mbox");
  EXPECT_EQ(f->file, "mm/a.c");
  EXPECT_EQ(f->hunk, "@@ -5,2 +5,2 @@");

  // A file git named, with no hunk: git's words are the reason.
  std::optional<ApplyFailure> missing =
      ApplyFailureOf(ApplyFailureError(patch, "error: mm/b.c: does not exist in index\n"));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->file, "mm/b.c");
  EXPECT_EQ(missing->hunk, "");
  EXPECT_EQ(missing->reason, "does not exist in index");

  // Not every error is one; a status whose payload is cut short is not read as one.
  EXPECT_FALSE(
      ApplyFailureOf(absl::InvalidArgumentError("series: patch 1 \"x\" (a) does not apply"))
          .has_value());
  absl::Status cut = absl::InvalidArgumentError("x");
  cut.SetPayload("type.faultline.dev/kbuild.ApplyFailure", absl::Cord("1:3"));
  EXPECT_FALSE(ApplyFailureOf(cut).has_value());
  cut.SetPayload("type.faultline.dev/kbuild.ApplyFailure", absl::Cord("1:3999999999:x"));
  EXPECT_FALSE(ApplyFailureOf(cut).has_value());
}

TEST(ApplyFailureTest, ReadsBackWhatGitSaidAndNothingElse) {
  auto f = ParseApplyFailure(
      "patch 1 \"[PATCH] mm: a \"quoted\" (x) subject\" (v4.mbox) does not apply: "
      "mm/x.c (apply only some paths with the series' `include`)");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->subject, "[PATCH] mm: a \"quoted\" (x) subject");
  EXPECT_EQ(f->source, "v4.mbox");
  EXPECT_EQ(f->file, "mm/x.c");
  EXPECT_EQ(f->hunk, "");
  EXPECT_FALSE(ParseApplyFailure("make: *** [vmlinux] Error 2").has_value());
  EXPECT_FALSE(ParseApplyFailure("series: patch x \"s\" (a) does not apply").has_value());
}

TEST_F(KbuildTest, IncludeAppliesOnlySomePaths) {
  Builder builder(cache_, Sandboxed());
  // One patch touching mm/memory.c (applies) and arch/arm/mm/fault.c (no such file).
  std::string mail = PatchMail("[PATCH] mm, arm: both", "int b;", "int B;");
  mail.insert(mail.find("-- \n"),
              "diff --git a/arch/arm/mm/fault.c b/arch/arm/mm/fault.c\n--- a/arch/arm/mm/fault.c\n"
              "+++ b/arch/arm/mm/fault.c\n@@ -1,1 +1,1 @@\n-int arm;\n+int ARM;\n");
  BuildRequest all = Request();
  all.series = {{"both.mbox", mail}};
  absl::StatusOr<Artifact> failed = builder.Build(all);
  ASSERT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(failed.status().message().find("arch/arm/mm/fault.c"), std::string::npos)
      << failed.status();
  BuildRequest some = all;
  some.include = {"mm/*", "arch/x86/*"};
  absl::StatusOr<Artifact> built = builder.Build(some);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_NE(Slurp(built->image).find("int B;"), std::string::npos);
  BuildRequest none = all;
  none.include = {"arch/s390/*"};
  absl::StatusOr<Artifact> nothing = builder.Build(none);
  ASSERT_EQ(nothing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nothing.status().message().find("selects no file"), std::string::npos);
}

TEST_F(KbuildTest, BadInputIsNamed) {
  Builder builder(cache_, Sandboxed());
  BuildRequest ref = Request();
  ref.ref = "v9.99";
  absl::StatusOr<Artifact> r1 = builder.Build(ref);
  ASSERT_EQ(r1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r1.status().message().find("ref: 'v9.99' is not a commit"), std::string::npos);

  BuildRequest arch = Request();
  arch.arch = "mips";
  EXPECT_EQ(builder.Build(arch).status().code(), absl::StatusCode::kInvalidArgument);

  BuildRequest base = Request();
  base.config_base = "rm -rf /";
  EXPECT_EQ(builder.Build(base).status().code(), absl::StatusCode::kInvalidArgument);

  BuildRequest no_zram = Request();
  no_zram.fragments.push_back({"off.config", "# CONFIG_ZRAM is not set\n"});
  absl::StatusOr<Artifact> r2 = builder.Build(no_zram);
  ASSERT_EQ(r2.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      r2.status().message().find("CONFIG_ZRAM=y (the agent's swap device is zram; final: not set)"),
      std::string::npos)
      << r2.status();

  BuildRequest series = Request();
  series.series = {{"cover.mbox", "From x\nSubject: [PATCH 0/3] cover\n\nno diff here\n"}};
  absl::StatusOr<Artifact> r3 = builder.Build(series);
  ASSERT_EQ(r3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r3.status().message().find("cover.mbox: no patch"), std::string::npos);
}

TEST_F(KbuildTest, ABuildErrorKeepsTheLogAndStoresNothing) {
  Put(tree_ + "/BROKEN", "");
  Git({"add", "BROKEN"});
  Git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "broken"});
  Builder builder(cache_, Sandboxed());
  BuildRequest r = Request();
  r.ref = "HEAD";
  absl::StatusOr<Artifact> built = builder.Build(r);
  ASSERT_EQ(built.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(built.status().message());
  EXPECT_NE(message.find("error: it is broken"), std::string::npos) << message;
  const size_t at = message.find("log kept at ");
  ASSERT_NE(at, std::string::npos);
  const std::string log = message.substr(at + 12, message.find(';', at) - at - 12);
  EXPECT_NE(Slurp(log).find("it is broken"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(cache_ + "/kernels/x86_64")) << "no artifact for a failed build";
  // The base still builds afterwards (the worktree is reset, BROKEN is gone).
  absl::StatusOr<Artifact> base = builder.Build(Request());
  EXPECT_TRUE(base.ok()) << base.status();
}

// Issue #43: the same key must be the same bytes. The object directory of (tree, arch,
// config) is shared by the two labels of a pair, so without KBUILD_BUILD_VERSION the banner
// counted its links: vanilla #1, patched #2, vanilla rebuilt #3. Another cache (another
// builder) builds the same bytes too.
TEST_F(KbuildTest, OneKeyIsTheSameImageInAnyCacheAndAfterOtherLinks) {
  ScopedEnv unset("KBUILD_BUILD_VERSION", nullptr);
  Builder builder(cache_, Sandboxed());
  absl::StatusOr<Artifact> first = builder.Build(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  // The make invocation carries the build's identity (reproducible-builds.rst).
  EXPECT_NE(Slurp(first->image)
                .find("Linux version " + first->release + " (faultline@faultline) #1 @0\n"),
            std::string::npos)
      << Slurp(first->image);
  BuildRequest patched = Request();
  patched.series = {{"v5.mbox", PatchMail("[PATCH] mm: b becomes B", "int b;", "int B;")}};
  absl::StatusOr<Artifact> other = builder.Build(patched);  // links in the same object dir
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->cached);
  fs::remove_all(first->dir);  // as if evicted: vanilla is linked there a third time
  absl::StatusOr<Artifact> again = builder.Build(Request());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cached);
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(again->image_sha256, first->image_sha256) << Slurp(again->image);
  Builder elsewhere(root_ + "/another-cache", Sandboxed());
  absl::StatusOr<Artifact> there = elsewhere.Build(Request());
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_FALSE(there->cached);
  EXPECT_NE(there->dir, first->dir);
  EXPECT_EQ(there->key, first->key);
  EXPECT_EQ(there->image_sha256, first->image_sha256) << Slurp(there->image);
}

// A hit does not pay the config step: the cache remembers which config each set of inputs
// made. Any other input runs it.
TEST_F(KbuildTest, AHitRunsNoMakeAndAnyOtherInputRunsTheConfigStep) {
  Builder builder(cache_, Sandboxed());
  absl::StatusOr<Artifact> first = builder.Build(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\nbzImage\n");
  std::vector<std::string> lines;
  absl::StatusOr<Artifact> again =
      builder.Build(Request(), [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(again->image_sha256, first->image_sha256);
  EXPECT_EQ(Steps(), "") << "a hit ran make";
  ASSERT_FALSE(lines.empty());
  for (const std::string& line : lines) {
    EXPECT_FALSE(absl::StartsWith(line, "config ") || absl::StartsWith(line, "make ")) << line;
  }
  EXPECT_NE(lines.back().find("remembered, no make"), std::string::npos) << lines.back();

  // Another fragment that ends in the same config: the config step runs and finds the
  // kernel; from then on that request is remembered too.
  BuildRequest twice = Request();
  twice.fragments.push_back({"again.config", "CONFIG_VIRTIO_BLK=y\n"});
  absl::StatusOr<Artifact> same = builder.Build(twice);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->cached);
  EXPECT_EQ(same->key, first->key);
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\n");
  ASSERT_TRUE(builder.Build(twice).ok());
  EXPECT_EQ(Steps(), "");
  // Another base (the stand-in's defconfig makes the same config): the config step runs.
  BuildRequest base = Request();
  base.config_base = "defconfig";
  ASSERT_TRUE(builder.Build(base).ok());
  EXPECT_EQ(Steps(), "defconfig\nolddefconfig\n");
  // A fragment that changes the config: another kernel.
  BuildRequest fragment = Request();
  fragment.fragments[0].text = "CONFIG_VIRTIO_BLK=y\nCONFIG_VIRTIO_NET=y\n";
  absl::StatusOr<Artifact> other = builder.Build(fragment);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->config_sha256, first->config_sha256);
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\nbzImage\n");
  // Another tree after the series.
  BuildRequest patched = Request();
  patched.series = {{"v5.mbox", PatchMail("[PATCH] mm: b becomes B", "int b;", "int B;")}};
  ASSERT_TRUE(builder.Build(patched).ok());
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\nbzImage\n");
  // Another compiler (a gcc first in PATH that says another version).
  const std::string bin = root_ + "/bin";
  for (const char* name : {"gcc", "x86_64-linux-gnu-gcc"}) {
    Put(bin + "/" + name, "#!/bin/sh\necho 'gcc (Other) 99.1.0'\n", 0755);
  }
  {
    ScopedEnv path("PATH", (bin + ":" + std::getenv("PATH")).c_str());
    absl::StatusOr<Artifact> compiled = builder.Build(Request());
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_EQ(compiled->compiler, "gcc (Other) 99.1.0");
    EXPECT_NE(compiled->key, first->key);
    EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\nbzImage\n");
  }
  // The kernel gone from the cache: what was remembered leads nowhere, so it is built.
  fs::remove_all(first->dir);
  absl::StatusOr<Artifact> rebuilt = builder.Build(Request());
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_FALSE(rebuilt->cached);
  EXPECT_EQ(rebuilt->key, first->key);
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\nbzImage\n");
  // A damaged index entry is not trusted either.
  for (const auto& entry : fs::directory_iterator(cache_ + "/index")) {
    Put(entry.path().string(), "config_sha256=not-a-sha\n");
  }
  absl::StatusOr<Artifact> damaged = builder.Build(Request());
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  EXPECT_TRUE(damaged->cached);
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\n");
}

// A kernel stored by another recipe (another key in its metadata: built before
// KBUILD_BUILD_VERSION was set) is not taken for this one: it is built again in its place.
TEST_F(KbuildTest, AKernelOfAnotherRecipeIsBuiltAgainInItsPlace) {
  Builder builder(cache_, Sandboxed());
  absl::StatusOr<Artifact> first = builder.Build(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string meta = first->dir + "/artifact.meta";
  Put(meta,
      absl::StrReplaceAll(Slurp(meta), {{"key=" + first->key, "key=" + std::string(64, '0')}}));
  ASSERT_EQ(Slurp(meta).find(first->key), std::string::npos);
  Steps();
  absl::StatusOr<Artifact> again = builder.Build(Request());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cached);
  EXPECT_EQ(again->dir, first->dir);
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(Steps(), "tinyconfig\nolddefconfig\nbzImage\n");
  absl::StatusOr<Artifact> stored = ReadArtifact(first->dir);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->key, first->key);
  for (const auto& entry : fs::directory_iterator(fs::path(first->dir).parent_path())) {
    EXPECT_EQ(entry.path().filename(), fs::path(first->dir).filename()) << "left behind";
  }
}

// A build that has to wait for another on the same worktree says so, and for whom, before
// it blocks; then it goes on (here: a hit, the other built the kernel).
TEST_F(KbuildTest, ABuildThatWaitsForTheLockSaysWhoHoldsIt) {
  Builder holder(cache_, Sandboxed()), waiter(cache_, Sandboxed());
  std::mutex mu;
  std::condition_variable said;
  std::vector<std::string> waiter_lines;
  bool waiting = false, saw_waiting = false;
  absl::StatusOr<Artifact> waited = absl::UnknownError("not run");
  std::thread second;
  absl::StatusOr<Artifact> held = holder.Build(Request(), [&](const std::string& line) {
    if (!absl::StartsWith(line, "checkout ") || second.joinable()) return;
    // The holder has the lock now: the second build starts and must say it waits.
    second = std::thread([&] {
      waited = waiter.Build(Request(), [&](const std::string& l) {
        std::lock_guard lock(mu);
        waiter_lines.push_back(l);
        if (absl::StartsWith(l, "waiting: ")) waiting = true;
        said.notify_all();
      });
    });
    std::unique_lock lock(mu);
    // Bounded only so that a waiter that blocks silently fails the test instead of hanging it.
    saw_waiting = said.wait_for(lock, std::chrono::seconds(60), [&] { return waiting; });
  });
  if (second.joinable()) second.join();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(saw_waiting) << "the second build did not say it was waiting";
  ASSERT_GE(waiter_lines.size(), 2u);
  EXPECT_EQ(waiter_lines[0].rfind("waiting: another build holds the worktree of " + tree_ +
                                      " for x86_64 (pid " + std::to_string(::getpid()) +
                                      ": v6.12 for x86_64; lock " + cache_ + "/locks/",
                                  0),
            0u)
      << waiter_lines[0];
  EXPECT_TRUE(absl::StartsWith(waiter_lines[1], "lock taken after ")) << waiter_lines[1];
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(waited->cached);
  EXPECT_EQ(waited->key, held->key);
}

TEST(KconfigTest, RequirementsAndDroppedOptions) {
  const auto config = ParseConfig(
      "CONFIG_CGROUPS=y\nCONFIG_MEMCG=y\nCONFIG_SWAP=y\nCONFIG_ZRAM=m\nCONFIG_KEXEC_FILE=y\n"
      "CONFIG_PERF_EVENTS=y\n# CONFIG_TRACING is not set\nCONFIG_VM_EVENT_COUNTERS=y\n"
      "CONFIG_BLK_DEV_INITRD=y\nCONFIG_PER_VMA_LOCK=y\nCONFIG_NR_CPUS=8\n");
  EXPECT_EQ(config.at("NR_CPUS"), "8");
  EXPECT_EQ(config.at("TRACING"), "n");
  const auto missing = MissingOptions(config, BoardRequirements("aarch64", true));
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_EQ(missing[0], "CONFIG_ZRAM=y (the agent's swap device is zram; final: =m)");
  EXPECT_NE(missing[1].find("CONFIG_TRACING=y"), std::string::npos);
  EXPECT_NE(missing[2].find("CONFIG_PER_VMA_LOCK_STATS=y"), std::string::npos);
  // A tree without the option, or an arch without per-VMA locks, does not need it.
  EXPECT_EQ(MissingOptions(config, BoardRequirements("aarch64", false)).size(), 2u);
  auto no_vma = config;
  no_vma.erase("PER_VMA_LOCK");
  EXPECT_EQ(MissingOptions(no_vma, BoardRequirements("aarch64", true)).size(), 2u);
  // x86_64 also needs a relocatable image: kexec's second built kernel in a row.
  const auto x86 = MissingOptions(no_vma, BoardRequirements("x86_64", true));
  ASSERT_EQ(x86.size(), 3u);
  EXPECT_EQ(x86[2].substr(0, 24), "CONFIG_RELOCATABLE=y (ke");
  EXPECT_NE(x86[2].find("final: absent"), std::string::npos);
  const auto dropped = DroppedFragmentOptions(
      ParseConfig("CONFIG_ZRAM=y\nCONFIG_NEW=y\n# CONFIG_OLD is not set\n"), config);
  EXPECT_EQ(dropped, (std::vector<std::string>{"CONFIG_NEW=y asked, final: not set",
                                               "CONFIG_ZRAM=y asked, final: m"}));
}

// git apply --include's language: `*` crosses `/` (no WM_PATHNAME), `?`, classes.
TEST(SeriesTest, GlobsMatchAsGitApplyIncludeDoes) {
  EXPECT_TRUE(GlobMatches("arch/x86/*", "arch/x86/mm/fault.c"));
  EXPECT_TRUE(GlobMatches("mm/*.c", "mm/damon/core.c"));
  EXPECT_TRUE(GlobMatches("mm/memory.?", "mm/memory.c"));
  EXPECT_TRUE(GlobMatches("include/linux/mm*", "include/linux/mm_types.h"));
  EXPECT_TRUE(GlobMatches("arch/[xa]*/mm/*", "arch/arm64/mm/fault.c"));
  EXPECT_FALSE(GlobMatches("arch/[!a]*/mm/*", "arch/arm64/mm/fault.c"));
  EXPECT_FALSE(GlobMatches("mm/*", "include/linux/mm.h"));
  EXPECT_FALSE(GlobMatches("mm/memory.?", "mm/memory.cc"));
  EXPECT_TRUE(GlobMatches("*", "Makefile"));
  EXPECT_FALSE(GlobMatches("", "Makefile"));
}

TEST(SeriesTest, SplitsMailsAndSkipsTheCoverLetter) {
  const std::string mbox =
      "From 0 Mon Sep 17 00:00:00 2001\nSubject: [PATCH 0/2] cover\n\nThe cover.\n\n" +
      PatchMail("[PATCH 1/2] mm: one", "int b;", "int B;") +
      PatchMail("[PATCH 2/2] mm: two\n and a folded subject", "int c;", "int C;", 3);
  absl::StatusOr<std::vector<Patch>> patches = SplitMbox(mbox, "s.mbox", 4);
  ASSERT_TRUE(patches.ok()) << patches.status();
  ASSERT_EQ(patches->size(), 2u);
  EXPECT_EQ((*patches)[0].index, 4);
  EXPECT_EQ((*patches)[0].subject, "[PATCH 1/2] mm: one");
  EXPECT_EQ((*patches)[1].subject, "[PATCH 2/2] mm: two and a folded subject");
  EXPECT_EQ((*patches)[1].files, std::vector<std::string>{"mm/memory.c"});
  EXPECT_TRUE(GlobMatches("arch/x86/*", "arch/x86/mm/fault.c"));
  EXPECT_TRUE(GlobMatches("mm/*.c", "mm/memory.c"));
  EXPECT_FALSE(GlobMatches("arch/x86/*", "arch/arm64/mm/fault.c"));
  EXPECT_TRUE(GlobMatches("arch/?86/*", "arch/x86/mm/fault.c"));
}

TEST(SeriesTest, TheSeedSeriesSplitsIntoItsArchHunks) {
  const char* path = std::getenv("FAULTLINE_SEED_SERIES");
  const std::string file = path != nullptr ? path : FAULTLINE_SEED_SERIES_DEFAULT;
  std::ifstream in(file);
  if (!in) GTEST_SKIP() << "no seed series at " << file;
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<Patch>> patches = SplitMbox(text.str(), "rfc-v5.mbox");
  ASSERT_TRUE(patches.ok()) << patches.status();
  ASSERT_EQ(patches->size(), 1u);
  EXPECT_EQ((*patches)[0].subject,
            "[RFC PATCH v5] mm: retry page faults once under the per-VMA lock");
  EXPECT_EQ(IncludedFiles((*patches)[0], {"arch/x86/*", "arch/arm64/*", "arch/riscv/*"}),
            (std::vector<std::string>{"arch/arm64/mm/fault.c", "arch/riscv/mm/fault.c",
                                      "arch/x86/mm/fault.c"}));
}

// What a series is keyed by: its diffs, not the mails they came in.
TEST(SeriesKeyTest, PatchDiffKeepsTheDiffAndDropsWhatAnExportChanges) {
  const std::string mail =
      "From 2222222222222222222222222222222222222222 Mon Sep 17 00:00:00 2001\n"
      "Message-Id: <1@example.org>\nSubject: [PATCH v2] docs: done\n\nWhy.\n---\n"
      " README | 2 +-\n\n"
      "diff --git a/README b/README\nindex 0123456..89abcde 100644\n--- a/README\n"
      "+++ b/README\n@@ -10,3 +10,3 @@ section\n x\n-- \n+- done\n y\n"
      "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
      "similarity index 100%\n-- \n2.39.5\n\n";
  // "-- " inside the hunk is a removed "- " line (counted by the hunk header); outside it,
  // format-patch's signature, which ends the patch.
  EXPECT_EQ(PatchDiff(mail),
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@\n x\n-- \n+- done\n y\n"
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n");
  // A list's footer after the last hunk is not part of the patch (git apply skips it).
  std::string footer = mail.substr(0, mail.find("-- \n2.39.5"));
  footer += "_______________________________________________\nlinux-mm mailing list\n";
  EXPECT_EQ(PatchDiff(footer), PatchDiff(mail));
}

// Two exports of one commit, made by git format-patch: another commit id and date, another
// subject prefix, a cover letter, Message-Ids, full index lines, another signature; and the
// same change made on a base with more lines above it (other hunk line numbers). One key.
// A one-line change of the diff, or a whitespace change, is another key.
TEST(SeriesKeyTest, TheSamePatchExportedTwiceIsOneKeyAndAnotherDiffAnother) {
  char tmpl[] = "/tmp/faultline-series-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{root};
  auto git = [](const std::string& repo, std::vector<std::string> args, const std::string& date) {
    args.insert(args.begin(), {"git", "-C", repo, "-c", "user.name=Dev", "-c",
                               "user.email=dev@example.org", "-c", "core.abbrev=7"});
    absl::StatusOr<std::string> out =
        RunForOutput({args, "", {{"GIT_AUTHOR_DATE", date}, {"GIT_COMMITTER_DATE", date}}});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : "";
  };
  std::string lines;
  for (int i = 1; i <= 20; ++i) lines += "int line" + std::to_string(i) + ";\n";
  // A repository whose one commit changes line 10 of mm/memory.c to `to`, below `above`.
  auto commit = [&](const std::string& name, const std::string& above, const std::string& to,
                    const std::string& date) {
    const std::string repo = root + "/" + name;
    Put(repo + "/mm/memory.c", above + lines);
    git(repo, {"init", "-q"}, date);
    git(repo, {"add", "-A"}, date);
    git(repo, {"commit", "-qm", "base"}, date);
    Put(repo + "/mm/memory.c", above + absl::StrReplaceAll(lines, {{"int line10;\n", to}}));
    git(repo, {"commit", "-qam", "mm: line 10 changes"}, date);
    return repo;
  };
  const std::string date = "2024-01-01T00:00:00";
  const std::string one = commit("one", "", "int line10_changed;\n", date);
  const std::string first = git(one, {"format-patch", "-1", "--stdout"}, date);
  // The same commit again: amended (another date, so another commit id), exported otherwise.
  const std::string later = "2024-06-01T12:00:00";
  git(one, {"commit", "-q", "--amend", "--no-edit", "--date=" + later}, later);
  const std::string second =
      git(one,
          {"format-patch", "-1", "--stdout", "--cover-letter", "--subject-prefix=PATCH v2",
           "--full-index", "--thread", "--signature=3.0", "--stat=60"},
          later);
  const std::string moved =
      git(commit("moved", "// three\n// more\n// lines\n", "int line10_changed;\n", date),
          {"format-patch", "-1", "--stdout"}, date);
  const std::string other = git(commit("other", "", "int line10_changed_too;\n", date),
                                {"format-patch", "-1", "--stdout"}, date);
  const std::string spaced = git(commit("spaced", "", "int  line10_changed;\n", date),
                                 {"format-patch", "-1", "--stdout"}, date);
  // The exports differ where exports differ.
  ASSERT_NE(first.substr(0, 45), second.substr(0, 45));  // "From <commit id> "
  ASSERT_NE(first.find("Date: Mon, 1 Jan 2024"), std::string::npos) << first;
  ASSERT_NE(second.find("Date: Sat, 1 Jun 2024"), std::string::npos) << second;
  ASSERT_NE(absl::AsciiStrToLower(second).find("message-id: <"), std::string::npos) << second;
  ASSERT_NE(second.find("[PATCH v2 0/1]"), std::string::npos) << second;
  const size_t index = second.find("\nindex ");
  ASSERT_NE(index, std::string::npos);
  ASSERT_EQ(second.find("..", index) - index, 7u + 40u) << "full index: 40 hex ids";
  ASSERT_NE(first.find("\n@@ -7,7 +7,7 @@"), std::string::npos) << first;
  ASSERT_NE(moved.find("\n@@ -10,7 +10,7 @@"), std::string::npos) << moved;

  auto key = [](const std::string& mbox) {
    absl::StatusOr<std::vector<Patch>> patches = SplitMbox(mbox, "s.mbox");
    EXPECT_TRUE(patches.ok()) << patches.status();
    EXPECT_EQ(patches.ok() ? patches->size() : 0u, 1u) << mbox;
    return patches.ok() ? SeriesKey(*patches) : "";
  };
  EXPECT_EQ(key(first).size(), 64u);
  EXPECT_EQ(key(second), key(first));
  EXPECT_EQ(key(moved), key(first));
  EXPECT_NE(key(other), key(first));
  EXPECT_NE(key(spaced), key(first));
  // A series is its patches in order, whatever files they came in.
  absl::StatusOr<std::vector<Patch>> a = SplitMbox(first, "a.mbox");
  absl::StatusOr<std::vector<Patch>> b = SplitMbox(other, "b.mbox", 2);
  absl::StatusOr<std::vector<Patch>> both = SplitMbox(first + other, "ab.mbox");
  ASSERT_TRUE(a.ok() && b.ok() && both.ok());
  const std::vector<Patch> ab = {(*a)[0], (*b)[0]}, ba = {(*b)[0], (*a)[0]};
  EXPECT_EQ(SeriesKey(ab), SeriesKey(*both));
  EXPECT_NE(SeriesKey(ab), SeriesKey(ba));
  EXPECT_NE(SeriesKey(ab), SeriesKey(*a));
}

}  // namespace
}  // namespace faultline::kbuild
