// The frames that changed (frames.h) in every report format, and the page's differential
// flame graphs (html_frames.h), on the saved report of a real A/B study with profile
// counters and stacks added as a profiled job's report holds them.
#include "report/frames.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>

#include "absl/strings/str_split.h"
#include "report/golden_files.h"
#include "report/html.h"
#include "report/mail.h"
#include "report/report.h"

namespace faultline::report {
namespace {

using golden::Fixture;

void AddFrame(v1::Comparison* c, const std::string& name, double a, double b, bool significant,
              bool difference) {
  v1::CounterComparison* k = c->add_counters();
  k->set_name(name);
  k->set_unit("round");
  k->set_baseline_median(a);
  k->set_candidate_median(b);
  k->set_ratio(difference ? std::nan("") : b / a);
  k->set_ci_low(difference ? std::nan("") : b / a * 0.9);
  k->set_ci_high(difference ? std::nan("") : b / a * 1.1);
  k->set_difference(difference ? b - a : std::nan(""));
  k->set_difference_low(difference ? std::min(b - a, 0.0) * 1.2 + std::max(b - a, 0.0) * 0.8
                                   : std::nan(""));
  k->set_difference_high(difference ? std::min(b - a, 0.0) * 0.8 + std::max(b - a, 0.0) * 1.2
                                    : std::nan(""));
  k->set_q_value(significant ? 0.001 : 0.6);
  k->set_significant(significant);
}

// The hidden x86 patch's profile: no fault tries the per-VMA lock, every one takes mmap_lock.
v1::GetReportResponse Profiled() {
  v1::GetReportResponse report = Fixture("ab-report.json");
  v1::Comparison* c = report.mutable_comparisons(0);
  AddFrame(c, "profile.total.lock_vma_under_rcu", 0.41, 0, true, true);
  AddFrame(c, "profile.total.lock_mm_and_find_vma", 0, 0.93, true, true);
  AddFrame(c, "profile.self.clear_page_erms", 1.0, 1.3, true, false);
  AddFrame(c, "profile.total.handle_mm_fault", 5.0, 5.1, false, false);
  AddFrame(c, "profile.self.handle_mm_fault", 0.2, 0.21, false, false);
  return report;
}

TEST(ChangedFrames, TheSignificantFramesAndHowManyWereCompared) {
  const v1::GetReportResponse report = Profiled();
  int compared = 0;
  const auto frames = ChangedFrames(report.comparisons(0), &compared);
  EXPECT_EQ(compared, 4) << "a frame's total and self count once";
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].frame, "lock_vma_under_rcu");
  EXPECT_EQ(frames[0].stacks, "total");
  EXPECT_EQ(frames[2].frame, "clear_page_erms");
  EXPECT_EQ(frames[2].stacks, "self");
  EXPECT_TRUE(IsFrameCounter("profile.self.x"));
  EXPECT_FALSE(IsFrameCounter("profile.user"));
  EXPECT_FALSE(IsFrameCounter("profile.total."));
}

TEST(ChangedFrames, ATableOfTheirOwnInEveryFormat) {
  const v1::GetReportResponse report = Profiled();
  const std::string mail = RenderMail(report);
  for (const std::string& text :
       {RenderReport(report, ReportFormat::kTable), RenderReport(report, ReportFormat::kMarkdown),
        mail, RenderMmtests(report), RenderLkp(report), RenderHtml(report)}) {
    EXPECT_NE(text.find("Frames that changed"), std::string::npos) << text;
    for (const char* frame : {"lock_vma_under_rcu", "lock_mm_and_find_vma", "clear_page_erms"}) {
      EXPECT_NE(text.find(frame), std::string::npos) << frame << " missing in:\n" << text;
    }
    EXPECT_EQ(text.find("profile.total."), std::string::npos)
        << "frames are not listed again among the counters:\n"
        << text;
  }
  std::string unfolded = mail;  // the title folds at 80 columns
  for (size_t at; (at = unfolded.find("\n  among")) != std::string::npos;) {
    unfolded.replace(at, 3, " ");
  }
  EXPECT_NE(unfolded.find("3 changes among 4 frames"), std::string::npos) << mail;
  EXPECT_NE(mail.find("-0.41"), std::string::npos) << "a vanished frame as a difference\n" << mail;
  EXPECT_NE(mail.find("+30.0%"), std::string::npos) << mail;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(mail, '\n')) {
    EXPECT_LE(line.size(), 80u) << "line " << ++n << ": " << line;
  }
  // Every counter asked for: the frames are counters like any other there.
  ReportView all;
  all.all_counters = true;
  EXPECT_NE(RenderReport(report, ReportFormat::kTable, all).find("profile.total.lock_vma"),
            std::string::npos);
}

