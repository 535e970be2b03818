#include "report/format.h"
#include "report/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>

namespace faultline::report {
namespace {

using ::testing::HasSubstr;

v1::RunCounts Counts(uint32_t total, uint32_t succeeded, uint32_t failed, uint32_t running,
                     uint32_t cancelled = 0) {
  v1::RunCounts runs;
  runs.set_total(total);
  runs.set_succeeded(succeeded);
  runs.set_failed(failed);
  runs.set_running(running);
  runs.set_cancelled(cancelled);
  runs.set_queued(total - succeeded - failed - running - cancelled);
  return runs;
}

TEST(ProgressBarTest, Text) {
  EXPECT_EQ(FormatProgressBar(Counts(6, 3, 0, 1), 10),
            "[#####-----] 3/6 runs (1 running, 0 failed)");
  EXPECT_EQ(FormatProgressBar(Counts(6, 0, 0, 0), 10),
            "[----------] 0/6 runs (0 running, 0 failed)");
  EXPECT_EQ(FormatProgressBar(Counts(6, 4, 2, 0), 10),
            "[##########] 6/6 runs (0 running, 2 failed)");
  EXPECT_EQ(FormatProgressBar(Counts(3, 1, 0, 0, 2), 6),
            "[######] 3/3 runs (0 running, 0 failed, 2 cancelled)");
  EXPECT_EQ(FormatProgressBar(Counts(0, 0, 0, 0), 4), "[----] 0/0 runs (0 running, 0 failed)");
  v1::RunCounts assigned = Counts(3, 0, 0, 1);
  assigned.set_assigned(1);
  EXPECT_EQ(FormatProgressBar(assigned, 3), "[---] 0/3 runs (2 running, 0 failed)");
  EXPECT_EQ(FormatProgressBar(Counts(3, 1, 0, 0)),
            "[######--------------] 1/3 runs (0 running, 0 failed)");
}

TEST(JobStateTest, NamesAndOutcome) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_SUCCEEDED), "succeeded");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_UNSPECIFIED), "unspecified");
  EXPECT_EQ(JobStateName(static_cast<v1::JobState>(99)), "state 99");
  EXPECT_TRUE(v1::IsFinal(v1::JOB_STATE_CANCELLED));
  EXPECT_FALSE(v1::IsFinal(v1::JOB_STATE_RUNNING));
  EXPECT_EQ(FormatJobOutcome(42, v1::JOB_STATE_SUCCEEDED, Counts(6, 6, 0, 0)),
            "job 42 succeeded (6/6 runs succeeded)");
  EXPECT_EQ(FormatJobOutcome(42, v1::JOB_STATE_FAILED, Counts(6, 4, 2, 0)),
            "job 42 failed (2 of 6 runs failed)");
}

TEST(FormatTest, ScalarsAndTimes) {
  EXPECT_EQ(FormatThroughput(17303.0912), "17303.09 /s");
  EXPECT_EQ(FormatThroughput(0.005), "0.01 /s");
  google::protobuf::Timestamp ts;
  EXPECT_EQ(FormatTimestamp(ts), "-");
  ts.set_seconds(1714566896);  // 2024-05-01 12:34:56 UTC
  EXPECT_EQ(FormatTimestamp(ts), "2024-05-01 12:34:56Z");
  const auto at = [](int64_t s) {
    return std::chrono::system_clock::time_point(std::chrono::seconds(s));
  };
  EXPECT_EQ(FormatAge(ts, at(1714566896)), "just now");
  EXPECT_EQ(FormatAge(ts, at(1714566896 + 42)), "42s ago");
  EXPECT_EQ(FormatAge(ts, at(1714566896 + 300)), "5m ago");
  EXPECT_EQ(FormatAge(ts, at(1714566896 + 3 * 3600 + 5)), "3h ago");
  EXPECT_EQ(FormatAge(ts, at(1714566896 + 2 * 86400)), "2d ago");
  EXPECT_EQ(FormatAge(google::protobuf::Timestamp(), at(5)), "-");
}

