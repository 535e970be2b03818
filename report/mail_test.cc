// Reports for a mailing list (mail.h) and the spec written back (spec_yaml.h): golden files
// of a real A/B study's report (testdata/, rewritten with FAULTLINE_UPDATE_GOLDEN=1), every
// mail line within 80 columns and ASCII, and the spec reading back as the job's.
#include "report/mail.h"

#include "report/html.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_split.h"
#include "report/golden_files.h"
#include "report/table.h"
#include "spec/spec_file.h"
#include "spec/spec_yaml.h"

namespace faultline::report {
namespace {

using golden::ExpectGolden;
using golden::Fixture;

void ExpectMailable(const std::string& text, size_t width = 80) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++n;
    EXPECT_LE(line.size(), width) << "line " << n << ": " << line;
    for (char c : line) {
      ASSERT_TRUE(static_cast<unsigned char>(c) < 0x80 && (c >= ' ' || c == '\t'))
          << "line " << n << " is not printable ASCII: " << line;
    }
  }
}

TEST(MailReport, ARealStudyAsGoldenFiles) {
  const v1::GetReportResponse report = Fixture("ab-report.json");
  ASSERT_FALSE(report.comparisons().empty());
  ASSERT_FALSE(report.run_results().empty());
  const std::string mail = RenderMail(report);
  ExpectGolden("ab-report.mail", mail);
  ExpectGolden("ab-report.mmtests", RenderMmtests(report));
  ExpectGolden("ab-report.lkp", RenderLkp(report));
  ExpectMailable(mail);
  ExpectMailable(RenderLkp(report), 89);  // LKP's own rule is 89 wide
}

// A run that made no progress (0 rounds/s): the harmonic mean is 0, its limit, and the
// baseline's own column says 0.00% (the e2e study's Hmean row once read "nan").
TEST(MailReport, ARunWithoutProgressMakesTheHarmonicMeanZero) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  const std::string baseline = report.comparisons(0).baseline();
  for (auto& r : *report.mutable_run_results()) {
    if (r.kernel() == baseline) {
      r.set_throughput(0);
      break;
    }
  }
  const std::string text = RenderMmtests(report);
  EXPECT_TRUE(std::regex_search(text, std::regex("\nHmean +tput +0\\.00 \\( +0\\.00%\\)"))) << text;
}

// What stretches a mail: long labels, CPU models with (R), several matrix keys, long
// counter names, a long tree path, non-ASCII in facts and caveats.
TEST(MailReport, EveryLineFitsEightyColumnsWhateverTheReportHolds) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  report.add_matrix_keys("writers");
  report.add_matrix_keys("file_fill_mode_with_a_long_name");
  for (auto& c : *report.mutable_comparisons()) {
    (*c.mutable_cell())["writers"] = "16";
    (*c.mutable_cell())["file_fill_mode_with_a_long_name"] = "written-by-a-helper-thread";
    auto* k = c.add_counters();
    k->set_name("perf.mmap_lock:mmap_lock_start_locking_with_an_even_longer_name");
    k->set_unit("round");
    k->set_baseline_median(1.5e9);
    k->set_candidate_median(3.2e9);
    k->set_ratio(2.13);
    k->set_ci_low(2.01);
    k->set_ci_high(2.3);
    k->set_significant(true);
  }
  auto* b = report.add_boards();
  b->set_board("a-board-with-a-name-that-goes-on-and-on-and-on-for-a-long-while");
  (*b->mutable_facts())["cpu.model"] = "Intel® Xeon® Platinum 8488C CPU @ 2.40GHz — 48 cores";
  (*b->mutable_facts())["cpu.count"] = "96";
  report.add_caveats("µs waits are ±3% here; results ≤ 2 rounds are dropped → see the docs");
  auto* spec = report.mutable_job()->mutable_spec();
  spec->set_name("a study name that is long enough to need folding when it is in a title line");
  auto& source = (*spec->mutable_kernel_sources())[spec->kernels(0)];
  source.set_tree("/srv/kernels/trees/linux-with-a-very-long-path-name/that-keeps-going/linux.git");
  source.set_ref("v6.12.118");
  source.set_config_base("tinyconfig");
  ExpectMailable(RenderMail(report));
  MailOptions utf8;
  utf8.utf8 = true;
  EXPECT_NE(RenderMail(report, utf8).find("µs"), std::string::npos);
}

