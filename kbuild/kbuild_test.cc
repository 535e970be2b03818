// The build cache's rules on a small stand-in for a kernel tree: a real git repository
// whose Makefile answers the targets faultline-kbuild uses (tinyconfig, olddefconfig,
// bzImage, kernelrelease) in milliseconds, and a merge_config.sh that appends fragments.
// The real kernel is built by the e2e tests (tests/e2e/kernel_build_test.sh).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kbuild/builder.h"
#include "kbuild/kconfig.h"
#include "kbuild/process.h"
#include "kbuild/series.h"

namespace faultline::kbuild {
namespace {
namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Put(const std::string& path, const std::string& text, bool exec = false) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  if (exec) ::chmod(path.c_str(), 0755);
}

constexpr char kFakeMakefile[] = R"MK(O ?= .
tinyconfig defconfig:
	@mkdir -p $(O) && cp $(CURDIR)/base.config $(O)/.config
olddefconfig:
	@sed -i '/CONFIG_IMPOSSIBLE=/d' $(O)/.config
bzImage:
	@test ! -f $(CURDIR)/BROKEN || { echo "mm/memory.c:1:1: error: it is broken"; exit 2; }
	@mkdir -p $(O)/arch/x86/boot && cat $(CURDIR)/mm/memory.c $(O)/.config > $(O)/arch/x86/boot/bzImage
	@echo "  LD  vmlinux (LOCALVERSION=$(LOCALVERSION))"
kernelrelease:
	@echo 6.12.0$(LOCALVERSION)
)MK";

constexpr char kBaseConfig[] =
    "CONFIG_CGROUPS=y\nCONFIG_MEMCG=y\nCONFIG_SWAP=y\nCONFIG_ZRAM=y\nCONFIG_KEXEC=y\n"
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
    Put(tree_ + "/Makefile", kFakeMakefile);
    Put(tree_ + "/base.config", kBaseConfig);
    Put(tree_ + "/mm/memory.c", "// memory\nint a;\nint b;\nint c;\n");
    Put(tree_ + "/mm/Kconfig.debug", "config PER_VMA_LOCK_STATS\n\tbool\n");
    Put(tree_ + "/arch/x86/mm/fault.c", "int fault;\n");
    Put(tree_ + "/scripts/kconfig/merge_config.sh",
        "#!/bin/sh\n# -m -O DIR BASE FRAGMENTS...\nshift; shift; out=$1; shift; base=$1; shift\n"
        "for f in \"$@\"; do sed -n 's/^\\(# \\)\\{0,1\\}\\(CONFIG_[A-Z0-9_]*\\).*/\\2/p' \"$f\" |"
        " while read -r o; do sed -i \"/^$o=/d; /^# $o is not set/d\" \"$base\"; done;"
        " cat \"$f\" >>\"$base\"; done\n",
        true);
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
  std::string root_, tree_, cache_;
};

TEST_F(KbuildTest, BuildsOnceAndRecordsWhatItBuilt) {
  Builder builder(cache_);
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
  Builder builder(cache_);
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
  Builder builder(cache_);
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
  Builder builder(cache_);
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
}

TEST_F(KbuildTest, IncludeAppliesOnlySomePaths) {
  Builder builder(cache_);
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
  Builder builder(cache_);
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
  Builder builder(cache_);
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

TEST(KconfigTest, RequirementsAndDroppedOptions) {
  const auto config = ParseConfig(
      "CONFIG_CGROUPS=y\nCONFIG_MEMCG=y\nCONFIG_SWAP=y\nCONFIG_ZRAM=m\nCONFIG_KEXEC_FILE=y\n"
      "CONFIG_PERF_EVENTS=y\n# CONFIG_TRACING is not set\nCONFIG_VM_EVENT_COUNTERS=y\n"
      "CONFIG_BLK_DEV_INITRD=y\nCONFIG_PER_VMA_LOCK=y\nCONFIG_NR_CPUS=8\n");
  EXPECT_EQ(config.at("NR_CPUS"), "8");
  EXPECT_EQ(config.at("TRACING"), "n");
  const auto missing = MissingOptions(config, BoardRequirements(true));
  ASSERT_EQ(missing.size(), 3u);
  EXPECT_EQ(missing[0], "CONFIG_ZRAM=y (the agent's swap device is zram; final: =m)");
  EXPECT_NE(missing[1].find("CONFIG_TRACING=y"), std::string::npos);
  EXPECT_NE(missing[2].find("CONFIG_PER_VMA_LOCK_STATS=y"), std::string::npos);
  // A tree without the option, or an arch without per-VMA locks, does not need it.
  EXPECT_EQ(MissingOptions(config, BoardRequirements(false)).size(), 2u);
  auto no_vma = config;
  no_vma.erase("PER_VMA_LOCK");
  EXPECT_EQ(MissingOptions(no_vma, BoardRequirements(true)).size(), 2u);
  const auto dropped = DroppedFragmentOptions(
      ParseConfig("CONFIG_ZRAM=y\nCONFIG_NEW=y\n# CONFIG_OLD is not set\n"), config);
  EXPECT_EQ(dropped, (std::vector<std::string>{"CONFIG_NEW=y asked, final: not set",
                                               "CONFIG_ZRAM=y asked, final: m"}));
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

}  // namespace
}  // namespace faultline::kbuild
