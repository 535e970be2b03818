// Kernels a job brings: the checks on submit, the unique labels, `from`, and which builds
// a job gets (orchestration/kernel_sources.h).
#include "services/controller/orchestration/kernel_sources.h"

#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "common/sha256.h"
#include "services/controller/core/report.h"

namespace faultline::controller {
namespace {

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.add_kernels("vanilla");
  spec.add_kernels("patched");
  spec.set_baseline("vanilla");
  auto& vanilla = (*spec.mutable_kernel_sources())["vanilla"];
  vanilla.set_tree("/srv/linux.git");
  vanilla.set_ref("v6.12.117");
  vanilla.set_config_base("tinyconfig");
  auto* fragment = vanilla.add_fragments();
  fragment->set_name("lab.config");
  fragment->set_content("CONFIG_ZRAM=y\n");
  auto& patched = (*spec.mutable_kernel_sources())["patched"];
  patched.set_from("vanilla");
  auto* mbox = patched.add_series();
  mbox->set_name("v5.mbox");
  mbox->set_content("From x\nSubject: [PATCH] mm\n\ndiff --git a/mm/x b/mm/x\n");
  patched.add_include("arch/x86/*");
  (*spec.mutable_kernel_overrides())["patched"].mutable_params()->insert({"threads", "4"});
  return spec;
}

// One commit exported twice by git format-patch (2.39.5): first plainly, then amended (another
// date, so another commit id) with --cover-letter --subject-prefix="PATCH v2" --full-index
// --thread --signature=3.0.
constexpr char kExport1[] =
    R"(From 02b78d6066bfaa12bc9a5a3a6650368859a8bcae Mon Sep 17 00:00:00 2001
From: Dev <dev@example.org>
Date: Mon, 1 Jan 2024 00:00:00 +0000
Subject: [PATCH] mm: line 6 changes

---
 mm/memory.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/mm/memory.c b/mm/memory.c
index 34518e3..c3ece85 100644
--- a/mm/memory.c
+++ b/mm/memory.c
@@ -3,7 +3,7 @@ int line2;
 int line3;
 int line4;
 int line5;
-int line6;
+int line6_changed;
 int line7;
 int line8;
 int line9;
-- 
2.39.5

)";
constexpr char kExport2[] =
    R"(From 42f11a103133e09dd38f04dd85f6a88d733fa614 Mon Sep 17 00:00:00 2001
Message-Id: <cover.1796410460.git.dev@example.org>
From: Dev <dev@example.org>
Date: Fri, 4 Dec 2026 18:54:20 +0000
Subject: [PATCH v2 0/1] *** SUBJECT HERE ***

*** BLURB HERE ***

Dev (1):
  mm: line 6 changes

 mm/memory.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

-- 
3.0

From 42f11a103133e09dd38f04dd85f6a88d733fa614 Mon Sep 17 00:00:00 2001
Message-Id: <42f11a103133e09dd38f04dd85f6a88d733fa614.1796410460.git.dev@example.org>
In-Reply-To: <cover.1796410460.git.dev@example.org>
References: <cover.1796410460.git.dev@example.org>
From: Dev <dev@example.org>
Date: Sat, 1 Jun 2024 12:00:00 +0000
Subject: [PATCH v2 1/1] mm: line 6 changes

---
 mm/memory.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/mm/memory.c b/mm/memory.c
index 34518e3cb7cb1da1d2d6f00de41e1f9c67b7160b..c3ece855c1a6046bc506da3cd3f36c93d00ee989 100644
--- a/mm/memory.c
+++ b/mm/memory.c
@@ -3,7 +3,7 @@ int line2;
 int line3;
 int line4;
 int line5;
-int line6;
+int line6_changed;
 int line7;
 int line8;
 int line9;
-- 
3.0

)";