TEST(TableTest, BoxStyleMatchesTheSeeds) {
  Table table;
  table.headers = {"mmap writers", "Vanilla", "Patched", "Improvement"};
  table.rows = {{"0", "17303.09 /s", "18394.51 /s", "+6.3%"},
                {"2", "16728.04 /s", "18591.68 /s", "+11.1%"}};
  EXPECT_EQ(RenderBoxTable(table),
            "+--------------+-------------+-------------+-------------+\n"
            "| mmap writers |   Vanilla   |   Patched   | Improvement |\n"
            "+--------------+-------------+-------------+-------------+\n"
            "|      0       | 17303.09 /s | 18394.51 /s |    +6.3%    |\n"
            "+--------------+-------------+-------------+-------------+\n"
            "|      2       | 16728.04 /s | 18591.68 /s |   +11.1%    |\n"
            "+--------------+-------------+-------------+-------------+\n");
}

TEST(TableTest, MarkdownEscapesAndAligns) {
  Table table;
  table.headers = {"name", "n"};
  table.right_align = {false, true};
  table.rows = {{"a|b", "10"}, {"long name", "7"}};
  EXPECT_EQ(RenderMarkdownTable(table),
            "| name      |   n |\n"
            "| --------- | --: |\n"
            "| a\\|b      |  10 |\n"
            "| long name |   7 |\n");
}

TEST(TableTest, PlainColumns) {
  Table table;
  table.headers = {"ID", "NAME", "RUNS"};
  table.right_align = {true, false, true};
  table.rows = {{"7", "nightly", "3/6"}, {"12", "x", "10/10"}};
  EXPECT_EQ(RenderPlainTable(table),
            "ID   NAME       RUNS\n"
            " 7   nightly     3/6\n"
            "12   x         10/10\n");
}

v1::GetReportResponse SmallReport() {
  v1::GetReportResponse report;
  v1::Job* job = report.mutable_job();
  job->set_id(42);
  job->set_state(v1::JOB_STATE_SUCCEEDED);
  job->mutable_spec()->set_benchmark("swap-in");
  job->mutable_spec()->set_name("vma retry");
  *job->mutable_runs() = Counts(3, 2, 1, 0);
  report.add_matrix_keys("writers");
  auto add = [&](const char* writers, const char* kernel, uint32_t n, double median, double min,
                 double max, uint32_t failed) {
    v1::ReportRow* row = report.add_rows();
    (*row->mutable_cell())["writers"] = writers;
    row->set_kernel(kernel);
    row->set_board("i7-12700");
    row->set_n(n);
    row->set_median(median);
    row->set_min(min);
    row->set_max(max);
    row->set_failed(failed);
  };
  add("0", "vanilla", 2, 17303.0912, 17000.5, 17500.25, 0);
  add("0", "patched", 0, 0, 0, 0, 1);
  return report;
}

TEST(ReportTest, Table) {
  EXPECT_EQ(
      RenderReport(SmallReport(), ReportFormat::kTable),
      "job 42: swap-in \"vma retry\" (succeeded, 3/3 runs)\n"
      "throughput in rounds per second (higher is better):\n"
      "+---------+---------+----------+---+-------------+-------------+-------------+--------+\n"
      "| writers | kernel  |  board   | n |   median    |     min     |     max     | failed |\n"
      "+---------+---------+----------+---+-------------+-------------+-------------+--------+\n"
      "|    0    | vanilla | i7-12700 | 2 | 17303.09 /s | 17000.50 /s | 17500.25 /s |   0    |\n"
      "+---------+---------+----------+---+-------------+-------------+-------------+--------+\n"
      "|    0    | patched | i7-12700 | 0 |      -      |      -      |      -      |   1    |\n"
      "+---------+---------+----------+---+-------------+-------------+-------------+--------+\n");
}

