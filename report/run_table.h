#pragma once
// Per-run tables shaped like the seeds' (`faultline report JOB --columns ...`):
//   | Case | Total Rounds | Throughput | Miss/Drop(%) | RETRY_MMAP_DROP | RETRY_IO_MISS |
// one row per succeeded run ("Vanilla (Run 1)"), with counters the user names beside the
// throughput, and ratio columns of two counters.
#include <optional>
#include <string>
#include <vector>

#include "faultline/v1/job.pb.h"
#include "report/format.h"

namespace faultline::report {

// One column of a seed-shaped per-run table: LABEL=EXPR or EXPR, where EXPR
// is COUNTER, COUNTER/COUNTER, optionally followed by *NUMBER
// (e.g. "Miss/Drop(%)=vmstat.retry_io_miss/vmstat.retry_mmap_drop*100").
struct ColumnSpec {
  std::string label;
  std::string numerator;
  std::string denominator;  // "" for a plain counter
  double scale = 1;
};

// Comma-separated columns. nullopt with *error naming the column and what is wrong.
std::optional<std::vector<ColumnSpec>> ParseColumns(const std::string& text, std::string* error);

// The counter names the columns need, in first-use order, each once.
std::vector<std::string> CountersOf(const std::vector<ColumnSpec>& columns);

// Rows by matrix cell (first seen), kernel (the spec's order), board, repetition. Counters
// print with thousands separators; ratio and scaled columns with two decimals; a zero
// denominator prints "-". Matrix keys and the board come first when they vary.
Table RunTable(const v1::GetReportResponse& report, const std::vector<ColumnSpec>& columns);

// "22,711".
std::string Thousands(uint64_t value);

}  // namespace faultline::report
