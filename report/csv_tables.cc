// The CSV tables of a report (`faultline report --format csv`, comparison.h): one row per
// summary row with its comparison, or one per compared counter.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "faultline/v1/values.h"
#include "report/comparison.h"

namespace faultline::report {
Table CounterCsvTable(const v1::GetReportResponse& report) {
  Table table;
  for (const std::string& key : report.matrix_keys()) table.headers.push_back(key);
  for (const char* h : {"board",
                        "baseline",
                        "candidate",
                        "counter",
                        "unit",
                        "baseline_median",
                        "candidate_median",
                        "baseline_per_second",
                        "candidate_per_second",
                        "ratio",
                        "ci_low",
                        "ci_high",
                        "p_value",
                        "q_value",
                        "significant",
                        "paired",
                        "only_on",
                        "difference",
                        "difference_low",
                        "difference_high"}) {
    table.headers.push_back(h);
  }
  for (const v1::Comparison& c : report.comparisons()) {
    for (const v1::CounterComparison& k : c.counters()) {
      std::vector<std::string> row;
      for (const std::string& key : report.matrix_keys()) row.push_back(CellValue(c, key));
      for (const std::string& v : {c.board(),
                                   c.baseline(),
                                   c.candidate(),
                                   k.name(),
                                   k.unit(),
                                   CsvNumber(k.baseline_median()),
                                   CsvNumber(k.candidate_median()),
                                   CsvNumber(k.baseline_per_second()),
                                   CsvNumber(k.candidate_per_second()),
                                   CsvNumber(k.ratio()),
                                   CsvNumber(k.ci_low()),
                                   CsvNumber(k.ci_high()),
                                   CsvNumber(k.p_value()),
                                   CsvNumber(k.q_value()),
                                   std::string(k.significant() ? "true" : "false"),
                                   std::string(k.paired() ? "true" : "false"),
                                   k.only_on(),
                                   CsvNumber(k.difference()),
                                   CsvNumber(k.difference_low()),
                                   CsvNumber(k.difference_high())}) {
        row.push_back(v);
      }
      table.rows.push_back(std::move(row));
    }
  }
  return table;
}

std::string CsvNumber(double value) {
  if (std::isnan(value)) return "";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : Printf("%.17g", value);
}

Table ReportCsvTable(const v1::GetReportResponse& report) {
  Table table;
  for (const std::string& key : report.matrix_keys()) table.headers.push_back(key);
  for (const char* h :
       {"kernel", "board", "n", "median", "min", "max", "mean", "failed", "baseline", "ratio",
        "ci_low", "ci_high", "p_value", "q_value", "verdict"}) {
    table.headers.push_back(h);
  }
  for (const v1::ReportRow& row : report.rows()) {
    std::vector<std::string> cells;
    for (const std::string& key : report.matrix_keys()) {
      auto it = row.cell().find(key);
      cells.push_back(it == row.cell().end() ? "" : it->second);
    }
    const bool any = row.n() > 0;
    cells.push_back(row.kernel());
    cells.push_back(row.board());
    cells.push_back(std::to_string(row.n()));
    for (double v : {row.median(), row.min(), row.max(), row.mean()})
      cells.push_back(any ? CsvNumber(v) : "");
    cells.push_back(std::to_string(row.failed()));
    const auto match = std::find_if(
        report.comparisons().begin(), report.comparisons().end(), [&](const v1::Comparison& c) {
          return c.board() == row.board() && c.candidate() == row.kernel() &&
                 SameCell(c.cell(), row.cell());
        });
    if (match != report.comparisons().end()) {
      cells.push_back(match->baseline());
      for (double v : {match->ratio(), match->ci_low(), match->ci_high(), match->p_value(),
                       match->q_value()}) {
        cells.push_back(CsvNumber(v));
      }
      cells.push_back(v1::VerdictText(*match));
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

}  // namespace faultline::report