// The perf events the study asked for are in the mail whether or not they changed (with
// their q); a counter nobody asked for is there only when it changed.
TEST(MailReport, TheStudysEventsAreShownEvenWhenNotChanged) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  report.mutable_job()->mutable_spec()->clear_events();
  report.mutable_job()->mutable_spec()->add_events("calls:handle_mm_fault");
  for (auto& c : *report.mutable_comparisons()) {
    auto* k = c.add_counters();
    k->set_name("perf.calls:handle_mm_fault");
    k->set_unit("round");
    k->set_baseline_median(5021);
    k->set_candidate_median(5100);
    k->set_ratio(1.016);
    k->set_ci_low(0.97);
    k->set_ci_high(1.06);
    k->set_q_value(0.4321);
    k->set_significant(false);
  }
  const std::string mail = RenderMail(report);
  EXPECT_NE(mail.find("The study's events, not called changed, B vs A per round (q > 0.01):"),
            std::string::npos)
      << mail;
  EXPECT_NE(mail.find("perf.calls:handle_mm_fault"), std::string::npos);
  EXPECT_NE(mail.find("0.4321"), std::string::npos);
  EXPECT_EQ(mail.find("perf.sw:page-faults"), std::string::npos) << "not asked, not changed";
  EXPECT_NE(mail.find("Counters that changed"), std::string::npos);
  ExpectMailable(mail);
}

TEST(MailReport, AsciiAndFolding) {
  EXPECT_EQ(ToAscii("17303 ± 2% µs × 3 ≤ 4 — ok → é"), "17303 +- 2% us x 3 <= 4 - ok -> ?");
  EXPECT_EQ(FoldLines("short\n  a line that is too long for ten", 12),
            "short\n  a line\n    that is\n    too long\n    for ten");
  EXPECT_EQ(FoldLines("abcdefghijklmnop", 8), "abcdefgh\n  ijklmn\n  op");
}

// The spec in a mail reads back as the job's: labels without their hash, the commit that
// was built as the ref, files by name.
TEST(SpecYaml, ReadsBackAsTheJobsSpec) {
  const v1::GetReportResponse report = Fixture("ab-report.json");
  const v1::JobSpec& spec = report.job().spec();
  const std::string yaml = spec::SpecToYaml(spec);
  auto loaded = spec::LoadJobSpecFromString(yaml, "study.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status() << "\n" << yaml;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*loaded, spec))
      << yaml << "\nread back:\n"
      << loaded->DebugString();
}

TEST(SpecYaml, KernelsFromSourcesAndLongScalars) {
  char tmpl[] = "/tmp/faultline-spec-yaml-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/lab.config") << "CONFIG_ZRAM=y\n";
  std::ofstream(dir + "/v5.mbox") << "From x\nSubject: [PATCH] mm\n\n";
  v1::JobSpec spec;
  spec.set_name("nightly: \"quoted\" # not a comment");
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("5s");
  spec.set_repetitions(4);
  spec.add_kernels("vanilla@0123456789ab+20261203T0200");
  spec.add_kernels("patched@ba9876543210");
  spec.set_baseline("vanilla@0123456789ab+20261203T0200");
  auto& v = (*spec.mutable_kernel_sources())["vanilla@0123456789ab+20261203T0200"];
  v.set_tree("/srv/" + std::string(90, 'x') + "/linux.git");
  v.set_ref("main");
  v.set_config_base("tinyconfig");
  v.add_fragments()->set_name("lab.config");
  auto& p = (*spec.mutable_kernel_sources())["patched@ba9876543210"];
  p = v;
  p.add_series()->set_name("v5.mbox");
  p.add_include("arch/x86/*");
  (*spec.mutable_kernel_overrides())["patched@ba9876543210"].mutable_params()->insert(
      {"threads", "4"});
  spec.mutable_memcg()->set_memory_max("256M");
  (*spec.mutable_matrix())["threads"].add_values("2");
  (*spec.mutable_matrix())["threads"].add_values("8");
  spec.set_alpha(0.01);
  spec.set_shuffle_seed(4294967297);
  v1::Build built;
  built.set_label("vanilla@0123456789ab+20261203T0200");
  built.set_state("done");
  built.set_base_commit(std::string(40, 'c'));
  const std::string yaml = spec::SpecToYaml(spec, {built});
  for (absl::string_view line : absl::StrSplit(yaml, '\n')) EXPECT_LE(line.size(), 80u) << line;
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  auto loaded = spec::LoadJobSpecFromString(yaml, "study.yaml");
  std::filesystem::current_path(cwd);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status() << "\n" << yaml;
  EXPECT_EQ(loaded->name(), spec.name());
  EXPECT_EQ(std::vector<std::string>(loaded->kernels().begin(), loaded->kernels().end()),
            (std::vector<std::string>{"vanilla", "patched"}));
  EXPECT_EQ(loaded->baseline(), "vanilla");
  const auto& lv = loaded->kernel_sources().at("vanilla");
  EXPECT_EQ(lv.tree(), v.tree());
  EXPECT_EQ(lv.ref(), std::string(40, 'c'));  // the commit that was built
  EXPECT_EQ(lv.fragments(0).content(), "CONFIG_ZRAM=y\n");
  const auto& lp = loaded->kernel_sources().at("patched");
  EXPECT_EQ(lp.ref(), "main");  // no build known
  EXPECT_EQ(lp.series(0).name(), "v5.mbox");
  EXPECT_EQ(lp.include(0), "arch/x86/*");
  EXPECT_EQ(loaded->kernel_overrides().at("patched").params().at("threads"), "4");
  EXPECT_EQ(loaded->shuffle_seed(), spec.shuffle_seed());
  EXPECT_EQ(loaded->matrix().at("threads").values_size(), 2);
}

}  // namespace
}  // namespace faultline::report