constexpr char kUrl[] = "https://example.org/bzImage";
constexpr char kSha[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// vanilla as a prebuilt image (its tree, ref and config cleared).
void SetImage(v1::JobSpec& spec, const std::string& url, const std::string& sha,
              const std::string& arch) {
  auto& v = (*spec.mutable_kernel_sources())["vanilla"];
  v.clear_tree();
  v.clear_ref();
  v.clear_config_base();
  v.clear_fragments();
  v.set_image(url);
  v.set_image_sha256(sha);
  v.set_image_arch(arch);
}

std::string Message(const absl::Status& s) {
  return std::string(s.message());
}

TEST(KernelSources, LabelsAreNamedByTheirResolvedSourceAndTheSpecIsRewritten) {
  v1::JobSpec spec = Spec();
  auto resolved = ResolveKernelSources(spec);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->size(), 2u);
  const std::string vanilla = spec.kernels(0), patched = spec.kernels(1);
  EXPECT_EQ(vanilla.substr(0, 8), "vanilla@");
  EXPECT_EQ(vanilla.size(), 8u + 12u);
  EXPECT_EQ(patched.substr(0, 8), "patched@");
  EXPECT_EQ(spec.baseline(), vanilla);
  EXPECT_TRUE(spec.kernel_overrides().contains(patched));
  // `from`: the other label's tree, ref, config and fragments, its own series.
  const v1::KernelSource& p = resolved->at(patched);
  EXPECT_EQ(p.tree(), "/srv/linux.git");
  EXPECT_EQ(p.ref(), "v6.12.117");
  EXPECT_EQ(p.config_base(), "tinyconfig");
  ASSERT_EQ(p.fragments_size(), 1);
  EXPECT_EQ(p.series_size(), 1);
  EXPECT_TRUE(p.from().empty());
  // The same source is the same label (builds are shared); another series another one.
  v1::JobSpec again = Spec();
  ASSERT_TRUE(ResolveKernelSources(again).ok());
  EXPECT_EQ(again.kernels(0), vanilla);
  EXPECT_EQ(again.kernels(1), patched);
  v1::JobSpec other = Spec();
  (*other.mutable_kernel_sources())["patched"].mutable_series(0)->set_content(
      "From y\nSubject: [PATCH] mm\n\ndiff --git a/mm/y b/mm/y\n");
  ASSERT_TRUE(ResolveKernelSources(other).ok());
  EXPECT_EQ(other.kernels(0), vanilla);
  EXPECT_NE(other.kernels(1), patched);
  // What is stored with the job keeps the names, not the contents.
  const v1::JobSpec stored = WithoutFileContents(spec);
  EXPECT_EQ(stored.kernel_sources().at(patched).series(0).name(), "v5.mbox");
  EXPECT_TRUE(stored.kernel_sources().at(patched).series(0).content().empty());
}

// Issue #43: a series is named by its diffs, not by its mails. The same patch exported twice
// (another commit id, date, subject prefix, Message-Ids, a cover letter, full index lines,
// another signature, another file name) is one label, so one build; a one-line change of
// the diff is another. Labels without a series keep their names.
TEST(KernelSources, ASeriesIsNamedByItsDiffsNotByItsMails) {
  auto patched_label = [](const std::string& name, const std::string& mbox) {
    v1::JobSpec spec = Spec();
    auto* series = (*spec.mutable_kernel_sources())["patched"].mutable_series(0);
    series->set_name(name);
    series->set_content(mbox);
    auto resolved = ResolveKernelSources(spec);
    EXPECT_TRUE(resolved.ok()) << resolved.status();
    return spec.kernels(1);
  };
  const std::string first = patched_label("v1.mbox", kExport1);
  ASSERT_NE(std::string(kExport1), std::string(kExport2));
  EXPECT_EQ(patched_label("v2.mbox", kExport2), first);
  // The patch as a one-line change of the diff: another kernel.
  const std::string changed =
      absl::StrReplaceAll(kExport1, {{"+int line6_changed;\n", "+int line6_changed_too;\n"}});
  ASSERT_NE(changed, kExport1);
  EXPECT_NE(patched_label("v1.mbox", changed), first);
  // The vanilla label is named as before series were keyed by their diffs: the history of
  // kernels without a series goes on under the same names.
  v1::JobSpec spec = Spec();
  ASSERT_TRUE(ResolveKernelSources(spec).ok());
  EXPECT_EQ(spec.kernels(0),
            "vanilla@" + Sha256Hex("tree\n/srv/linux.git\nref\nv6.12.117\nbase\ntinyconfig\n"
                                   "fragment\nlab.config\n14\nCONFIG_ZRAM=y\n")
                             .substr(0, 12));
}

