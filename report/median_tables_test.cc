// The seed's mmap_lock tables as `faultline report` prints them (median_tables.h).
#include "report/median_tables.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace faultline::report {
namespace {

void SetMedian(v1::MedianSummary* m, uint32_t n, double median, double low, double high) {
  m->set_n(n);
  m->set_median(median);
  m->set_ci_low(low);
  m->set_ci_high(high);
}

v1::MedianTableRow* AddRow(v1::MedianTable* t, const std::string& label, double a, double b,
                           double ratio, double low, double high) {
  v1::MedianTableRow* r = t->add_rows();
  r->set_label(label);
  SetMedian(r->mutable_baseline(), 10, a, a * 0.95, a * 1.05);
  SetMedian(r->mutable_candidate(), 10, b, b * 0.9, b * 1.1);
  r->set_ratio(ratio);
  r->set_ci_low(low);
  r->set_ci_high(high);
  r->set_per_unit(true);
  // As the controller marks them (lock_wait_tables.cc): here, a CI that excludes 1 and q
  // below α go together; StarsFollowQNotTheCi parts them.
  const bool clear = low > 1 || high < 1;
  r->set_p_value(std::isfinite(ratio) ? (clear ? 0.0001 : 0.5) : std::nan(""));
  r->set_q_value(std::isfinite(ratio) ? (clear ? 0.001 : 0.5) : std::nan(""));
  r->set_significant(std::isfinite(ratio) && clear);
  return r;
}

TEST(SeedNumber, ThreeFiguresAndGroupedThousands) {
  EXPECT_EQ(SeedNumber(20010), "20,010");
  EXPECT_EQ(SeedNumber(99'949), "99,949");
  EXPECT_EQ(SeedNumber(408436), "408k");
  EXPECT_EQ(SeedNumber(10695877.4), "10.7M");
  EXPECT_EQ(SeedNumber(2.5e9), "2.5G");
  EXPECT_EQ(SeedNumber(534), "534");
  EXPECT_EQ(SeedNumber(71.04), "71.0");
  EXPECT_EQ(SeedNumber(5.719), "5.72");
  EXPECT_EQ(SeedNumber(0.01234), "0.0123");
  EXPECT_EQ(SeedNumber(0), "0");
  EXPECT_EQ(SeedNumber(-1500), "-1,500");
  EXPECT_EQ(SeedNumber(std::nan("")), "-");
}

TEST(RenderMedianTables, SeedShapedWithinEightyColumns) {
  v1::Comparison c;
  c.set_baseline("vanilla");
  c.set_candidate("patched");
  v1::MedianTable* waits = c.add_tables();
  waits->set_title("mmap_lock Acquisitions And Wait Time");
  waits->set_first_column("Metric");
  waits->set_unit("round");
  AddRow(waits, "Read Lock Count", 20010, 5719, 0.2858, 0.27, 0.30);
  AddRow(waits, "Read Avg Wait (us)", 534, 71, 0.133, 0.12, 0.15)->set_per_unit(false);
  AddRow(waits, "Write Lock Count", 838, 909, 1.0847, 0.95, 1.2);
  v1::MedianTableRow* none =
      AddRow(waits, "Write Total Wait (us)", 0, 0, std::nan(""), std::nan(""), std::nan(""));
  none->mutable_baseline()->set_ci_low(std::nan(""));
  none->mutable_baseline()->set_ci_high(std::nan(""));
  v1::MedianTable* dist = c.add_tables();
  dist->set_title("Read Lock Waiting Time Distribution of mmap_lock");
  dist->set_first_column("Range (us)");
  dist->set_unit("round");
  AddRow(dist, "[0, 1)", 9927, 4286, 0.4318, 0.40, 0.46);

  const std::string text = RenderMedianTables(c, " at threads=8", ReportFormat::kTable, 0.01);
  EXPECT_EQ(text,
            "\nmmap_lock waits at threads=8: medians of 10 runs per kernel [95% CI];\n"
            "* marks a change with q <= 0.01 (Benjamini-Hochberg over its 4 rows).\n"
            "\n== mmap_lock Acquisitions And Wait Time ==\n"
            "(per round; averages and maxima per acquisition)\n\n"
            "Metric                 Vanilla (median)         Patched (median)        Change\n"
            "------------------------------------------------------------------------------\n"
            "Read Lock Count        20,010 [19,010, 21,011]  5,719 [5,147, 6,291]  -71.42%*\n"
            "Read Avg Wait (us)     534 [507, 561]           71.0 [63.9, 78.1]     -86.70%*\n"
            "Write Lock Count       838 [796, 880]           909 [818, 1,000]       +8.47%\n"
            "Write Total Wait (us)  0                        0 [0, 0]                  N/A\n"
            "\n== Read Lock Waiting Time Distribution of mmap_lock ==\n(per round)\n\n"
            "Range (us)  Vanilla (median)       Patched (median)        Change\n"
            "-----------------------------------------------------------------\n"
            "[0, 1)      9,927 [9,431, 10,423]  4,286 [3,857, 4,715]  -56.82%*\n")
      << text;
}

TEST(RenderMedianTables, SmallPerRoundCountsAreShownPerThousandRounds) {
  v1::MedianTable t;
  t.set_title("mmap_lock Acquisitions And Wait Time");
  t.set_first_column("Metric");
  t.set_unit("round");
  AddRow(&t, "Read Lock Count", 1, 1, 1, 0.99, 1.01);
  AddRow(&t, "Read Total Wait (us)", 0.000226, 0.000242, 1.1, 0.5, 2);
  AddRow(&t, "Read Avg Wait (us)", 0.000226, 0.000242, 1.1, 0.5, 2)->set_per_unit(false);
  AddRow(&t, "Write Total Wait (us)", 0, 0, std::nan(""), std::nan(""), std::nan(""));
  EXPECT_DOUBLE_EQ(TableScale(t), 1000);  // 0.000226 x 1000 >= 0.1
  const Table rows = MedianTableRows(t, "a", "b");
  EXPECT_EQ(rows.rows[0][1], "1,000 [950, 1,050]");
  EXPECT_EQ(rows.rows[1][1], "0.226 [0.215, 0.237]");
  EXPECT_EQ(rows.rows[2][1], "<0.001 [<0.001, <0.001]") << "per acquisition: not scaled";
  t.mutable_rows(1)->mutable_baseline()->set_median(2e-5);
  EXPECT_DOUBLE_EQ(TableScale(t), 1e6);
  t.mutable_rows()->DeleteSubrange(1, 2);
  EXPECT_DOUBLE_EQ(TableScale(t), 1) << "zeros do not count";
  const std::string text = RenderMedianTables(
      [&] {
        v1::Comparison c;
        *c.add_tables() = t;
        return c;
      }(),
      "", ReportFormat::kTable, 0.01);
  EXPECT_NE(text.find("(per round)"), std::string::npos) << text;
}

TEST(RenderMedianTables, MarkdownAndNothingWithoutTables) {
  v1::Comparison c;
  EXPECT_EQ(RenderMedianTables(c, "", ReportFormat::kTable, 0.01), "");
  c.set_baseline("a");
  c.set_candidate("b");
  v1::MedianTable* t = c.add_tables();
  t->set_title("mmap_lock Acquisitions And Wait Time");
  t->set_first_column("Metric");
  t->set_unit("second");
  AddRow(t, "Read Lock Count", 10, 5, 0.5, 0.4, 0.6);
  const std::string md = RenderMedianTables(c, "", ReportFormat::kMarkdown, 0.01);
  EXPECT_NE(md.find("per second"), std::string::npos) << md;
  EXPECT_NE(md.find("**mmap_lock Acquisitions And Wait Time**"), std::string::npos) << md;
  EXPECT_NE(md.find("| Read Lock Count |"), std::string::npos) << md;
}

// The A/A case: a row whose 95% CI happens to exclude 1 (one in twenty do by chance) is not
// starred unless its q, corrected over the comparison's rows, is at most alpha.
TEST(RenderMedianTables, StarsFollowQNotTheCi) {
  v1::MedianTable t;
  t.set_title("mmap_lock Acquisitions And Wait Time");
  t.set_first_column("Metric");
  t.set_unit("round");
  v1::MedianTableRow* chance = AddRow(&t, "Read Lock Count", 100, 104, 1.04, 1.01, 1.07);
  chance->set_q_value(0.4);
  chance->set_significant(false);
  AddRow(&t, "Write Lock Count", 100, 50, 0.5, 0.45, 0.55);
  const Table rows = MedianTableRows(t, "a", "b");
  EXPECT_EQ(rows.rows[0][3], "+4.00% ");
  EXPECT_EQ(rows.rows[1][3], "-50.00%*");
}

}  // namespace
}  // namespace faultline::report
