#include "report/median_tables.h"

#include <algorithm>
#include <cmath>

#include "common/kernel_label.h"
#include "report/comparison.h"

namespace faultline::report {
namespace {

std::string Grouped(double value) {
  const auto whole = static_cast<long long>(std::llround(std::fabs(value)));
  std::string digits = std::to_string(whole);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (value < 0 ? "-" : "") + out;
}

// A per-acquisition wait in µs below a nanosecond is the trylocks' zeros averaged in: shown
// as "<0.001" rather than with digits that mean nothing.
std::string Number(double value, bool per_unit) {
  if (!per_unit && value > 0 && value < 0.001) return "<0.001";
  return SeedNumber(value);
}

std::string WithCi(const v1::MedianSummary& m, double scale, bool per_unit) {
  if (m.n() == 0) return "-";
  std::string out = Number(m.median() * scale, per_unit);
  if (std::isfinite(m.ci_low()) && std::isfinite(m.ci_high())) {
    out += " [" + Number(m.ci_low() * scale, per_unit) + ", " +
           Number(m.ci_high() * scale, per_unit) + "]";
  }
  return out;
}

// "round" -> "rounds", "second" -> "seconds".
std::string Plural(const std::string& unit) {
  return unit.empty() || unit.back() == 's' ? unit : unit + "s";
}

// Starred when its q (Benjamini-Hochberg over every row of the comparison's tables) is at
// most the report's alpha: a star per row whose CI excludes 0 would mark ~5% of the rows of
// an A/A run by chance (4 of 31 once).
std::string Change(const v1::MedianTableRow& row) {
  if (!std::isfinite(row.ratio()) || !(row.ratio() > 0)) return "N/A ";
  return Printf("%+.2f%%", (row.ratio() - 1) * 100) + (row.significant() ? "*" : " ");
}

}  // namespace

std::string SeedNumber(double value) {
  if (std::isnan(value)) return "-";
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  // Beyond six digits three figures and a suffix, so a CI stays short: 1.07M, 107k.
  if (magnitude >= 9.995e8) return Printf("%.3gG", value / 1e9);
  if (magnitude >= 9.995e5) return Printf("%.3gM", value / 1e6);
  if (magnitude >= 99'950) return Printf("%.3gk", value / 1e3);
  if (magnitude >= 999.5) return Grouped(value);
  if (magnitude >= 99.95) return Printf("%.0f", value);
  if (magnitude >= 9.995) return Printf("%.1f", value);
  if (magnitude >= 0.9995) return Printf("%.2f", value);
  return Printf("%.3g", value);
}

double TableScale(const v1::MedianTable& table) {
  double smallest = INFINITY;
  for (const v1::MedianTableRow& row : table.rows()) {
    if (!row.per_unit()) continue;
    for (const v1::MedianSummary* m : {&row.baseline(), &row.candidate()}) {
      const double v = std::fabs(m->median());
      if (m->n() > 0 && v > 0 && std::isfinite(v)) smallest = std::min(smallest, v);
    }
  }
  double scale = 1;
  while (smallest * scale < 0.1 && scale < 1e6) scale *= 1000;
  return scale;
}

std::string TableUnit(const v1::MedianTable& table) {
  const double scale = TableScale(table);
  std::string out =
      "per " + (scale == 1 ? table.unit() : SeedNumber(scale) + " " + Plural(table.unit()));
  const bool per_acquisition =
      std::any_of(table.rows().begin(), table.rows().end(),
                  [](const v1::MedianTableRow& r) { return !r.per_unit(); });
  if (per_acquisition) out += "; averages and maxima per acquisition";
  return out;
}

Table MedianTableRows(const v1::MedianTable& table, const std::string& baseline,
                      const std::string& candidate) {
  const double scale = TableScale(table);
  Table out;
  // The label without its build's "@commit" (the heading above names the builds), so the
  // table keeps to 80 columns.
  auto name = [](const std::string& label) { return KernelTitle(KernelLabel::Parse(label).name); };
  out.headers = {table.first_column(), name(baseline) + " (median)", name(candidate) + " (median)",
                 "Change"};
  out.right_align = {false, false, false, true};
  for (const v1::MedianTableRow& row : table.rows()) {
    const double k = row.per_unit() ? scale : 1;
    out.rows.push_back({row.label(), WithCi(row.baseline(), k, row.per_unit()),
                        WithCi(row.candidate(), k, row.per_unit()), Change(row)});
  }
  return out;
}

std::string MedianTablesLegend(const v1::Comparison& comparison, double alpha) {
  if (comparison.tables().empty()) return "";
  const v1::MedianTable& first = comparison.tables(0);
  const uint32_t runs = std::max(first.rows().empty() ? 0u : first.rows(0).baseline().n(),
                                 first.rows().empty() ? 0u : first.rows(0).candidate().n());
  int tested = 0;
  for (const v1::MedianTable& table : comparison.tables()) {
    for (const v1::MedianTableRow& row : table.rows()) tested += std::isfinite(row.q_value());
  }
  return "medians of " + std::to_string(runs) + " runs per kernel [95% CI];\n* marks a change " +
         "with q <= " + Printf("%g", alpha) + " (Benjamini-Hochberg over its " +
         std::to_string(tested) + " rows).\n";
}

std::string MedianTableHeading(const v1::MedianTable& table) {
  return "== " + table.title() + " ==\n(" + TableUnit(table) + ")\n";
}

std::string RenderMedianTables(const v1::Comparison& comparison, const std::string& where,
                               ReportFormat format, double alpha) {
  if (comparison.tables().empty()) return "";
  const bool markdown = format == ReportFormat::kMarkdown;
  std::string out = "\nmmap_lock waits" + where + ": " + MedianTablesLegend(comparison, alpha);
  for (const v1::MedianTable& table : comparison.tables()) {
    const Table rows = MedianTableRows(table, comparison.baseline(), comparison.candidate());
    if (markdown) {
      out += "\n**" + EscapeMarkdown(table.title()) + "** (" + TableUnit(table) + ")\n\n" +
             RenderMarkdownTable(rows);
    } else {
      out += "\n" + MedianTableHeading(table) + "\n" + RenderRuledTable(rows);
    }
  }
  return out;
}

}  // namespace faultline::report