// A schedule's slot marks the kernels that follow a branch (a ref that is not a commit id);
// `from` follows its base. The series drops the slot.
TEST(KernelSources, ASlotNamesKernelsOnABranchPerSlot) {
  v1::JobSpec plain = Spec();
  ASSERT_TRUE(ResolveKernelSources(plain).ok());
  v1::JobSpec tonight = Spec();
  (*tonight.mutable_kernel_sources())["vanilla"].set_ref("main");
  v1::JobSpec tomorrow = tonight;
  const std::string slot = SlotTag(1764727200000);  // 2025-12-03 02:00 UTC
  EXPECT_EQ(slot, "20251203T0200");
  ASSERT_TRUE(ResolveKernelSources(tonight, {}, slot).ok());
  ASSERT_TRUE(ResolveKernelSources(tomorrow, {}, SlotTag(1764727200000 + 86400000)).ok());
  EXPECT_EQ(tonight.kernels(0).substr(8 + 12), "+20251203T0200");
  EXPECT_EQ(tonight.kernels(1).substr(8 + 12), "+20251203T0200");  // patched: from vanilla
  EXPECT_EQ(tomorrow.kernels(0).substr(8 + 12), "+20251204T0200");
  EXPECT_EQ(SeriesKernel(tonight.kernels(0)), SeriesKernel(tomorrow.kernels(0)));
  EXPECT_EQ(SeriesKernel(tonight.kernels(0)), tonight.kernels(0).substr(0, 8 + 12));
  EXPECT_EQ(tonight.baseline(), tonight.kernels(0));
  EXPECT_TRUE(tonight.kernel_sources().contains(tonight.kernels(1)));
  // A tag is taken as moving too (tags can be moved); a commit id is not, nor an image.
  v1::JobSpec commit = Spec();
  (*commit.mutable_kernel_sources())["vanilla"].set_ref(std::string(40, 'c'));
  ASSERT_TRUE(ResolveKernelSources(commit, {}, slot).ok());
  EXPECT_EQ(commit.kernels(0).find('+'), std::string::npos);
  v1::JobSpec image = Spec();
  SetImage(image, kUrl, kSha, "x86_64");
  image.mutable_kernel_sources()->erase("patched");
  image.mutable_kernels()->RemoveLast();
  image.mutable_kernel_overrides()->clear();
  ASSERT_TRUE(ResolveKernelSources(image, {}, slot).ok());
  EXPECT_EQ(image.kernels(0).find('+'), std::string::npos);
  EXPECT_TRUE(IsCommitId(std::string(64, 'e')));
  EXPECT_FALSE(IsCommitId(std::string(39, 'e')));
  EXPECT_FALSE(IsCommitId(std::string(40, 'E')));
}

TEST(KernelSources, SeriesKernelDropsOnlyASlot) {
  EXPECT_EQ(SeriesKernel("n@0123456789ab+20261203T0200"), "n@0123456789ab");
  for (const std::string label :
       {"vanilla", "n@0123456789ab", "n+20261203T0200", "n@0123456789aB+20261203T0200",
        "n@0123456789ab+2026120xT0200", "n@0123456789ab-20261203T0200",
        "@0123456789ab+20261203T0200", "n@0123456789ab+20261203T02000"}) {
    EXPECT_EQ(SeriesKernel(label), label) << label;
  }
}

