// A bisection as text (report/bisect.h): what a mail carries, every line within 80
// columns, the reproducer a shell reads back.
#include "report/bisect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "faultline/v1/values.h"

namespace faultline::report {
namespace {

using ::testing::HasSubstr;

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
          "kernel c@1: build 4 (x86_64) failed: build: make bzImage failed (exit 2) after 9 s; "
          "log kept at /var/cache/kb/logs/0123456789abcdef.log; last lines:\n"
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

// Every line of `text` at most 80 columns (bytes: at least as many as columns).
void ExpectEightyColumns(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    EXPECT_LE(line.size(), 80u) << "'" << line << "' in\n" << text;
  }
}

// What a shell makes of `command`'s words after the program name, one per line.
std::string ShellArgs(const std::string& command) {
  char tmpl[] = "/tmp/faultline-bisect-sh-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream script(tmpl);
    script << "faultline() { printf '[%s]\\n' \"$@\"; }\n" << command << "\n";
  }
  std::string out;
  if (FILE* p = ::popen(absl::StrCat("sh ", tmpl).c_str(), "r"); p != nullptr) {
    char buffer[4096];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof buffer, p)) > 0) out.append(buffer, got);
    EXPECT_EQ(::pclose(p), 0) << command;
  }
  std::filesystem::remove(tmpl);
  return out;
}

// The text from "Reproduce: " on, without that word: the command as a shell reads it.
std::string ReproduceBlock(const std::string& text) {
  const size_t at = text.find("Reproduce: ");
  EXPECT_NE(at, std::string::npos) << text;
  return at == std::string::npos ? "" : text.substr(at + 11);
}

// Whether a broken step's kernel did not build is its field; a step stored before the field
// is read from its note's words (values.h BuildFailedOf).
TEST(BisectRender, AFailedBuildIsAFieldElseTheOlderNotesWords) {
  v1::Bisection typed = Finished();
  for (auto& s : *typed.mutable_steps()) {
    if (v1::OutcomeOf(s) != v1::BISECT_MARK_BROKEN) continue;
    s.set_build_failed(true);
    s.set_note("build error: mm/util.c:1:36: error: expected expression");  // no such words
  }
  EXPECT_THAT(RenderBisection(typed, true), HasSubstr("5 kernels built (1 failed to build)"));
  for (auto& s : *typed.mutable_steps()) {
    if (s.has_build_failed()) s.set_build_failed(false);  // broken, but its runs failed
  }
  EXPECT_THAT(RenderBisection(typed, true), HasSubstr("6 kernels built, 84 runs"));
  // Finished() is a document from before the field: its note's words say it.
  EXPECT_THAT(RenderBisection(Finished(), true), HasSubstr("5 kernels built (1 failed to build)"));
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
  EXPECT_THAT(text, HasSubstr("    log: /var/cache/kb/logs/0123456789abcdef.log\n"));
  EXPECT_THAT(text, HasSubstr("Reproduce: faultline bisect --tree /srv/linux"));
  // The broken commit's build failed: not counted as built.
  EXPECT_THAT(text, HasSubstr("5 kernels built (1 failed to build), 84 runs (15 min measured), "
                              "50 min in all"));
  EXPECT_THAT(text, HasSubstr("bad/good 60.000, 99% CI [50.000, 70.000] (both ends in every"));
  ExpectEightyColumns(text);
}

