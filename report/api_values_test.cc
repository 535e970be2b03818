// The API's verdicts and build states as types (proto/faultline/v1/values.h), as report/
// reads them: the enum from a controller that sends it, the text from one before it, and
// the renderers showing the same words either way.
#include "faultline/v1/values.h"

#include <string>

#include "gtest/gtest.h"
#include "report/comparison.h"

namespace faultline {
namespace {

TEST(ApiValues, AVerdictIsReadFromTheEnumElseFromTheTextOfAnOlderController) {
  v1::Comparison typed;
  v1::SetVerdict(&typed, v1::VERDICT_COLLAPSE);
  EXPECT_EQ(typed.outcome(), v1::VERDICT_COLLAPSE);
  EXPECT_EQ(typed.verdict(), "collapse") << "the text written beside it for older clients";
  v1::Comparison older;
  older.set_verdict("regression");  // no outcome: sent by a controller before the enum
  EXPECT_EQ(v1::VerdictOf(older), v1::VERDICT_REGRESSION);
  EXPECT_TRUE(v1::SaysSlower(v1::VerdictOf(older)));
  EXPECT_TRUE(v1::SaysSlower(v1::VerdictOf(typed)));
  v1::Comparison unknown;
  unknown.set_verdict("much-worse");  // a word from a newer one: not guessed
  EXPECT_EQ(v1::VerdictOf(unknown), v1::VERDICT_UNSPECIFIED);
  EXPECT_FALSE(v1::SaysDifferent(v1::VerdictOf(unknown)));
  EXPECT_EQ(v1::VerdictText(unknown), "");
  for (v1::Verdict v : {v1::VERDICT_INCONCLUSIVE, v1::VERDICT_NO_CHANGE, v1::VERDICT_IMPROVEMENT,
                        v1::VERDICT_REGRESSION, v1::VERDICT_COLLAPSE}) {
    EXPECT_EQ(v1::ParseVerdict(v1::VerdictName(v)), v) << v1::VerdictName(v);
  }
  EXPECT_FALSE(v1::SaysDifferent(v1::VERDICT_NO_CHANGE));
  EXPECT_TRUE(v1::SaysDifferent(v1::VERDICT_IMPROVEMENT));
  EXPECT_FALSE(v1::SaysSlower(v1::VERDICT_IMPROVEMENT));
}

TEST(ApiValues, ABuildStateIsReadFromTheEnumElseFromTheText) {
  v1::Build typed;
  v1::SetBuildState(&typed, v1::BUILD_STATE_FAILED);
  EXPECT_EQ(typed.state(), "failed");
  EXPECT_EQ(v1::BuildStateOf(typed), v1::BUILD_STATE_FAILED);
  v1::Build older;
  older.set_state("done");
  EXPECT_EQ(v1::BuildStateOf(older), v1::BUILD_STATE_DONE);
  EXPECT_EQ(v1::BuildStateText(older), "done");
  v1::Build both;  // the enum wins over a text that disagrees
  both.set_state("queued");
  both.set_build_state(v1::BUILD_STATE_BUILDING);
  EXPECT_EQ(v1::BuildStateOf(both), v1::BUILD_STATE_BUILDING);
  for (v1::BuildState s : {v1::BUILD_STATE_QUEUED, v1::BUILD_STATE_BUILDING, v1::BUILD_STATE_DONE,
                           v1::BUILD_STATE_FAILED}) {
    EXPECT_EQ(v1::ParseBuildState(v1::BuildStateName(s)), s);
  }
}

TEST(ApiValues, EveryBisectionWordParsesBackAndAnUnknownWordIsNotGuessed) {
  for (v1::BisectionState s : {v1::BISECTION_STATE_RUNNING, v1::BISECTION_STATE_DONE,
                               v1::BISECTION_STATE_FAILED, v1::BISECTION_STATE_CANCELLED}) {
    EXPECT_EQ(v1::ParseBisectionState(v1::BisectionStateName(s)), s);
  }
  for (int p = v1::BisectPhase_MIN + 1; p <= v1::BisectPhase_MAX; ++p) {
    const auto phase = static_cast<v1::BisectPhase>(p);
    EXPECT_NE(v1::BisectPhaseName(phase), "") << p;
    EXPECT_EQ(v1::ParseBisectPhase(v1::BisectPhaseName(phase)), phase);
  }
  for (int m = v1::BisectMark_MIN + 1; m <= v1::BisectMark_MAX; ++m) {
    const auto mark = static_cast<v1::BisectMark>(m);
    EXPECT_NE(v1::BisectMarkName(mark), "") << m;
    EXPECT_EQ(v1::ParseBisectMark(v1::BisectMarkName(mark)), mark);
  }
  for (int r = v1::BisectRole_MIN + 1; r <= v1::BisectRole_MAX; ++r) {
    const auto role = static_cast<v1::BisectRole>(r);
    EXPECT_NE(v1::BisectRoleName(role), "") << r;
    EXPECT_EQ(v1::ParseBisectRole(v1::BisectRoleName(role)), role);
  }
  EXPECT_EQ(v1::ParseBisectMark("maybe"), v1::BISECT_MARK_UNSPECIFIED);
  EXPECT_EQ(v1::BisectMarkName(v1::BISECT_MARK_UNSPECIFIED), "");
  v1::Bisection b;  // marks without commit_marks (an older writer), and a mismatched count
  b.add_marks("bad");
  EXPECT_EQ(v1::CommitMarkOf(b, 0), v1::BISECT_MARK_BAD);
  v1::AddCommitMark(&b, v1::BISECT_MARK_GOOD);
  EXPECT_EQ(v1::CommitMarkOf(b, 0), v1::BISECT_MARK_BAD) << "2 words, 1 type: the words";
  EXPECT_EQ(v1::CommitMarkOf(b, 1), v1::BISECT_MARK_GOOD);
}

// A report from a controller before the enum (text only) reads as one from a controller
// that sends both.
TEST(ApiValues, TheRenderersShowTheSameWordsFromEitherController) {
  auto report = [](bool typed) {
    v1::GetReportResponse r;
    r.set_alpha(0.01);
    v1::Comparison* c = r.add_comparisons();
    c->set_board("b1");
    c->set_baseline("vanilla");
    c->set_candidate("patched");
    c->set_n_baseline(5);
    c->set_n_candidate(5);
    c->set_baseline_median(100);
    c->set_candidate_median(80);
    c->set_ratio(0.8);
    c->set_ci_low(0.75);
    c->set_ci_high(0.85);
    if (typed) {
      v1::SetVerdict(c, v1::VERDICT_REGRESSION);
    } else {
      c->set_verdict("regression");
    }
    return r;
  };
  const std::string text = report::RenderComparisons(report(true), report::ReportFormat::kTable);
  EXPECT_NE(text.find("regression"), std::string::npos) << text;
  EXPECT_EQ(report::RenderComparisons(report(false), report::ReportFormat::kTable), text);
}

}  // namespace
}  // namespace faultline
