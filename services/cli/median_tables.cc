#include "services/cli/median_tables.h"

#include <cmath>

#include "services/cli/comparison.h"

namespace faultline::cli {
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

std::string WithCi(const v1::MedianSummary& m) {
  if (m.n() == 0) return "-";
  std::string out = SeedNumber(m.median());
  if (std::isfinite(m.ci_low()) && std::isfinite(m.ci_high())) {
    out += " [" + SeedNumber(m.ci_low()) + ", " + SeedNumber(m.ci_high()) + "]";
  }
  return out;
}

std::string Change(const v1::MedianTableRow& row) {
  if (!std::isfinite(row.ratio()) || !(row.ratio() > 0)) return "N/A ";
  const bool clear = (row.ci_low() > 1 || row.ci_high() < 1) && std::isfinite(row.ci_high());
  return Printf("%+.2f%%", (row.ratio() - 1) * 100) + (clear ? "*" : " ");
}

}  // namespace

std::string SeedNumber(double value) {
  if (std::isnan(value)) return "-";
  if (value == 0) return "0";
  const double magnitude = std::fabs(value);
  if (magnitude >= 999.5) return Grouped(value);
  if (magnitude >= 99.95) return Printf("%.0f", value);
  if (magnitude >= 9.995) return Printf("%.1f", value);
  if (magnitude >= 0.9995) return Printf("%.2f", value);
  return Printf("%.3g", value);
}

Table MedianTableRows(const v1::MedianTable& table, const std::string& baseline,
                      const std::string& candidate) {
  Table out;
  out.headers = {table.first_column(), KernelTitle(baseline) + " (median)",
                 KernelTitle(candidate) + " (median)", "Change"};
  out.right_align = {false, false, false, true};
  for (const v1::MedianTableRow& row : table.rows()) {
    out.rows.push_back({row.label(), WithCi(row.baseline()), WithCi(row.candidate()), Change(row)});
  }
  return out;
}

std::string RenderMedianTables(const v1::Comparison& comparison, const std::string& where,
                               ReportFormat format) {
  if (comparison.tables().empty()) return "";
  const bool markdown = format == ReportFormat::kMarkdown;
  const v1::MedianTable& first = comparison.tables(0);
  const uint32_t runs = std::max(first.rows().empty() ? 0u : first.rows(0).baseline().n(),
                                 first.rows().empty() ? 0u : first.rows(0).candidate().n());
  std::string out = "\nmmap_lock waits" + where + " (per " + first.unit() + "; median of " +
                    std::to_string(runs) + " runs per kernel [95% CI];\n* marks a change " +
                    "whose 95% CI excludes 0):\n";
  for (const v1::MedianTable& table : comparison.tables()) {
    const Table rows = MedianTableRows(table, comparison.baseline(), comparison.candidate());
    if (markdown) {
      out += "\n**" + EscapeMarkdown(table.title()) + "**\n\n" + RenderMarkdownTable(rows);
    } else {
      out += "\n== " + table.title() + " ==\n\n" + RenderRuledTable(rows);
    }
  }
  return out;
}

}  // namespace faultline::cli