namespace faultline::report {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The page stands alone (nothing fetched at view time) and each plot holds what it says.
TEST(HtmlReport, OneSelfContainedPageWithItsPlots) {
  const v1::GetReportResponse report = Fixture("ab-report.json");
  const std::string html = RenderHtml(report);
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_EQ(Count(html, " src="), 0u);
  EXPECT_EQ(Count(html, " href="), 0u);
  EXPECT_EQ(Count(html, "http://"), 0u);
  EXPECT_EQ(Count(html, "https://"), 0u);
  const size_t runs = static_cast<size_t>(report.run_results_size());
  EXPECT_NE(html.find("data-plot=\"runs\" data-points=\"" + std::to_string(runs) + "\""),
            std::string::npos);
  EXPECT_NE(html.find("data-plot=\"dist\" data-points=\"" + std::to_string(runs) + "\""),
            std::string::npos);
  size_t significant = 0;
  for (const auto& k : report.comparisons(0).counters()) {
    significant += k.significant() && k.only_on().empty();
  }
  EXPECT_NE(html.find("data-plot=\"forest\" data-points=\"" +
                      std::to_string(1 + std::min<size_t>(significant, 24)) + "\""),
            std::string::npos);
  // Points: a run plot's circles and a distribution's, the forest's rows.
  EXPECT_EQ(Count(html, "class=\"pt\""), 2 * runs + 1 + std::min<size_t>(significant, 24));
  EXPECT_NE(html.find("<pre>"), std::string::npos);  // the text report beneath
  // Labels are escaped.
  v1::GetReportResponse odd = report;
  odd.mutable_job()->mutable_spec()->set_name("<script>alert(1)</script>");
  EXPECT_EQ(RenderHtml(odd).find("<script>alert"), std::string::npos);
}

// With samples, the median run of each kernel second by second.
TEST(HtmlReport, TheMedianRunsSecondBySecond) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  EXPECT_EQ(RenderHtml(report).find("data-plot=\"samples\""), std::string::npos);
  for (auto& r : *report.mutable_run_results()) {
    for (int s = 0; s < 2 + static_cast<int>(r.repetition() % 3); ++s) r.add_samples(100 + s);
  }
  // The median run of each kernel: 16 runs each, the 8th slowest.
  size_t expected = 0;
  for (const std::string kernel : {"vanilla", "vanilla-churn"}) {
    std::vector<const v1::RunResult*> mine;
    for (const auto& r : report.run_results()) {
      if (r.kernel() == kernel) mine.push_back(&r);
    }
    std::sort(mine.begin(), mine.end(),
              [](auto* a, auto* b) { return a->throughput() < b->throughput(); });
    expected += static_cast<size_t>(mine[(mine.size() - 1) / 2]->samples_size());
  }
  EXPECT_NE(RenderHtml(report).find("data-plot=\"samples\" data-points=\"" +
                                    std::to_string(expected) + "\""),
            std::string::npos);
}

