#pragma once
// Pure formatting for the faultline CLI: tables, progress bars, report rendering.
// No I/O and no gRPC calls, so everything here is unit-testable without a server.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "faultline/v1/job.pb.h"

namespace faultline::cli {

// snprintf into a std::string, for the short numbers and cells the CLI prints.
std::string Printf(const char* format, auto... args) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

struct Table {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;  // each row has headers.size() cells
  std::vector<bool> right_align;               // per column; missing entries mean left
  // Box tables centre cells; an odd leftover space goes right, or left when this is set
  // (the seeds do both: seed 001's pressure table puts it left).
  bool odd_space_left = false;
};

// The seeds' ASCII box style: +----+ rules around and between every row, cells centred
// with at least one space of padding.
std::string RenderBoxTable(const Table& table);
// A GitHub-flavoured markdown table ('|' in cells escaped, right-aligned columns ---:).
std::string RenderMarkdownTable(const Table& table);
// Borderless, whitespace-aligned columns with an upper-case header (for listings).
std::string RenderPlainTable(const Table& table);

// "[#####-----] 3/6 runs (1 running, 0 failed)"; finished = succeeded+failed+cancelled,
// running counts assigned runs too; ", N cancelled" is added when N > 0.
std::string FormatProgressBar(const v1::RunCounts& runs, int width = 20);
uint32_t FinishedRuns(const v1::RunCounts& runs);

// "job 42 succeeded (6/6 runs)", "job 42 failed (2 of 6 runs failed)", ...
std::string FormatJobOutcome(int64_t job_id, v1::JobState state, const v1::RunCounts& runs);

bool IsFinalState(v1::JobState state);
std::string JobStateName(v1::JobState state);                  // "succeeded"; "unspecified" for 0
std::string ChangePointStateName(v1::ChangePointState state);  // "acknowledged"
std::string BoardStateName(v1::BoardState state);              // "online"; "-" for 0
std::string BoardHealthName(v1::BoardHealth health);           // "needs-check"; "-" for 0
// "acknowledged" -> CHANGE_POINT_STATE_ACKNOWLEDGED; nullopt for anything else.
std::optional<v1::ChangePointState> ParseChangePointState(const std::string& name);
std::string FormatThroughput(double rounds_per_second);  // "17303.09 /s"
// "2024-05-01 12:34:56Z" (UTC); "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& ts);
// "just now", "42s ago", "5m ago", "3h ago", "2d ago"; "-" when unset.
std::string FormatAge(const google::protobuf::Timestamp& ts,
                      std::chrono::system_clock::time_point now);

// Listings.
Table JobsTable(const v1::ListJobsResponse& response);
Table AgentsTable(const v1::ListAgentsResponse& response,
                  std::chrono::system_clock::time_point now);

// Reports: one row per (matrix cell, kernel); columns = matrix_keys, then kernel, board,
// n, median, min, max, failed.
enum class ReportFormat { kTable, kMarkdown, kJson, kCsv };
std::optional<ReportFormat> ParseReportFormat(std::string_view name);
Table ReportTable(const v1::GetReportResponse& report);
// "job 42: filemap-thrash "nightly" (succeeded, 6/6 runs)"
std::string ReportTitle(const v1::GetReportResponse& report);
// Whole output for `faultline report`, ending in a newline. JSON uses the proto field names.
// With comparisons, table and markdown add the A/B tables (comparison.h); CSV is
// ReportCsvTable().
// One column of a seed-shaped per-run table (run_table.h): LABEL=EXPR or EXPR, where EXPR
// is COUNTER, COUNTER/COUNTER, optionally followed by *NUMBER
// (e.g. "Miss/Drop(%)=vmstat.retry_io_miss/vmstat.retry_mmap_drop*100").
struct ColumnSpec {
  std::string label;
  std::string numerator;
  std::string denominator;  // "" for a plain counter
  double scale = 1;
};

struct ReportView {
  // Every compared counter under each comparison instead of the significant ones; with CSV,
  // the counters' table (CounterCsvTable) instead of the throughput one.
  bool all_counters = false;
  // Non-empty: the per-run table with these columns (RunTable) after the summary; with CSV,
  // that table instead of the throughput one. The report must hold run_results.
  std::vector<ColumnSpec> columns;
};
std::string RenderReport(const v1::GetReportResponse& report, ReportFormat format,
                         const ReportView& view = {});
// Indented JSON with proto field names and default values printed, ending in a newline.
std::string MessageToJson(const google::protobuf::Message& message);

}  // namespace faultline::cli
