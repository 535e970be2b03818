#include "services/cli/format.h"

#include "services/cli/run_table.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include <google/protobuf/util/json_util.h>

#include "services/cli/comparison.h"
#include "services/common/units.h"

namespace faultline::cli {
namespace {

// Display width of UTF-8 text: code points (continuation bytes do not count).
size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::string Spaces(size_t n) {
  return std::string(n, ' ');
}

const std::string& Cell(const std::vector<std::string>& row, size_t column) {
  static const std::string kEmpty;
  return column < row.size() ? row[column] : kEmpty;
}

bool RightAligned(const Table& table, size_t column) {
  return column < table.right_align.size() && table.right_align[column];
}

// Widest cell per column (headers included).
std::vector<size_t> ColumnWidths(const Table& table) {
  std::vector<size_t> widths(table.headers.size(), 0);
  for (size_t c = 0; c < table.headers.size(); ++c) widths[c] = DisplayWidth(table.headers[c]);
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < widths.size(); ++c)
      widths[c] = std::max(widths[c], DisplayWidth(Cell(row, c)));
  }
  return widths;
}

std::string Pad(std::string_view text, size_t width, bool right) {
  const size_t w = DisplayWidth(text);
  const size_t fill = width > w ? width - w : 0;
  return right ? Spaces(fill) + std::string(text) : std::string(text) + Spaces(fill);
}

std::string Center(std::string_view text, size_t width, bool odd_space_left) {
  const size_t w = DisplayWidth(text);
  const size_t fill = width > w ? width - w : 0;
  const size_t left = odd_space_left ? fill - fill / 2 : fill / 2;
  return Spaces(left) + std::string(text) + Spaces(fill - left);
}

std::string EscapeMarkdown(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

bool IsUnset(const google::protobuf::Timestamp& ts) {
  return ts.seconds() == 0 && ts.nanos() == 0;
}

std::string ReportNumber(const v1::ReportRow& row, double value) {
  return row.n() == 0 ? "-" : FormatThroughput(value);
}

}  // namespace

std::string RenderBoxTable(const Table& table) {
  std::vector<size_t> widths = ColumnWidths(table);
  for (size_t& w : widths) w += 2;  // one space of padding each side
  std::string rule = "+";
  for (size_t w : widths) rule += std::string(w, '-') + "+";
  rule += "\n";
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t c = 0; c < widths.size(); ++c)
      out += Center(Cell(cells, c), widths[c], table.odd_space_left) + "|";
    return out + "\n";
  };
  std::string out = rule + line(table.headers) + rule;
  for (const auto& row : table.rows) out += line(row) + rule;
  return out;
}

std::string RenderMarkdownTable(const Table& table) {
  Table escaped = table;
  for (auto& h : escaped.headers) h = EscapeMarkdown(h);
  for (auto& row : escaped.rows) {
    for (auto& cell : row) cell = EscapeMarkdown(cell);
  }
  std::vector<size_t> widths = ColumnWidths(escaped);
  for (size_t& w : widths) w = std::max<size_t>(w, 3);  // room for "---" / "--:"
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t c = 0; c < widths.size(); ++c) {
      out += " " + Pad(Cell(cells, c), widths[c], RightAligned(escaped, c)) + " |";
    }
    return out + "\n";
  };
  std::string out = line(escaped.headers) + "|";
  for (size_t c = 0; c < widths.size(); ++c) {
    out += RightAligned(escaped, c) ? " " + std::string(widths[c] - 1, '-') + ": |"
                                    : " " + std::string(widths[c], '-') + " |";
  }
  out += "\n";
  for (const auto& row : escaped.rows) out += line(row);
  return out;
}