TEST(HtmlReport, ACompareOfTwoFiles) {
  v1::Comparison c;
  c.set_baseline("a.txt");
  c.set_candidate("b.txt");
  c.set_ratio(1.1);
  c.set_ci_low(1.05);
  c.set_ci_high(1.15);
  c.set_verdict("improvement");
  const std::string html = RenderComparisonHtml(c, {10, 11, 12}, {12, 13}, "text");
  EXPECT_NE(html.find("data-plot=\"runs\" data-points=\"5\""), std::string::npos);
  EXPECT_NE(html.find("data-plot=\"dist\" data-points=\"5\""), std::string::npos);
  EXPECT_NE(html.find("data-plot=\"forest\" data-points=\"1\""), std::string::npos);
}

// The seed's three lock tables, as the controller fills them for a job with
// mmap_lock_waits: true (large counts with CIs, the widest labels, a row without a ratio).
void AddLockTables(v1::Comparison* c) {
  auto row = [](v1::MedianTable* t, const std::string& label, double a, double b, bool sig) {
    v1::MedianTableRow* r = t->add_rows();
    r->set_label(label);
    for (auto [m, v] :
         {std::pair{r->mutable_baseline(), a}, std::pair{r->mutable_candidate(), b}}) {
      m->set_n(16);
      m->set_median(v);
      m->set_ci_low(v * 0.93);
      m->set_ci_high(v * 1.08);
    }
    r->set_ratio(a > 0 && b > 0 ? b / a : std::nan(""));
    r->set_ci_low(a > 0 && b > 0 ? b / a * 0.9 : std::nan(""));
    r->set_ci_high(a > 0 && b > 0 ? b / a * 1.1 : std::nan(""));
    r->set_per_unit(label.find("Avg") == std::string::npos);
    r->set_q_value(sig ? 0.001 : 0.6);
    r->set_significant(sig);
  };
  v1::MedianTable* waits = c->add_tables();
  waits->set_title("mmap_lock Acquisitions And Wait Time");
  waits->set_first_column("Metric");
  waits->set_unit("round");
  row(waits, "Read Lock Count", 20010.4, 5719.2, true);
  row(waits, "Read Total Wait (us)", 10695877, 408436, true);
  row(waits, "Read Avg Wait (us)", 534, 71, true);
  row(waits, "Write Lock Count", 838, 909, false);
  row(waits, "Write Total Wait (us)", 0, 0, false);
  row(waits, "Write Avg Wait (us)", 598, 107, true);
  for (const std::string side : {"Read", "Write"}) {
    v1::MedianTable* dist = c->add_tables();
    dist->set_title(side + " Lock Waiting Time Distribution of mmap_lock");
    dist->set_first_column("Range (us)");
    dist->set_unit("round");
    row(dist, "[0, 1)", 9927, 4286, true);
    row(dist, "[1000000, +)", 0, 0, false);
  }
  v1::MedianTable* contention = c->add_tables();
  contention->set_title("mmap_lock Contention (lock:contention_begin/end)");
  contention->set_first_column("Metric");
  contention->set_unit("round");
  row(contention, "Write Contended Wait (us)", 123456789, 98765432, false);
}

