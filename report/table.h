#pragma once
// The CLI's floor: tables and the formats they are rendered in. Nothing here knows the API.
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::report {

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

// The seed series' own tables: a header line, a rule of dashes, whitespace-aligned rows.
std::string RenderRuledTable(const Table& table);

// RFC 4180 CSV: a header line, then one line per row; fields with , " or newlines quoted.
std::string RenderCsv(const Table& table);
// '|' escaped and newlines folded, for text inside a markdown table or title.
std::string EscapeMarkdown(std::string_view text);

// How `faultline report` (and the offline comparison) render their tables.
// mail, mmtests and lkp: text for a mailing list (mail.h), `faultline report` only; html:
// one page with plots (html.h).
enum class ReportFormat { kTable, kMarkdown, kJson, kCsv, kMail, kMmtests, kLkp, kHtml };
std::optional<ReportFormat> ParseReportFormat(std::string_view name);  // "table", "md", ...

}  // namespace faultline::report
