// faultline bisect's CLI side: the commits listed from a real git tree (and the refusals),
// a bisection from a job or a change point.
#include "services/cli/bisect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace faultline::cli {
namespace {

using ::testing::HasSubstr;

class BisectCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-bisect-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tree_ = tmpl;
    Sh("git init -q && git checkout -q -b main");
    for (int i = 0; i <= 5; ++i) {
      Sh(absl::StrCat("echo ", i, " > f && git add f && git -c user.name=A -c user.email=a@x ",
                      "commit -qm 'change ", i, "'"));
      if (i == 0) Sh("git tag good");
    }
    Sh("git tag bad && git checkout -q -b side good && echo s > g && git add g && "
       "git -c user.name=A -c user.email=a@x commit -qm side && git tag side && "
       "git checkout -q main");
  }
  void TearDown() override { std::filesystem::remove_all(tree_); }
  void Sh(const std::string& command) {
    ASSERT_EQ(std::system(("cd " + tree_ + " && " + command).c_str()), 0) << command;
  }
  std::string tree_;
};

TEST_F(BisectCliTest, ListsGoodThenTheFirstParentLineUpToBad) {
  auto commits = ResolveCommits(tree_, "good", "bad");
  ASSERT_TRUE(commits.ok()) << commits.status();
  ASSERT_EQ(commits->size(), 6u);
  EXPECT_EQ((*commits)[0].subject(), "change 0");
  EXPECT_EQ((*commits)[5].subject(), "change 5");
  EXPECT_EQ((*commits)[3].author(), "A <a@x>");
  EXPECT_EQ((*commits)[5].sha().size(), 40u);
}