// A traced job's report carries the seed's lock tables in every format, and the mail keeps
// to 80 columns of ASCII with them (what goes to linux-mm).
TEST(MailReport, ATracedJobsLockTablesInEveryFormat) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  AddLockTables(report.mutable_comparisons(0));
  report.mutable_job()->mutable_spec()->set_kernels(1, "vanilla-churn-with-a-longer-label");
  const std::string mail = RenderMail(report);
  ExpectMailable(mail);
  for (const std::string& text :
       {mail, RenderMmtests(report), RenderLkp(report), RenderHtml(report)}) {
    for (const char* title : {"mmap_lock Acquisitions And Wait Time",
                              "Read Lock Waiting Time Distribution of mmap_lock",
                              "Write Lock Waiting Time Distribution of mmap_lock",
                              "mmap_lock Contention (lock:contention_begin/end)",
                              "* marks a change with q &lt;= 0.01", "Read Lock Count"}) {
      std::string want = title;
      if (text.find("<html") == std::string::npos) {
        if (const size_t lt = want.find("&lt;"); lt != std::string::npos) want.replace(lt, 4, "<");
      }
      EXPECT_NE(text.find(want), std::string::npos) << want << " missing in:\n" << text;
    }
  }
  EXPECT_NE(mail.find("-71.42%*"), std::string::npos) << mail;
  EXPECT_NE(mail.find("+8.47%\n"), std::string::npos) << "not significant: no star\n" << mail;
  EXPECT_NE(RenderHtml(report).find("<table class=\"lock\">"), std::string::npos);
}

// A counter most baseline runs never hit has no ratio: the mail shows its difference, not a
// clamp's ×1e9, and says what the number is.
TEST(MailReport, AZeroBaseCounterIsADifference) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  v1::Comparison* c = report.mutable_comparisons(0);
  v1::CounterComparison* k = c->mutable_counters()->Add();
  k->set_name("vmstat.pgmajfault");
  k->set_unit("round");
  k->set_baseline_median(0);
  k->set_candidate_median(7.6);
  k->set_ratio(std::nan(""));
  k->set_ci_low(std::nan(""));
  k->set_ci_high(std::nan(""));
  k->set_difference(7.6);
  k->set_difference_low(5.1);
  k->set_difference_high(9.3);
  k->set_q_value(0.0001);
  k->set_significant(true);
  c->mutable_counters()->SwapElements(0, c->counters_size() - 1);  // shown among the first
  const std::string mail = RenderMail(report);
  ExpectMailable(mail);
  const size_t line = mail.find("  vmstat.pgmajfault ");
  ASSERT_NE(line, std::string::npos) << mail;
  const std::string shown = mail.substr(line, mail.find('\n', line) - line);
  EXPECT_NE(shown.find(" +7.6 "), std::string::npos) << shown;
  EXPECT_NE(shown.find(" [+5.1, +9.3]"), std::string::npos) << shown;
  EXPECT_NE(mail.find("A change without %: the difference B - A"), std::string::npos) << mail;
  EXPECT_EQ(mail.find("e+0"), std::string::npos) << mail;
  EXPECT_NE(RenderLkp(report).find("+7.6"), std::string::npos);
}

// The page's forest plots share one x scale and print each estimate with its interval; the
// per-second plot labels its x axis.
TEST(HtmlReport, ForestPlotsShareAScaleAndPrintTheirNumbers) {
  v1::GetReportResponse report = Fixture("ab-report.json");
  v1::Comparison second = report.comparisons(0);
  second.set_ratio(1.9);
  second.set_ci_low(1.7);
  second.set_ci_high(2.1);
  second.set_board("other-board");
  *report.add_comparisons() = second;
  for (auto& r : *report.mutable_run_results()) {
    for (int s = 0; s < 12; ++s) r.add_samples(100 + s);
  }
  const std::string html = RenderHtml(report);
  std::vector<std::string> ranges;
  for (size_t at = html.find("data-plot=\"forest\""); at != std::string::npos;
       at = html.find("data-plot=\"forest\"", at + 1)) {
    const size_t lo = html.find("data-lo=\"", at), end = html.find("viewBox", at);
    ranges.push_back(html.substr(lo, end - lo));
  }
  ASSERT_EQ(ranges.size(), 2u) << html;
  EXPECT_EQ(ranges[0], ranges[1]);
  EXPECT_NE(html.find(Printf("%.3gx [", report.comparisons(0).ratio())), std::string::npos);
  EXPECT_NE(html.find("1.9x [1.7, 2.1]"), std::string::npos);
  const size_t samples = html.find("data-plot=\"samples\"");
  ASSERT_NE(samples, std::string::npos);
  const size_t samples_end = html.find("</svg>", samples);
  EXPECT_NE(html.substr(samples, samples_end - samples).find("class=\"tick xtick\""),
            std::string::npos)
      << "the per-second plot labels its seconds";
}

}  // namespace
}  // namespace faultline::report