TEST(KernelSources, BadSourcesAreRefusedNamingTheField) {
  struct Case {
    std::function<void(v1::JobSpec&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["other"].set_tree("/t"); },
       "kernels.other: a source for a label that `kernels` does not list"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["vanilla"].clear_tree(); },
       "kernels.vanilla: exactly one of tree"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["vanilla"].clear_ref(); },
       "kernels.vanilla.ref: a tag, branch or commit is needed"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["vanilla"].set_tree("relative/path"); },
       "kernels.vanilla.tree: an absolute path"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["vanilla"].set_config_base("rm -rf"); },
       "kernels.vanilla.config.base: 'rm -rf' is not a config make target"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["patched"].set_from("nope"); },
       "kernels.patched.from: 'nope' is not a label of this job with a tree"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["patched"].set_ref("v1"); },
       "kernels.patched: with `from`, the tree, ref and config are the other label's"},
      {[](v1::JobSpec& s) { SetImage(s, "ftp://example.org/bzImage", kSha, "x86_64"); },
       "kernels.vanilla.image: an http://, https:// or file:/// URL"},
      {[](v1::JobSpec& s) { SetImage(s, "https://example.org/a b", kSha, "x86_64"); },
       "kernels.vanilla.image: an http://, https:// or file:/// URL"},
      {[](v1::JobSpec& s) { SetImage(s, kUrl, "ABC", "x86_64"); },
       "kernels.vanilla.sha256: the image's sha256 is needed (64 lowercase hex"},
      {[](v1::JobSpec& s) { SetImage(s, kUrl, kSha, ""); },
       "kernels.vanilla.arch: the arch the image boots is needed: x86_64, aarch64 or riscv64"},
      {[](v1::JobSpec& s) { SetImage(s, kUrl, kSha, "mips"); },
       "kernels.vanilla.arch: the arch the image boots is needed"},
      {[](v1::JobSpec& s) {
         SetImage(s, kUrl, kSha, "x86_64");
         (*s.mutable_kernel_sources())["vanilla"].set_config_base("tinyconfig");
       },
       "kernels.vanilla: a prebuilt image takes no ref, config, series or include"},
      {[](v1::JobSpec& s) { (*s.mutable_kernel_sources())["vanilla"].set_image_sha256(kSha); },
       "kernels.vanilla: sha256, arch and release go with image"},
      {[](v1::JobSpec& s) { SetImage(s, kUrl, kSha, "x86_64"); },  // patched is `from` it
       "kernels.patched.from: 'vanilla' is not a label of this job with a tree"},
      {[](v1::JobSpec& s) {
         (*s.mutable_kernel_sources())["patched"].mutable_series(0)->set_content(
             std::string((1 << 20) + 1, 'x'));
       },
       "kernels.patched.series[0]: v5.mbox is 1048577 bytes, over the limit of 1048576"},
      {[](v1::JobSpec& s) {
         auto& patched = (*s.mutable_kernel_sources())["patched"];
         *patched.add_series() = patched.series(0);
         patched.mutable_series(1)->set_name("cover.mbox");
         patched.mutable_series(1)->set_content("From x\nSubject: [PATCH 0/1] cover\n\nNo diff.\n");
       },
       "kernels.patched.series[1]: cover.mbox has no patch (no mail with a `diff --git`)"},
  };
  for (const Case& c : cases) {
    v1::JobSpec spec = Spec();
    c.change(spec);
    auto resolved = ResolveKernelSources(spec);
    ASSERT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(Message(resolved.status()).rfind(c.message, 0), 0u)
        << Message(resolved.status()) << "\nwanted: " << c.message;
  }
}