TEST_F(BisectCliTest, RefusesWhatCannotBeBisected) {
  auto message = [&](const std::string& good, const std::string& bad) {
    auto r = ResolveCommits(tree_, good, bad);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  EXPECT_THAT(message("bad", "good"), HasSubstr("--good bad ("));
  EXPECT_THAT(message("bad", "good"), HasSubstr("is not an ancestor of --bad good"));
  EXPECT_THAT(message("side", "bad"), HasSubstr("is not an ancestor"));
  EXPECT_THAT(message("nope", "bad"), HasSubstr("--good: 'nope' is not a commit in"));
  EXPECT_THAT(message("good", "good"), HasSubstr("the same commit"));
  auto not_git = ResolveCommits("/", "good", "bad");
  ASSERT_FALSE(not_git.ok());
  EXPECT_THAT(std::string(not_git.status().message()), HasSubstr("is not a git repository"));
}

// --from-change: the two jobs around a change point of a schedule on a branch, each with its
// night's label and build.
struct ChangeFixture {
  v1::ChangePoint cp;
  v1::Job before, after;
  std::vector<v1::Build> before_builds, after_builds;

  ChangeFixture() {
    cp.set_id(7);
    cp.set_kernel("nightly@0123456789ab");
    cp.set_arch("x86_64");
    cp.set_board("b1");
    cp.set_config("threads=2,writers=1");
    cp.set_job_id(12);
    cp.set_previous_job_id(11);
    Night(before, before_builds, 11, "+20261202T0200", std::string(40, 'a'));
    Night(after, after_builds, 12, "+20261203T0200", std::string(40, 'b'));
  }
  static void Night(v1::Job& job, std::vector<v1::Build>& builds, int64_t id,
                    const std::string& slot, const std::string& commit) {
    job.set_id(id);
    v1::JobSpec& spec = *job.mutable_spec();
    spec.set_name("nightly");
    spec.add_kernels("nightly@0123456789ab" + slot);
    auto& source = (*spec.mutable_kernel_sources())["nightly@0123456789ab" + slot];
    source.set_tree("/srv/linux");
    source.set_ref("main");
    source.set_config_base("tinyconfig");
    v1::Build other;  // another arch's build of the same night
    other.set_label("nightly@0123456789ab" + slot);
    other.set_arch("aarch64");
    other.set_state("done");
    other.set_base_commit(std::string(40, 'f'));
    builds.push_back(other);
    v1::Build b = other;
    b.set_arch("x86_64");
    b.set_base_commit(commit);
    builds.push_back(b);
  }
  absl::Status Run(BisectArgs& args, v1::JobSpec& spec) const {
    return FromChange(cp, before, before_builds, after, after_builds, args, spec);
  }
};

TEST(BisectFromChange, GoodAndBadAreTheCommitsTheTwoNightsRan) {
  ChangeFixture f;
  BisectArgs args;
  v1::JobSpec spec;
  ASSERT_TRUE(f.Run(args, spec).ok()) << f.Run(args, spec);
  EXPECT_EQ(args.tree, "/srv/linux");
  EXPECT_EQ(args.good, std::string(40, 'a'));
  EXPECT_EQ(args.bad, std::string(40, 'b'));
  EXPECT_EQ(args.config_base, "tinyconfig");
  EXPECT_EQ(args.board, "b1");
  EXPECT_EQ(args.cells, (std::vector<std::string>{"threads=2", "writers=1"}));
  EXPECT_EQ(spec.name(), "nightly");
  EXPECT_TRUE(spec.kernel_sources().empty());
  // What the user says wins.
  BisectArgs mine;
  mine.arch = "x86_64";
  mine.cells = {"threads=2"};
  ASSERT_TRUE(f.Run(mine, spec).ok());
  EXPECT_EQ(mine.board, "");
  EXPECT_EQ(mine.cells, (std::vector<std::string>{"threads=2"}));
  // A label installed by hand ("vanilla") with the same name is no kernel of a tree; a
  // job of a schedule on a commit id (no slot) is.
  ChangeFixture pinned;
  for (v1::Job* job : {&pinned.before, &pinned.after}) {
    auto& spec = *job->mutable_spec();
    const std::string label = spec.kernels(0);
    spec.set_kernels(0, "nightly@0123456789ab");
    const v1::KernelSource source = spec.kernel_sources().at(label);
    (*spec.mutable_kernel_sources())["nightly@0123456789ab"] = source;
  }
  for (auto* builds : {&pinned.before_builds, &pinned.after_builds}) {
    for (auto& b : *builds) b.set_label("nightly@0123456789ab");
  }
  BisectArgs p;
  ASSERT_TRUE(pinned.Run(p, spec).ok());
  EXPECT_EQ(p.bad, std::string(40, 'b'));
}

TEST(BisectFromChange, RefusesNamingWhy) {
  auto message = [](const std::function<void(ChangeFixture&)>& change) {
    ChangeFixture f;
    change(f);
    BisectArgs args;
    v1::JobSpec spec;
    const absl::Status s = f.Run(args, spec);
    EXPECT_FALSE(s.ok());
    return std::string(s.message());
  };
  EXPECT_THAT(message([](ChangeFixture& f) { f.cp.set_previous_job_id(0); }),
              HasSubstr("--from-change 7: the change point does not name the job before it"));
  EXPECT_THAT(message([](ChangeFixture& f) { f.after.mutable_spec()->clear_kernel_sources(); }),
              HasSubstr("job 12 does not build kernel nightly@0123456789ab from a tree"));
  EXPECT_THAT(message([](ChangeFixture& f) {
                auto& s = (*f.before.mutable_spec()->mutable_kernel_sources()).begin()->second;
                s.add_series()->set_name("v5.mbox");
              }),
              HasSubstr("must be built from a tree without a series"));
  EXPECT_THAT(message([](ChangeFixture& f) {
                auto& s = (*f.before.mutable_spec()->mutable_kernel_sources()).begin()->second;
                s.add_fragments()->set_name("lab.config");
              }),
              HasSubstr("pass them with --fragment"));
  EXPECT_THAT(message([](ChangeFixture& f) {
                auto& s = (*f.after.mutable_spec()->mutable_kernel_sources()).begin()->second;
                s.set_tree("/srv/other");
              }),
              HasSubstr("jobs 11 and 12 built the kernel from different trees"));
  EXPECT_THAT(message([](ChangeFixture& f) { f.after_builds[1].set_state("failed"); }),
              HasSubstr("job 12 has no finished build of nightly@0123456789ab+20261203T0200 "
                        "for x86_64"));
  EXPECT_THAT(message([](ChangeFixture& f) {
                f.after_builds[1].set_base_commit(f.before_builds[1].base_commit());
              }),
              HasSubstr("ran the same commit aaaaaaaaaaaa: the kernel did not change there"));
}

TEST(BisectFromJob, TheBaselineIsGoodAndTheOtherKernelBad) {
  v1::Job job;
  job.set_id(3);
  auto& spec = *job.mutable_spec();
  spec.add_kernels("old@0123456789ab");
  spec.add_kernels("new@0123456789ab");
  spec.set_baseline("old@0123456789ab");
  auto& old_source = (*spec.mutable_kernel_sources())["old@0123456789ab"];
  old_source.set_tree("/srv/linux");
  old_source.set_ref("v6.12");
  old_source.set_config_base("tinyconfig");
  auto& new_source = (*spec.mutable_kernel_sources())["new@0123456789ab"];
  new_source = old_source;
  new_source.set_ref("v6.13");
  BisectArgs args;
  v1::JobSpec out;
  ASSERT_TRUE(FromJob(job, args, out).ok());
  EXPECT_EQ(args.good, "v6.12");
  EXPECT_EQ(args.bad, "v6.13");
  EXPECT_EQ(args.tree, "/srv/linux");
  EXPECT_TRUE(out.kernel_sources().empty());
  new_source.set_tree("/srv/other");
  BisectArgs again;
  const absl::Status s = FromJob(job, again, out);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--from 3: the job must compare two refs"));
}
}  // namespace
}  // namespace faultline::cli
