// Seed-shaped per-run tables (`faultline report --columns`): a snapshot of [PATCH v2 0/5]'s
// main table rebuilt from its published numbers, and the column syntax.
#include "report/run_table.h"
#include "report/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace faultline::report {
namespace {

using ::testing::HasSubstr;

void AddRun(v1::GetReportResponse* report, const char* kernel, uint32_t repetition, uint64_t rounds,
            double throughput, double drop, double miss) {
  v1::RunResult* r = report->add_run_results();
  r->set_kernel(kernel);
  r->set_board("b1");
  r->set_repetition(repetition);
  r->set_rounds(rounds);
  r->set_throughput(throughput);
  (*r->mutable_counters())["vmstat.retry_mmap_drop"] = drop;
  if (miss != 0) (*r->mutable_counters())["vmstat.retry_io_miss"] = miss;  // 0 is not stored
}

// The seed's table, verbatim except the run names: the seed calls the series' runs "Run A"
// and "Run B"; faultline numbers every kernel's runs by repetition.
constexpr const char* kSeedTable =
    "| Case                | Total Rounds | Throughput | Miss/Drop(%) | RETRY_MMAP_DROP | "
    "RETRY_IO_MISS |\n"
    "| ------------------- | ------------ | ---------- | ------------ | --------------- | "
    "------------- |\n"
    "| Baseline (Run 1)    | 22,711       | 37.85 /s   | 45.04        | 970,078         | 436,956  "
    "     |\n"
    "| Baseline (Run 2)    | 23,530       | 39.22 /s   | 44.96        | 972,043         | 437,077  "
    "     |\n"
    "| With Series (Run 1) | 54,428       | 90.71 /s   | 1.69         | 1,204,124       | 20,398   "
    "     |\n"
    "| With Series (Run 2) | 35,949       | 59.91 /s   | 0.03         | 327,023         | 99       "
    "     |\n";

TEST(RunTable, ReproducesTheSeedsTableFromItsNumbers) {
  v1::GetReportResponse report;
  report.mutable_job()->mutable_spec()->add_kernels("baseline");
  report.mutable_job()->mutable_spec()->add_kernels("with Series");
  // Out of order on purpose: rows follow the spec's kernels, then repetitions.
  AddRun(&report, "with Series", 2, 35'949, 59.91, 327'023, 99);
  AddRun(&report, "baseline", 1, 22'711, 37.85, 970'078, 436'956);
  AddRun(&report, "with Series", 1, 54'428, 90.71, 1'204'124, 20'398);
  AddRun(&report, "baseline", 2, 23'530, 39.22, 972'043, 437'077);
  std::string error;
  auto columns = ParseColumns(
      "Miss/Drop(%)=vmstat.retry_io_miss/vmstat.retry_mmap_drop*100, "
      "RETRY_MMAP_DROP=vmstat.retry_mmap_drop,RETRY_IO_MISS=vmstat.retry_io_miss",
      &error);
  ASSERT_TRUE(columns) << error;
  EXPECT_EQ(CountersOf(*columns),
            (std::vector<std::string>{"vmstat.retry_io_miss", "vmstat.retry_mmap_drop"}));
  EXPECT_EQ(RenderMarkdownTable(RunTable(report, *columns)), kSeedTable);

  // Inside the report (markdown), after the summary table.
  report.add_rows()->set_kernel("baseline");
  report.mutable_rows(0)->set_n(2);
  const std::string text =
      RenderReport(report, ReportFormat::kMarkdown, ReportView{.columns = *columns});
  EXPECT_THAT(text, HasSubstr(std::string("\nPer run:\n\n") + kSeedTable));
  // And as CSV.
  const std::string csv = RenderReport(report, ReportFormat::kCsv, ReportView{.columns = *columns});
  EXPECT_THAT(
      csv, HasSubstr("Case,Total Rounds,Throughput,Miss/Drop(%),RETRY_MMAP_DROP,RETRY_IO_MISS\n"));
  EXPECT_THAT(csv,
              HasSubstr("Baseline (Run 1),\"22,711\",37.85 /s,45.04,\"970,078\",\"436,956\"\n"));
}

TEST(RunTable, CellsAndBoardsAppearWhenTheyVaryAndAZeroDenominatorIsADash) {
  v1::GetReportResponse report;
  report.add_matrix_keys("threads");
  for (const char* threads : {"8", "4"}) {
    for (const char* board : {"x1", "a1"}) {
      v1::RunResult* r = report.add_run_results();
      (*r->mutable_cell())["threads"] = threads;
      r->set_kernel("vanilla");
      r->set_board(board);
      r->set_repetition(1);
      r->set_rounds(1500);
      r->set_throughput(150);
      (*r->mutable_counters())["vmstat.pgmajfault"] = 3000;
      (*r->mutable_counters())["vmstat.pswpin"] = 0;
    }
  }
  std::string error;
  auto columns =
      ParseColumns("faults/round=vmstat.pgmajfault/vmstat.pswpin,vmstat.pgmajfault", &error);
  ASSERT_TRUE(columns);
  const Table t = RunTable(report, *columns);
  EXPECT_EQ(t.headers,
            (std::vector<std::string>{"threads", "Board", "Case", "Total Rounds", "Throughput",
                                      "faults/round", "vmstat.pgmajfault"}));
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"8", "a1", "Vanilla (Run 1)", "1,500", "150.00 /s",
                                                 "-", "3,000"}));
  EXPECT_EQ(t.rows[2][0], "4");
}

TEST(RunTable, RoundsIsTheDenominatorOfPerRoundColumns) {
  v1::GetReportResponse report;
  v1::RunResult* r = report.add_run_results();
  r->set_kernel("patched");
  r->set_repetition(2);
  r->set_rounds(400);
  r->set_throughput(40);
  (*r->mutable_counters())["perf.mmap_lock:mmap_lock_start_locking"] = 1000;
  std::string error;
  auto columns = ParseColumns("Locks/Round=perf.mmap_lock:mmap_lock_start_locking/rounds", &error);
  ASSERT_TRUE(columns) << error;
  const Table t = RunTable(report, *columns);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].back(), "2.50");
}

TEST(ParseColumns, ErrorsNameTheColumnAndTheProblem) {
  std::string error;
  EXPECT_FALSE(ParseColumns("a=vmstat.x,,b=vmstat.y", &error));
  EXPECT_THAT(error, HasSubstr("--columns: an empty column"));
  EXPECT_FALSE(ParseColumns("=vmstat.x", &error));
  EXPECT_EQ(error, "--columns: '=vmstat.x': the label before '=' is empty");
  EXPECT_FALSE(ParseColumns("r=vmstat.x/vmstat y", &error));
  EXPECT_EQ(error,
            "--columns: 'r=vmstat.x/vmstat y': 'vmstat y' is not a counter name (letters, digits, "
            "_ . : -)");
  EXPECT_FALSE(ParseColumns("p=vmstat.x/vmstat.y*", &error));
  EXPECT_EQ(error, "--columns: 'p=vmstat.x/vmstat.y*': '*' must be followed by a non-zero number");
  auto ok = ParseColumns("perf.mmap_lock:mmap_lock_start_locking", &error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ((*ok)[0].label, "perf.mmap_lock:mmap_lock_start_locking");
}

}  // namespace
}  // namespace faultline::report
