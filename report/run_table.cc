#include "report/run_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "common/strings.h"
#include "report/comparison.h"

namespace faultline::report {
namespace {

bool ValidCounterName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.' || c == ':' || c == '-';
  });
}

std::string Fixed2(double v) {
  return Printf("%.2f", v);
}

std::string CounterText(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return v < 0 ? "-" + Thousands(static_cast<uint64_t>(-v)) : Thousands(static_cast<uint64_t>(v));
  }
  return Fixed2(v);
}

// `rounds` is the run's completed rounds, for per-round columns (perf.sw:page-faults/rounds);
// counters' names all have a source prefix (vmstat., perf., ...), so it names no counter
// (asking the controller for it costs nothing and still brings the run rows).
constexpr char kRounds[] = "rounds";

double Counter(const v1::RunResult& run, const std::string& name) {
  if (name == kRounds) return static_cast<double>(run.rounds());
  auto it = run.counters().find(name);
  return it == run.counters().end() ? 0.0 : it->second;
}

}  // namespace

std::string Thousands(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::optional<std::vector<ColumnSpec>> ParseColumns(const std::string& text, std::string* error) {
  std::vector<ColumnSpec> columns;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = std::string(TrimSpace(text.substr(start, comma - start)));
    start = comma + 1;
    auto fail = [&](const std::string& why) {
      *error = "--columns: '" + item + "': " + why;
      return std::nullopt;
    };
    if (item.empty()) {
      *error = "--columns: an empty column (two commas, or a comma at an end)";
      return std::nullopt;
    }
    ColumnSpec c;
    std::string expr = item;
    // The label may hold '/', '(' and '%' ("Miss/Drop(%)"): it ends at the last '='.
    if (const size_t eq = item.rfind('='); eq != std::string::npos) {
      c.label = std::string(TrimSpace(item.substr(0, eq)));
      expr = std::string(TrimSpace(item.substr(eq + 1)));
      if (c.label.empty()) return fail("the label before '=' is empty");
    }
    if (const size_t star = expr.find('*'); star != std::string::npos) {
      const std::string number = std::string(TrimSpace(expr.substr(star + 1)));
      char* end = nullptr;
      c.scale = std::strtod(number.c_str(), &end);
      if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(c.scale) ||
          c.scale == 0) {
        return fail("'*' must be followed by a non-zero number");
      }
      expr = std::string(TrimSpace(expr.substr(0, star)));
    }
    if (const size_t slash = expr.find('/'); slash != std::string::npos) {
      c.numerator = std::string(TrimSpace(expr.substr(0, slash)));
      c.denominator = std::string(TrimSpace(expr.substr(slash + 1)));
      if (!ValidCounterName(c.denominator)) {
        return fail("'" + c.denominator + "' is not a counter name (letters, digits, _ . : -)");
      }
    } else {
      c.numerator = expr;
    }
    if (!ValidCounterName(c.numerator)) {
      return fail("'" + c.numerator + "' is not a counter name (letters, digits, _ . : -)");
    }
    if (c.label.empty()) c.label = expr;
    columns.push_back(std::move(c));
    if (comma == text.size()) break;
  }
  if (columns.size() > 32) {
    *error = "--columns: at most 32 columns (" + std::to_string(columns.size()) + " given)";
    return std::nullopt;
  }
  return columns;
}

std::vector<std::string> CountersOf(const std::vector<ColumnSpec>& columns) {
  std::vector<std::string> names;
  for (const ColumnSpec& c : columns) {
    for (const std::string* n : {&c.numerator, &c.denominator}) {
      if (!n->empty() && std::find(names.begin(), names.end(), *n) == names.end())
        names.push_back(*n);
    }
  }
  return names;
}

Table RunTable(const v1::GetReportResponse& report, const std::vector<ColumnSpec>& columns) {
  // Order: cell (first seen), kernel (spec order), board, repetition.
  std::vector<std::string> kernels(report.job().spec().kernels().begin(),
                                   report.job().spec().kernels().end());
  std::map<std::string, size_t> cell_order;
  std::set<std::string> boards;
  auto cell_key = [&](const v1::RunResult& r) {
    std::string key;
    for (const std::string& k : report.matrix_keys()) {
      auto it = r.cell().find(k);
      key += (it == r.cell().end() ? "" : it->second) + "\x1f";
    }
    return key;
  };
  for (const v1::RunResult& r : report.run_results()) {
    cell_order.try_emplace(cell_key(r), cell_order.size());
    boards.insert(r.board());
    if (std::find(kernels.begin(), kernels.end(), r.kernel()) == kernels.end())
      kernels.push_back(r.kernel());
  }
  auto kernel_index = [&](const std::string& k) {
    return std::find(kernels.begin(), kernels.end(), k) - kernels.begin();
  };
  std::vector<const v1::RunResult*> rows;
  for (const v1::RunResult& r : report.run_results()) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [&](const v1::RunResult* a, const v1::RunResult* b) {
    return std::make_tuple(cell_order[cell_key(*a)], kernel_index(a->kernel()), a->board(),
                           a->repetition()) < std::make_tuple(cell_order[cell_key(*b)],
                                                              kernel_index(b->kernel()), b->board(),
                                                              b->repetition());
  });

  Table table;
  const bool show_cells = cell_order.size() > 1;
  const bool show_boards = boards.size() > 1;
  if (show_cells) {
    for (const std::string& k : report.matrix_keys()) table.headers.push_back(k);
  }
  if (show_boards) table.headers.push_back("Board");
  for (const char* h : {"Case", "Total Rounds", "Throughput"}) table.headers.push_back(h);
  for (const ColumnSpec& c : columns) table.headers.push_back(c.label);
  for (const v1::RunResult* r : rows) {
    std::vector<std::string> cells;
    if (show_cells) {
      for (const std::string& k : report.matrix_keys()) {
        auto it = r->cell().find(k);
        cells.push_back(it == r->cell().end() ? "-" : it->second);
      }
    }
    if (show_boards) cells.push_back(r->board());
    cells.push_back(KernelTitle(r->kernel()) + " (Run " + std::to_string(r->repetition()) + ")");
    cells.push_back(Thousands(r->rounds()));
    cells.push_back(FormatThroughput(r->throughput()));
    for (const ColumnSpec& c : columns) {
      const double numerator = Counter(*r, c.numerator);
      if (c.denominator.empty()) {
        cells.push_back(c.scale == 1 ? CounterText(numerator) : Fixed2(numerator * c.scale));
        continue;
      }
      const double denominator = Counter(*r, c.denominator);
      cells.push_back(denominator == 0 ? "-" : Fixed2(numerator / denominator * c.scale));
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

}  // namespace faultline::report