TEST(BisectRender, EveryLineFitsEightyColumnsWhateverItHolds) {
  v1::Bisection b = Finished();
  auto& r = *b.mutable_request();
  r.set_tree(
      "/var/cache/faultline-kbuild/a/rather/deep/checkout/of/the/kernel/"
      "linux-6.12-with-a-long-name");
  b.mutable_request()->mutable_commits(1)->set_subject(
      "mm: a subject with non-ASCII in it — déjà vu, Größe, 日本語 — and long enough to be "
      "clipped");
  (*r.mutable_cell())["threads"] = "16";
  (*r.mutable_cell())["file_size"] = "64M";
  // The command as QuotedCommandLine writes it: a quoted word with spaces and a quote, a
  // path longer than a line, an option with '='.
  const std::string command =
      "faultline bisect --tree /var/cache/faultline-kbuild/linux-6.12 --spec "
      "deploy/examples/bisect-demo.yaml --config tinyconfig --fragment deploy/kernel/board.config "
      "--fragment /home/someone/work/configs/" +
      std::string(90, 'x') +
      ".config --arch x86_64 --good v6.12.118 --bad faultline-bisect-demo --metric "
      "counter:perf.mmap_lock:mmap_lock_start_locking --cell 'threads=16' "
      "--cell 'note=it'\\''s a long quoted value with spaces: " +
      std::string(85, 'q') + " end' --block=4 --no-confirm";
  r.set_command(command);
  // A skipped commit whose build log has no "error:" line (a link failure): its last
  // lines and the whole path of the log, wrapped.
  const std::string log_path =
      "/var/cache/faultline-kbuild/logs/" + std::string(60, 'f') + "/0123456789abcdef.log";
  b.mutable_steps(1)->set_note(
      "kernel c@1: build 4 (x86_64) failed: build: make bzImage failed (exit 2) after 12 s; log "
      "kept at " +
      log_path +
      "; last lines:\n"
      "  LD      vmlinux.o\n"
      "\n"
      "ld: vmlinux.o: in function `do_user_addr_fault': fault.c:(.text+0x1d2): undefined "
      "reference to `lock_mm_and_find_vma_with_a_very_long_name_that_goes_on'\n"
      "make[2]: *** [scripts/Makefile.vmlinux_o:61: vmlinux.o] Error 1\n"
      "make[1]: *** [Makefile:1164: vmlinux_o] Error 2\n"
      "make: *** [Makefile:224: __sub-make] Error 2\n"
      "\n");
  b.mutable_steps(5)->set_outcome("broken");  // the revert does not apply either
  b.mutable_steps(5)->set_note(
      "kernel revert@0123456789ab: build 9 (x86_64) failed: kbuild: the revert of "
      "dddddddddddddddddddddddddddddddddddddddd does not apply: error: patch failed: "
      "mm/memory.c:5120");
  // A long bisection (three-digit step numbers) with extreme ratios: a counter good never
  // hit (its zero clamped at 1e-9), 4,096 repetitions, the open step measuring.
  for (int i = 0; i < 100; ++i) {
    auto* s = b.add_steps();
    s->set_role("step");
    s->set_candidate(2);
    s->set_outcome(i % 2 == 0 ? "unknown" : "good");
    s->set_ratio(i % 2 == 0 ? 3e12 : 1e-7);
    s->set_ci_low(i % 2 == 0 ? 1e12 : 1e-8);
    s->set_ci_high(i % 2 == 0 ? 9e12 : 9e-7);
    s->set_n(4096);
  }
  b.mutable_steps(b.steps_size() - 1)->set_outcome("untested");
  const std::string text = RenderBisection(b, true);
  ExpectEightyColumns(text);
  EXPECT_THAT(text, HasSubstr("  3.0e+12  [1.0e+12, 9.0e+12]  4096  unknown\n"));
  EXPECT_THAT(text, HasSubstr("  1.0e-07  [1.0e-08, 9.0e-07]  4096  measuring\n"));
  EXPECT_THAT(text, HasSubstr("cccccccccccc skipped: kernel c@1: build 4 (x86_64) failed: build:"));
  EXPECT_THAT(text, HasSubstr("    the log's last lines:\n"));
  EXPECT_THAT(text, HasSubstr("make: *** [Makefile:224: __sub-make] Error 2\n"));
  EXPECT_THAT(text, HasSubstr("undefined reference to"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("last lines:\n\n")));
  // The log's path whole, across lines if it must be.
  std::string joined;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    joined += std::string(absl::StripLeadingAsciiWhitespace(line));
  }
  EXPECT_THAT(joined, HasSubstr("log: " + log_path));
  EXPECT_THAT(text, HasSubstr("Reverted on the bad end: could not be measured: kernel revert@"));
  EXPECT_THAT(text, HasSubstr("does not apply: error: patch failed:"));
  EXPECT_THAT(text, HasSubstr("4 kernels built (2 failed to build)"));
  // The Reproduce lines are the same command for a shell.
  EXPECT_THAT(text, HasSubstr(" \\\n    --"));
  const std::string args = ShellArgs(command);
  EXPECT_THAT(args, HasSubstr("[note=it's a long quoted value with spaces: qqq"));
  EXPECT_EQ(ShellArgs(ReproduceBlock(text)), args);
}

TEST(BisectRender, TheReproduceCommandBreaksBetweenOptions) {
  // docs/bisect.md's example: an option keeps its value on its line.
  v1::Bisection b = Finished();
  b.mutable_request()->set_command(
      "faultline bisect --tree /var/cache/faultline-kbuild/linux-6.12 --spec "
      "deploy/examples/bisect-demo.yaml --config tinyconfig --fragment deploy/kernel/board.config "
      "--arch x86_64 --good v6.12.118 --bad faultline-bisect-demo --metric "
      "counter:perf.mmap_lock:mmap_lock_start_locking");
  EXPECT_EQ(ReproduceBlock(RenderBisection(b, false)),
            "faultline bisect --tree /var/cache/faultline-kbuild/linux-6.12 \\\n"
            "    --spec deploy/examples/bisect-demo.yaml --config tinyconfig \\\n"
            "    --fragment deploy/kernel/board.config --arch x86_64 --good v6.12.118 \\\n"
            "    --bad faultline-bisect-demo \\\n"
            "    --metric counter:perf.mmap_lock:mmap_lock_start_locking\n");
}