TEST(KernelSources, BuildsForTheArchesOfEligibleBoardsThatBootBuiltKernels) {
  v1::JobSpec spec = Spec();
  auto resolved = ResolveKernelSources(spec);
  ASSERT_TRUE(resolved.ok());
  BoardSummary x86{.name = "x1", .arch = "x86_64"};
  x86.boots_built_kernels = true;
  BoardSummary arm = x86;
  arm.name = "a1";
  arm.arch = "aarch64";
  BoardSummary stock{.name = "s1", .arch = "riscv64"};  // boots no built kernel
  BoardSummary builder{.name = "builder", .arch = "x86_64"};
  builder.build_arches = {"x86_64", "aarch64"};
  auto builds = PlanBuilds(*resolved, spec, {x86, arm, stock, builder});
  ASSERT_TRUE(builds.ok()) << builds.status();
  ASSERT_EQ(builds->size(), 4u);  // 2 labels x 2 arches, in the job's order
  EXPECT_EQ((*builds)[0].label, spec.kernels(0));
  EXPECT_EQ((*builds)[0].arch, "aarch64");
  EXPECT_EQ((*builds)[1].arch, "x86_64");
  EXPECT_EQ((*builds)[2].label, spec.kernels(1));
  EXPECT_NE((*builds)[2].source_json.find("v5.mbox"), std::string::npos);
  // The arches filter narrows the builds.
  spec.add_arches("x86_64");
  auto x86_only = PlanBuilds(*resolved, spec, {x86, arm, builder});
  ASSERT_TRUE(x86_only.ok());
  EXPECT_EQ(x86_only->size(), 2u);
  // No builder for an arch a board needs: refused, naming the arch and the builders.
  spec.clear_arches();
  builder.build_arches = {"x86_64"};
  auto no_builder = PlanBuilds(*resolved, spec, {x86, arm, builder});
  ASSERT_EQ(no_builder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(no_builder.status()),
            "kernels.vanilla: no builder builds for aarch64 (builders build for: x86_64); "
            "restrict the job with `arches`");
  auto no_board = PlanBuilds(*resolved, spec, {stock, builder});
  EXPECT_EQ(Message(no_board.status()),
            "kernels.vanilla: no eligible board boots kernels that jobs bring (agent.yaml "
            "built_kernels)");
}

TEST(KernelSources, APrebuiltImageIsOneBuildOfItsArchFetchedByAnyBuilder) {
  v1::JobSpec spec = Spec();
  SetImage(spec, kUrl, kSha, "x86_64");
  auto& patched = (*spec.mutable_kernel_sources())["patched"];
  patched.clear_from();
  patched.clear_series();
  patched.clear_include();
  patched.set_tree("/srv/linux.git");
  patched.set_ref("v6.12.117");
  auto resolved = ResolveKernelSources(spec);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const std::string vanilla = spec.kernels(0);
  EXPECT_EQ(vanilla.substr(0, 8), "vanilla@");
  EXPECT_TRUE(resolved->at(vanilla).config_base().empty());  // no defconfig for an image
  // Another sha256 is another kernel.
  v1::JobSpec other = Spec();
  SetImage(other, kUrl, std::string(64, 'f'), "x86_64");
  (*other.mutable_kernel_sources())["patched"] = patched;
  ASSERT_TRUE(ResolveKernelSources(other).ok());
  EXPECT_NE(other.kernels(0), vanilla);

  BoardSummary x86{.name = "x1", .arch = "x86_64"};
  x86.boots_built_kernels = true;
  BoardSummary x86_builder{.name = "builder", .arch = "x86_64"};
  x86_builder.build_arches = {"x86_64"};
  auto builds = PlanBuilds(*resolved, spec, {x86, x86_builder});
  ASSERT_TRUE(builds.ok()) << builds.status();
  ASSERT_EQ(builds->size(), 2u);
  EXPECT_EQ((*builds)[0].label, vanilla);
  EXPECT_EQ((*builds)[0].arch, "x86_64");
  EXPECT_NE((*builds)[0].source_json.find(kUrl), std::string::npos);
  // An image of one arch with eligible boards of another: refused, saying how to narrow.
  BoardSummary arm = x86;
  arm.name = "a1";
  arm.arch = "aarch64";
  x86_builder.build_arches = {"x86_64", "aarch64"};
  auto mixed = PlanBuilds(*resolved, spec, {x86, arm, x86_builder});
  EXPECT_EQ(Message(mixed.status()),
            "kernels.vanilla.arch: the image boots x86_64 but the job's eligible boards are "
            "aarch64, x86_64: restrict the job with `arches: [x86_64]`");
  // No builder at all: nobody can fetch it.
  auto nobody = PlanBuilds(*resolved, spec, {x86});
  EXPECT_EQ(Message(nobody.status()),
            "kernels.vanilla.image: no builder is registered to fetch the image (agent.yaml "
            "builder:)");
}

}  // namespace
}  // namespace faultline::controller
