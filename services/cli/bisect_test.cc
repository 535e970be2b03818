// faultline bisect's CLI side: the commits listed from a real git tree (and the refusals),
// and the result as text a mail can carry.
#include "services/cli/bisect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
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

v1::Bisection Finished() {
  v1::Bisection b;
  b.set_id(7);
  b.set_state("done");
  b.set_phase("done");
  auto& r = *b.mutable_request();
  r.set_tree("/srv/linux");
  r.set_board("lab-x86_64");
  r.set_metric("counter:perf.mmap_lock:mmap_lock_start_locking");
  r.set_command("faultline bisect --tree /srv/linux --good v6.12 --bad demo --spec s.yaml");
  for (int i = 0; i < 5; ++i) {
    auto* c = r.add_commits();
    c->set_sha(std::string(40, static_cast<char>('a' + i)));
    c->set_subject(absl::StrCat("x86/mm: a change with a long subject line, number ", i,
                                ", that goes on and on past eighty columns"));
    c->set_author("A U Thor <a@example.org>");
  }
  b.set_culprit(3);
  b.set_confirmation("bad");
  b.set_revert("good");
  b.set_effect(std::log(60.0));
  b.set_effect_low(std::log(50.0));
  b.set_effect_high(std::log(70.0));
  b.set_runs(84);
  b.set_board_seconds(900);
  b.set_wall_seconds(3000);
  b.set_kernels(6);
  for (const char* m : {"good", "good", "broken", "bad", "bad"}) b.add_marks(m);
  auto step = [&](const char* role, int cand, int ref, const char* outcome, double ratio) {
    auto* s = b.add_steps();
    s->set_role(role);
    s->set_candidate(cand);
    s->set_reference(ref);
    s->set_outcome(outcome);
    s->set_ratio(ratio);
    s->set_ci_low(ratio * 0.9);
    s->set_ci_high(ratio * 1.1);
    s->set_n(4);
    if (std::string(outcome) == "broken") {
      s->set_n(0);
      s->set_note(
          "kernel c@1: build 4 (x86_64) failed: build: make bzImage failed (exit 2); last lines:\n"
          "  CC      mm/util.o\n"
          "/var/cache/kb/src/f6189cbea998-x86_64/mm/util.c:1:36: error: expected expression "
          "before ';' token\n"
          "make[4]: *** [scripts/Makefile.build:234: mm/util.o] Error 1\n");
    }
  };
  step("endpoints", 4, 0, "bad", 60);
  step("step", 2, 0, "broken", 0);
  step("step", 1, 0, "good", 1.01);
  step("step", 3, 0, "bad", 59);
  step("confirm", 3, 1, "bad", 61);
  step("revert", 4, 0, "good", 1.02);
  b.mutable_steps(3)->set_n(4);
  b.mutable_steps(3)->set_ci_low(0);
  b.mutable_steps(3)->set_ci_high(std::numeric_limits<double>::infinity());
  return b;
}

TEST(BisectRender, TheResultPastesIntoAnEightyColumnMail) {
  const std::string text = RenderBisection(Finished(), true);
  EXPECT_THAT(text, HasSubstr("bisection 7: done: first bad commit found and confirmed"));
  EXPECT_THAT(text, HasSubstr("First bad commit: " + std::string(40, 'd')));
  EXPECT_THAT(text, HasSubstr("Author: A U Thor <a@example.org>"));
  EXPECT_THAT(text, HasSubstr("Confirmed against its parent bbbbbbbbbbbb: yes, ratio 61.000"));
  EXPECT_THAT(text, HasSubstr("Reverted on the bad end: like good"));
  EXPECT_THAT(text, HasSubstr("(no 95% CI below 6 repetitions"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr(" -, n=")));
  EXPECT_THAT(text,
              HasSubstr("cccccccccccc skipped: build error: mm/util.c:1:36: error: expected"));
  EXPECT_THAT(text, HasSubstr("Reproduce: faultline bisect --tree /srv/linux"));
  EXPECT_THAT(text, HasSubstr("6 kernels built, 84 runs (15 min measured), 50 min in all"));
  EXPECT_THAT(text, HasSubstr("bad/good 60.000 (99% CI of the endpoints [50.000, 70.000])"));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "Reproduce: ")) continue;  // a command is pasted whole
    EXPECT_LE(line.size(), 80u) << line;
  }
}

TEST(BisectRender, ProgressSaysWhereItStandsAndWhatIsLeft) {
  v1::Bisection b = Finished();
  b.set_state("running");
  b.set_phase("bisecting");
  b.set_range_good(1);
  b.set_range_bad(4);
  b.set_untested(2);
  b.set_steps_left(3);
  b.set_seconds_left(600);
  const std::string line = FormatBisectProgress(b);
  EXPECT_THAT(line, HasSubstr("bisection 7: bisecting, 2 commits left between bbbbbbbbbbbb"));
  EXPECT_THAT(line, HasSubstr("~3 steps / 10 min left"));
}

}  // namespace
}  // namespace faultline::cli