TEST(BisectRender, AFailedBisectionSaysWhyInEightyColumns) {
  v1::Bisection b = Finished();
  b.set_state("failed");
  b.set_phase("failed");
  b.set_culprit(-1);
  b.mutable_steps()->DeleteSubrange(1, 5);
  b.mutable_steps(0)->set_outcome("good");
  b.set_failure(
      "good and bad do not differ: bad/good = 1.0012, 99% CI [0.9852, 1.0174] (corrected for 8 "
      "looks) over 256 pairs, inside ±3%; nothing to bisect");
  std::string text = RenderBisection(b, true);
  ExpectEightyColumns(text);
  EXPECT_THAT(text,
              HasSubstr("bisection 7: failed: good and bad do not differ: bad/good = 1.0012,"));
  EXPECT_THAT(text, HasSubstr("inside ±3%;"));
  EXPECT_THAT(text, HasSubstr(" nothing to bisect\n"));
  // An end that does not build: the failure's first line, its build error, its log.
  b.set_failure(
      "the good or the bad end cannot be measured: kernel bad@0123456789ab: build 3 (x86_64) "
      "failed: build: make bzImage failed (exit 2) after 40 s; log kept at "
      "/var/cache/faultline-kbuild/logs/fedcba9876543210.log; last lines:\n"
      "/var/cache/kb/src/f6189cbea998-x86_64/mm/memory.c:42:7: error: 'vma' undeclared (first use "
      "in this function); did you mean 'vmf'?\n"
      "make[4]: *** [scripts/Makefile.build:234: mm/memory.o] Error 1\n");
  b.mutable_steps(0)->set_outcome("broken");
  text = RenderBisection(b, true);
  ExpectEightyColumns(text);
  EXPECT_THAT(text, HasSubstr("bisection 7: failed: the good or the bad end cannot be measured:"));
  EXPECT_THAT(text, HasSubstr("build error: mm/memory.c:42:7: error: 'vma' undeclared"));
  EXPECT_THAT(text, HasSubstr("  4  broken\n"));  // not "same": the ends were not compared
  EXPECT_THAT(text, HasSubstr("log: /var/cache/faultline-kbuild/logs/fedcba9876543210.log\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("last lines:")));
}

TEST(BisectRender, TheHeadlineEstimateIsInsideItsInterval) {
  // The controller's display fields: d pooled over every ln(bad/good) and its CI from the
  // same samples (it once printed the pooled d next to the endpoints' CI: 0.153 in
  // [0.166, 0.179]).
  v1::Bisection b = Finished();
  b.set_effect(std::log(0.153));
  b.set_effect_low(std::log(0.149));
  b.set_effect_high(std::log(0.157));
  const std::string text = RenderBisection(b, false);
  EXPECT_THAT(text, HasSubstr("  bad/good 0.153, 99% CI [0.149, 0.157] (both ends in every step"));
}

// The same bisection as a controller with the types sends it (the types only, no words):
// the words of the one before them parsed into the enums, then cleared.
v1::Bisection TypedOnly(v1::Bisection b) {
  b.set_bisection_state(v1::ParseBisectionState(b.state()));
  b.set_bisect_phase(v1::ParseBisectPhase(b.phase()));
  b.set_confirmed(v1::ParseBisectMark(b.confirmation()));
  b.set_reverted(v1::ParseBisectMark(b.revert()));
  for (const std::string& m : b.marks()) b.add_commit_marks(v1::ParseBisectMark(m));
  b.clear_state();
  b.clear_phase();
  b.clear_confirmation();
  b.clear_revert();
  for (std::string& m : *b.mutable_marks()) m.clear();
  for (v1::BisectStep& s : *b.mutable_steps()) {
    s.set_step_role(v1::ParseBisectRole(s.role()));
    s.set_step_outcome(v1::ParseBisectMark(s.outcome()));
    s.clear_role();
    s.clear_outcome();
  }
  return b;
}

// Whichever controller sent it, words or types, a reader is shown the same text.
TEST(BisectRender, TypesAndTheWordsOfAnOlderControllerReadTheSame) {
  for (const char* state : {"done", "running", "failed", "cancelled"}) {
    v1::Bisection words = Finished();
    words.set_state(state);
    if (std::string(state) == "running") words.set_phase("reverting");
    if (std::string(state) == "failed") words.set_phase("failed");
    if (std::string(state) == "failed") words.set_failure("no board of arch x86_64");
    const v1::Bisection typed = TypedOnly(words);
    ASSERT_EQ(typed.state(), "");
    ASSERT_EQ(typed.steps(0).outcome(), "");
    EXPECT_EQ(RenderBisection(typed, true), RenderBisection(words, true)) << state;
    EXPECT_EQ(FormatBisectProgress(typed), FormatBisectProgress(words)) << state;
  }
  v1::Bisection unconfirmed = Finished();  // the confirmation's other words
  for (const char* c : {"untested", "unknown", "broken"}) {
    unconfirmed.set_confirmation(c);
    EXPECT_EQ(RenderBisection(TypedOnly(unconfirmed), false), RenderBisection(unconfirmed, false))
        << c;
  }
  v1::Bisection candidates = Finished();  // no culprit: the candidates with their marks
  candidates.set_culprit(-1);
  candidates.add_candidates(2);
  candidates.add_candidates(3);
  const std::string text = RenderBisection(TypedOnly(candidates), false);
  EXPECT_THAT(text, HasSubstr("[broken]"));
  EXPECT_EQ(text, RenderBisection(candidates, false));
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
}  // namespace faultline::report