TEST(ChangedFrames, NoneChangedSaysAmongHowMany) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  v1::Comparison* c = report.mutable_comparisons(0);
  AddFrame(c, "profile.total.handle_mm_fault", 5.0, 5.1, false, false);
  AddFrame(c, "profile.total.do_user_addr_fault", 6.0, 6.1, false, false);
  const std::string text = RenderReport(report, ReportFormat::kTable);
  EXPECT_NE(text.find("no significant change among 2 frames"), std::string::npos) << text;
  EXPECT_EQ(RenderMail(Fixture("ab-report.json")).find("Frames"), std::string::npos)
      << "nothing profiled: no section";
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string RectOf(const std::string& svg, const std::string& frame) {
  const size_t at = svg.find("data-frame=\"" + frame + "\"");
  if (at == std::string::npos) return "";
  const size_t open = svg.rfind("<rect", at);
  return svg.substr(open, svg.find("</rect>", at) - open);
}

std::string Graph(const std::string& html, const std::string& id) {
  const size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const size_t open = html.rfind("<svg", at);
  return html.substr(open, html.find("</svg>", at) - open);
}

TEST(FlameGraphs, BsStacksAndAsColouredByTheChange) {
  v1::GetReportResponse report = Profiled();
  v1::Comparison* c = report.mutable_comparisons(0);
  auto add = [](auto* stacks, const std::string& stack, double per_round) {
    v1::FoldedStack* s = stacks->Add();
    s->set_stack(stack);
    s->set_per_round(per_round);
  };
  const std::string fault = "[user];asm_exc_page_fault;exc_page_fault;do_user_addr_fault";
  add(c->mutable_baseline_stacks(), fault + ";lock_vma_under_rcu", 0.4);
  add(c->mutable_baseline_stacks(), fault + ";handle_mm_fault", 5.0);
  add(c->mutable_baseline_stacks(), "[user]", 4.0);
  add(c->mutable_baseline_stacks(), "[user];tiny", 1e-6);  // under half a pixel
  add(c->mutable_candidate_stacks(), fault + ";lock_mm_and_find_vma", 0.9);
  add(c->mutable_candidate_stacks(), fault + ";handle_mm_fault", 5.0);
  add(c->mutable_candidate_stacks(), "[user]", 4.0);
  const std::string html = RenderHtml(report);
  EXPECT_EQ(Count(html, "data-plot=\"flame\""), 2) << html;
  const std::string b = Graph(html, "flame-b-0"), a = Graph(html, "flame-a-0");
  ASSERT_FALSE(b.empty());
  ASSERT_FALSE(a.empty());
  // Every frame drawn is a point the page's own check counts.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(b, m, std::regex("data-points=\"(\\d+)\"")));
  EXPECT_EQ(std::stoi(m[1]), Count(b, "<rect class=\"pt\""));
  EXPECT_EQ(std::stoi(m[1]), 6) << "[user] (its own samples in it), 3 fault frames, "
                                   "lock_mm_and_find_vma, handle_mm_fault: "
                                << b;
  const std::string taken = RectOf(b, "lock_mm_and_find_vma");
  EXPECT_NE(taken.find("style=\"fill:#ff"), std::string::npos) << "more on B: red\n" << taken;
  EXPECT_NE(taken.find("new on B"), std::string::npos) << taken;
  EXPECT_TRUE(RectOf(b, "lock_vma_under_rcu").empty()) << "none on B: not in B's graph";
  const std::string gone = RectOf(a, "lock_vma_under_rcu");
  EXPECT_NE(gone.find("ff\" data-frame"), std::string::npos) << "less on B: blue\n" << gone;
  EXPECT_NE(gone.find("-100%"), std::string::npos) << gone;
  EXPECT_NE(RectOf(a, "handle_mm_fault").find("#dddddd"), std::string::npos) << "unchanged: grey";
  EXPECT_TRUE(RectOf(a, "tiny").empty()) << "narrower than half a pixel";
  // Nothing profiled: no section, no graph.
  EXPECT_EQ(RenderHtml(Fixture("ab-report.json")).find("data-plot=\"flame\""), std::string::npos);
}

}  // namespace
}  // namespace faultline::report
