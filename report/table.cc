#include "report/table.h"

#include <algorithm>

namespace faultline::report {
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

}  // namespace

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

namespace {
// The header and every row as whitespace-aligned lines (no trailing spaces), `gap` spaces
// between columns.
std::vector<std::string> AlignedLines(const Table& table, const std::string& gap) {
  const std::vector<size_t> widths = ColumnWidths(table);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < widths.size(); ++c) {
      if (c > 0) out += gap;
      out += Pad(Cell(cells, c), widths[c], RightAligned(table, c));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  };
  std::vector<std::string> lines{line(table.headers)};
  for (const auto& row : table.rows) lines.push_back(line(row));
  return lines;
}
}  // namespace

std::string RenderPlainTable(const Table& table) {
  std::string out;
  for (const std::string& l : AlignedLines(table, "   ")) out += l + "\n";
  return out;
}

std::string RenderRuledTable(const Table& table) {
  // Two spaces between columns (the seed's tables fit 80 columns), the rule under the header
  // as wide as the widest line.
  const std::vector<std::string> lines = AlignedLines(table, "  ");
  size_t widest = 0;
  for (const std::string& l : lines) widest = std::max(widest, DisplayWidth(l));
  std::string out = lines[0] + "\n" + std::string(widest, '-') + "\n";
  for (size_t i = 1; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

std::optional<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "table") return ReportFormat::kTable;
  if (name == "markdown" || name == "md") return ReportFormat::kMarkdown;
  if (name == "json") return ReportFormat::kJson;
  if (name == "csv") return ReportFormat::kCsv;
  if (name == "mail") return ReportFormat::kMail;
  if (name == "mmtests") return ReportFormat::kMmtests;
  if (name == "lkp") return ReportFormat::kLkp;
  if (name == "html") return ReportFormat::kHtml;
  return std::nullopt;
}

std::string RenderCsv(const Table& table) {
  auto field = [](const std::string& text) {
    if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) {
      if (c == '"') out += '"';
      out += c;
    }
    return out + "\"";
  };
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < table.headers.size(); ++i) {
      if (i > 0) out += ",";
      if (i < cells.size()) out += field(cells[i]);
    }
    return out + "\n";
  };
  std::string out = line(table.headers);
  for (const auto& row : table.rows) out += line(row);
  return out;
}

}  // namespace faultline::report