TEST(ReportTest, Markdown) {
  EXPECT_EQ(
      RenderReport(SmallReport(), ReportFormat::kMarkdown),
      "**job 42: swap-in \"vma retry\" (succeeded, 3/3 runs)**\n\n"
      "Throughput in rounds per second (higher is better).\n\n"
      "| writers | kernel  | board    |   n |      median |         min |         max | failed |\n"
      "| ------: | ------- | -------- | --: | ----------: | ----------: | ----------: | -----: |\n"
      "|       0 | vanilla | i7-12700 |   2 | 17303.09 /s | 17000.50 /s | 17500.25 /s |      0 |\n"
      "|       0 | patched | i7-12700 |   0 |           - |           - |           - |      1 "
      "|\n");
}

TEST(ReportTest, JsonRoundTripsWithProtoFieldNames) {
  const std::string json = RenderReport(SmallReport(), ReportFormat::kJson);
  EXPECT_THAT(json, HasSubstr("\"matrix_keys\""));
  EXPECT_THAT(json, HasSubstr("\"failed\": 0"));  // zero values are printed too
  v1::GetReportResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), SmallReport().SerializeAsString());
}

TEST(ReportTest, NoRowsYet) {
  v1::GetReportResponse report = SmallReport();
  report.clear_rows();
  EXPECT_EQ(RenderReport(report, ReportFormat::kTable),
            "job 42: swap-in \"vma retry\" (succeeded, 3/3 runs)\nno results yet\n");
}

TEST(ReportTest, ParseFormat) {
  EXPECT_EQ(ParseReportFormat("table"), ReportFormat::kTable);
  EXPECT_EQ(ParseReportFormat("markdown"), ReportFormat::kMarkdown);
  EXPECT_EQ(ParseReportFormat("json"), ReportFormat::kJson);
  EXPECT_EQ(ParseReportFormat("xml"), std::nullopt);
}

TEST(ListingTest, JobsAndAgents) {
  v1::ListJobsResponse jobs;
  v1::Job* job = jobs.add_jobs();
  job->set_id(7);
  job->set_state(v1::JOB_STATE_RUNNING);
  job->mutable_spec()->set_benchmark("filemap-thrash");
  *job->mutable_runs() = Counts(6, 3, 0, 1);
  job->mutable_created_at()->set_seconds(1714566896);
  EXPECT_EQ(RenderPlainTable(JobsTable(jobs)),
            "ID   STATE     BENCHMARK        NAME   RUNS   CREATED\n"
            " 7   running   filemap-thrash   -       3/6   2024-05-01 12:34:56Z\n");

  v1::ListAgentsResponse agents;
  v1::Board* board = agents.add_boards();
  board->set_name("rpi5");
  board->set_arch("aarch64");
  board->set_cpu_count(4);
  board->set_memory_bytes(8ull << 30);
  board->set_page_size(16384);
  board->set_cgroup_version(2);
  board->set_running_kernel_release("6.8.0-rc1");
  board->set_running_kernel_label("patched");
  board->set_state(v1::BOARD_STATE_ONLINE);
  board->mutable_last_seen()->set_seconds(1000);
  board->set_health(v1::BOARD_HEALTH_OK);
  board->set_kernel_switches(3);
  v1::Board* stuck = agents.add_boards();
  *stuck = *board;
  stuck->set_name("rpi5b");
  stuck->set_health(v1::BOARD_HEALTH_NEEDS_CHECK);
  stuck->set_health_reason("switch to 'patched' came back running 6.7.0, expected 6.8.0-rc1");
  const Table table =
      AgentsTable(agents, std::chrono::system_clock::time_point(std::chrono::seconds(1003)));
  ASSERT_EQ(table.rows.size(), 2u);
  EXPECT_THAT(table.rows[0],
              ::testing::ElementsAre("rpi5", "aarch64", "4", "8G", "16K", "v2",
                                     "patched (6.8.0-rc1)", "online", "3s ago", "3", "ok"));
  EXPECT_EQ(table.rows[1].back(),
            "needs-check: switch to 'patched' came back running 6.7.0, expected 6.8.0-rc1");
}

}  // namespace
}  // namespace faultline::report