std::string RenderPlainTable(const Table& table) {
  const std::vector<size_t> widths = ColumnWidths(table);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < widths.size(); ++c) {
      if (c > 0) out += "   ";
      out += Pad(Cell(cells, c), widths[c], RightAligned(table, c));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(table.headers);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

uint32_t FinishedRuns(const v1::RunCounts& runs) {
  return runs.succeeded() + runs.failed() + runs.cancelled();
}

std::string FormatProgressBar(const v1::RunCounts& runs, int width) {
  width = std::max(width, 1);
  const uint64_t finished = FinishedRuns(runs);
  const uint64_t total = runs.total();
  uint64_t filled =
      total == 0 ? 0 : std::min<uint64_t>(width, finished * static_cast<uint64_t>(width) / total);
  std::string out =
      "[" + std::string(filled, '#') + std::string(static_cast<size_t>(width) - filled, '-') + "] ";
  out += std::to_string(finished) + "/" + std::to_string(total) + " runs (" +
         std::to_string(runs.running() + runs.assigned()) + " running, " +
         std::to_string(runs.failed()) + " failed";
  if (runs.cancelled() > 0) out += ", " + std::to_string(runs.cancelled()) + " cancelled";
  return out + ")";
}

std::string FormatJobOutcome(int64_t job_id, v1::JobState state, const v1::RunCounts& runs) {
  std::string out = "job " + std::to_string(job_id) + " " + JobStateName(state);
  if (runs.failed() > 0) {
    out += " (" + std::to_string(runs.failed()) + " of " + std::to_string(runs.total()) +
           " runs failed)";
  } else {
    out += " (" + std::to_string(runs.succeeded()) + "/" + std::to_string(runs.total()) +
           " runs succeeded)";
  }
  return out;
}

bool IsFinalState(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

namespace {

// "JOB_STATE_SUCCEEDED" -> "succeeded"; "state N" for values this CLI does not know.
std::string EnumName(std::string name, std::string_view prefix, int value) {
  if (name.empty()) return "state " + std::to_string(value);
  if (name.starts_with(prefix)) name.erase(0, prefix.size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  return EnumName(v1::JobState_Name(state), "JOB_STATE_", static_cast<int>(state));
}

std::string ChangePointStateName(v1::ChangePointState state) {
  return EnumName(v1::ChangePointState_Name(state), "CHANGE_POINT_STATE_", static_cast<int>(state));
}

std::string BoardStateName(v1::BoardState state) {
  if (state == v1::BOARD_STATE_UNSPECIFIED) return "-";
  return EnumName(v1::BoardState_Name(state), "BOARD_STATE_", static_cast<int>(state));
}

std::string BoardHealthName(v1::BoardHealth health) {
  if (health == v1::BOARD_HEALTH_UNSPECIFIED) return "-";
  std::string name =
      EnumName(v1::BoardHealth_Name(health), "BOARD_HEALTH_", static_cast<int>(health));
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::optional<v1::ChangePointState> ParseChangePointState(const std::string& name) {
  std::string upper = "CHANGE_POINT_STATE_" + name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  v1::ChangePointState state;
  if (name.empty() || !v1::ChangePointState_Parse(upper, &state) ||
      state == v1::CHANGE_POINT_STATE_UNSPECIFIED) {
    return std::nullopt;
  }
  return state;
}

std::string FormatThroughput(double rounds_per_second) {
  return Printf("%.2f /s", rounds_per_second);
}

std::string FormatTimestamp(const google::protobuf::Timestamp& ts) {
  if (IsUnset(ts)) return "-";
  const std::time_t seconds = static_cast<std::time_t>(ts.seconds());
  std::tm tm{};
  if (gmtime_r(&seconds, &tm) == nullptr) return "-";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string FormatAge(const google::protobuf::Timestamp& ts,
                      std::chrono::system_clock::time_point now) {
  if (IsUnset(ts)) return "-";
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const int64_t age = now_s - ts.seconds();
  if (age < 1) return "just now";
  if (age < 60) return std::to_string(age) + "s ago";
  if (age < 3600) return std::to_string(age / 60) + "m ago";
  if (age < 86400) return std::to_string(age / 3600) + "h ago";
  return std::to_string(age / 86400) + "d ago";
}

Table JobsTable(const v1::ListJobsResponse& response) {
  Table table;
  table.headers = {"ID", "STATE", "BENCHMARK", "NAME", "RUNS", "CREATED"};
  table.right_align = {true, false, false, false, true, false};
  for (const v1::Job& job : response.jobs()) {
    table.rows.push_back(
        {std::to_string(job.id()), JobStateName(job.state()), job.spec().benchmark(),
         job.spec().name().empty() ? "-" : job.spec().name(),
         std::to_string(FinishedRuns(job.runs())) + "/" + std::to_string(job.runs().total()),
         FormatTimestamp(job.created_at())});
  }
  return table;
}

Table AgentsTable(const v1::ListAgentsResponse& response,
                  std::chrono::system_clock::time_point now) {
  Table table;
  table.headers = {"NAME",   "ARCH",  "CPUS",      "MEMORY",   "PAGE",  "CGROUP",
                   "KERNEL", "STATE", "LAST SEEN", "SWITCHES", "HEALTH"};
  table.right_align = {false, false, true, true, true, false, false, false, false, true, false};
  for (const v1::Board& board : response.boards()) {
    std::string kernel =
        board.running_kernel_release().empty() ? "-" : board.running_kernel_release();
    if (!board.running_kernel_label().empty())
      kernel = board.running_kernel_label() + " (" + kernel + ")";
    std::string health = BoardHealthName(board.health());
    if (board.health() != v1::BOARD_HEALTH_OK && !board.health_reason().empty()) {
      health += ": " + board.health_reason();
    }
    std::string arch = board.arch().empty() ? "-" : board.arch();
    if (!board.virt_accel().empty() && board.virt_accel() != "none")
      arch += " (" + board.virt_accel() + ")";
    table.rows.push_back(
        {board.name(), arch, std::to_string(board.cpu_count()),
         board.memory_bytes() == 0 ? "-" : FormatSize(board.memory_bytes()),
         board.page_size() == 0 ? "-" : FormatSize(board.page_size()),
         board.cgroup_version() == 0 ? "-" : "v" + std::to_string(board.cgroup_version()), kernel,
         BoardStateName(board.state()), FormatAge(board.last_seen(), now),
         std::to_string(board.kernel_switches()), health});
  }
  return table;
}

std::optional<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "markdown" || name == "md") return ReportFormat::kMarkdown;
  if (name == "json") return ReportFormat::kJson;
  if (name == "csv") return ReportFormat::kCsv;
  return std::nullopt;
}

Table ReportTable(const v1::GetReportResponse& report) {
  Table table;
  for (const std::string& key : report.matrix_keys()) {
    table.headers.push_back(key);
    table.right_align.push_back(true);
  }
  for (const char* h : {"kernel", "board"}) {
    table.headers.push_back(h);
    table.right_align.push_back(false);
  }
  for (const char* h : {"n", "median", "min", "max", "failed"}) {
    table.headers.push_back(h);
    table.right_align.push_back(true);
  }
  // Shown only when a run completed too few rounds for rounds/s to be compared.
  const bool any_coarse = std::any_of(report.rows().begin(), report.rows().end(),
                                      [](const v1::ReportRow& r) { return r.too_coarse() > 0; });
  if (any_coarse) {
    for (const char* h : {"too coarse", "median pages/s"}) {
      table.headers.push_back(h);
      table.right_align.push_back(true);
    }
  }
  for (const v1::ReportRow& row : report.rows()) {
    std::vector<std::string> cells;
    for (const std::string& key : report.matrix_keys()) {
      auto it = row.cell().find(key);
      cells.push_back(it == row.cell().end() ? "-" : it->second);
    }
    cells.push_back(row.kernel());
    cells.push_back(row.board().empty() ? "-" : row.board());
    cells.push_back(std::to_string(row.n()));
    cells.push_back(ReportNumber(row, row.median()));
    cells.push_back(ReportNumber(row, row.min()));
    cells.push_back(ReportNumber(row, row.max()));
    cells.push_back(std::to_string(row.failed()));
    if (any_coarse) {
      cells.push_back(std::to_string(row.too_coarse()));
      cells.push_back(row.n() == 0 ? "-" : FormatThroughput(row.median_pages_per_second()));
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

std::string ReportTitle(const v1::GetReportResponse& report) {
  const v1::Job& job = report.job();
  std::string out = "job " + std::to_string(job.id()) + ": " + job.spec().benchmark();
  if (!job.spec().name().empty()) out += " \"" + job.spec().name() + "\"";
  out += " (" + JobStateName(job.state()) + ", " + std::to_string(FinishedRuns(job.runs())) + "/" +
         std::to_string(job.runs().total()) + " runs)";
  return out;
}

std::string MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
#if GOOGLE_PROTOBUF_VERSION >= 5026000
  options.always_print_fields_with_no_presence = true;
#else
  options.always_print_primitive_fields = true;
#endif
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}\n";
  if (json.empty() || json.back() != '\n') json += "\n";
  return json;
}

namespace {
std::string Caveats(const v1::GetReportResponse& report) {
  std::string out;
  for (const std::string& c : report.caveats()) out += "\nCaveat: " + c + "\n";
  return out;
}

std::string CoarseNote(const v1::GetReportResponse& report) {
  uint32_t coarse = 0;
  for (const v1::ReportRow& r : report.rows()) coarse += r.too_coarse();
  if (coarse == 0) return "";
  return std::to_string(coarse) +
         " run(s) completed fewer than 5 rounds: their rounds/s is too coarse to compare, so "
         "their cells are compared in pages touched per second.\n";
}
}  // namespace

std::string RenderReport(const v1::GetReportResponse& report, ReportFormat format,
                         const ReportView& view) {
  const bool all_counters = view.all_counters;
  if (format == ReportFormat::kJson) return MessageToJson(report);
  if (format == ReportFormat::kCsv) {
    if (!view.columns.empty()) return RenderCsv(RunTable(report, view.columns));
    return RenderCsv(all_counters ? CounterCsvTable(report) : ReportCsvTable(report));
  }
  std::string runs;
  if (!view.columns.empty()) {
    const Table run_table = RunTable(report, view.columns);
    runs = format == ReportFormat::kMarkdown ? "\nPer run:\n\n" + RenderMarkdownTable(run_table)
                                             : "\nper run:\n" + RenderBoxTable(run_table);
  }
  const std::string title = ReportTitle(report);
  const Table table = ReportTable(report);
  if (format == ReportFormat::kMarkdown) {
    std::string out = "**" + EscapeMarkdown(title) + "**\n\n";
    if (table.rows.empty()) return out + "No results yet.\n";
    return out + "Throughput in rounds per second (higher is better).\n\n" +
           RenderMarkdownTable(table) + CoarseNote(report) + runs +
           RenderComparisons(report, format, all_counters) + Caveats(report);
  }
  std::string out = title + "\n";
  if (table.rows.empty()) return out + "no results yet\n";
  return out + "throughput in rounds per second (higher is better):\n" + RenderBoxTable(table) +
         CoarseNote(report) + runs + RenderComparisons(report, format, all_counters) +
         Caveats(report);
}

}  // namespace faultline::cli
