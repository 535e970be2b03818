#include "report/comparison.h"

#include "common/kernel_label.h"
#include "report/frames.h"
#include "report/median_tables.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include "faultline/v1/values.h"

namespace faultline::report {
namespace {

std::optional<double> Number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Right-aligns the strings of one column to a common width (the seeds line up "0.58 /s"
// under "17303.09 /s").
void AlignRight(std::vector<std::string*> cells) {
  size_t width = 0;
  for (const std::string* s : cells) width = std::max(width, s->size());
  for (std::string* s : cells) s->insert(0, width - s->size(), ' ');
}

std::string Throughput(uint32_t n, double median) {
  return n == 0 ? "-" : FormatThroughput(median);
}

double Ratio(uint32_t n_a, double a, uint32_t n_b, double b) {
  if (n_a == 0 || n_b == 0 || !(a > 0)) return std::nan("");
  return b / a;
}

std::string Fraction(double value) {
  return Printf("%g", value);
}

std::string EffectText(double alpha, double min_effect) {
  if (!(alpha > 0)) alpha = stats::CompareOptions().alpha;
  if (!(min_effect > 0)) min_effect = stats::CompareOptions().min_effect;
  return "α = " + Fraction(alpha) + ", δ = " + Fraction(min_effect * 100) + "%";
}

std::string RenderSection(const std::string& title, const Table& table, ReportFormat format) {
  if (format == ReportFormat::kMarkdown) return title + "\n\n" + RenderMarkdownTable(table);
  return title + "\n" + RenderBoxTable(table);
}

}  // namespace

std::string CellValue(const v1::Comparison& c, const std::string& key) {
  auto it = c.cell().find(key);
  return it == c.cell().end() ? "-" : it->second;
}

bool SameCell(const google::protobuf::Map<std::string, std::string>& a,
              const google::protobuf::Map<std::string, std::string>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != value) return false;
  }
  return true;
}

std::string KernelTitle(std::string_view label) {
  std::string out(label);
  // A built kernel's label is the controller's name for it: kept as it is.
  if (!out.empty() && !KernelLabel::Parse(label).source.has_value())
    out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string KnobNames::Column(std::string_view value) const {
  if (unit.empty()) return key + "=" + std::string(value);
  return std::string(value) + " " + unit;
}

KnobNames NamesForKnob(std::string_view key) {
  if (key == "writers")
    return {"mmap writers", "mmap writers", "mmap writer pressure", std::string(key)};
  if (key == "threads") return {"Threads", "threads", "thread count", std::string(key)};
  return {std::string(key), "", std::string(key), std::string(key)};
}

std::string FormatChange(double ratio) {
  if (!std::isfinite(ratio) || !(ratio > 0)) return "-";
  return Printf("%+.1f%%", (ratio - 1) * 100);
}

std::string FormatCi(double low, double high) {
  if (std::isnan(low) || std::isnan(high)) return "-";
  if (!(low > 0) || std::isinf(high)) return "unbounded";
  return "[" + FormatChange(low) + ", " + FormatChange(high) + "]";
}

bool IsDifference(const v1::CounterComparison& k) {
  return k.only_on().empty() && std::isnan(k.ratio()) && std::isfinite(k.difference());
}

std::string FormatCounterChange(const v1::CounterComparison& k) {
  if (IsDifference(k)) return Printf("%+.3g", k.difference());
  return FormatChange(k.ratio());
}

std::string FormatCounterCi(const v1::CounterComparison& k) {
  if (!IsDifference(k)) return FormatCi(k.ci_low(), k.ci_high());
  if (std::isnan(k.difference_low()) || std::isnan(k.difference_high())) return "-";
  if (std::isinf(k.difference_low()) || std::isinf(k.difference_high())) return "unbounded";
  return Printf("[%+.3g, %+.3g]", k.difference_low(), k.difference_high());
}

std::string FormatPValue(double p) {
  if (std::isnan(p)) return "-";
  if (p < 0.0001) return "<0.0001";
  return Printf("%.4f", p);
}

std::vector<ComparisonGroup> GroupComparisons(const v1::GetReportResponse& report) {
  std::vector<std::string> keys(report.matrix_keys().begin(), report.matrix_keys().end());
  if (keys.empty()) {
    std::map<std::string, bool> seen;  // sorted
    for (const v1::Comparison& c : report.comparisons()) {
      for (const auto& [key, value] : c.cell()) seen[key] = true;
    }
    for (const auto& [key, unused] : seen) keys.push_back(key);
  }
  std::string knob;
  if (std::find(keys.begin(), keys.end(), "writers") != keys.end()) {
    knob = "writers";
  } else if (std::find(keys.begin(), keys.end(), "threads") != keys.end()) {
    knob = "threads";
  } else if (!keys.empty()) {
    knob = keys.back();
  }

  std::vector<ComparisonGroup> groups;
  for (const v1::Comparison& c : report.comparisons()) {
    std::vector<std::pair<std::string, std::string>> fixed;
    for (const std::string& key : keys) {
      if (key != knob) fixed.emplace_back(key, CellValue(c, key));
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const ComparisonGroup& g) {
      return std::tie(g.board, g.baseline, g.candidate, g.fixed) ==
             std::tie(c.board(), c.baseline(), c.candidate(), fixed);
    });
    if (it == groups.end()) {
      groups.push_back(
          ComparisonGroup{c.board(), c.baseline(), c.candidate(), knob, std::move(fixed), {}});
      it = groups.end() - 1;
    }
    it->cells.push_back(&c);
  }
  for (ComparisonGroup& g : groups) {
    if (g.knob.empty()) continue;
    const bool numeric = std::all_of(g.cells.begin(), g.cells.end(), [&](const v1::Comparison* c) {
      return Number(CellValue(*c, g.knob)).has_value();
    });
    if (!numeric) continue;
    std::stable_sort(g.cells.begin(), g.cells.end(),
                     [&](const v1::Comparison* x, const v1::Comparison* y) {
                       return *Number(CellValue(*x, g.knob)) < *Number(CellValue(*y, g.knob));
                     });
  }
  return groups;
}

std::string GroupHeading(const ComparisonGroup& group) {
  std::string out = "board " + (group.board.empty() ? std::string("-") : group.board);
  for (const auto& [key, value] : group.fixed) out += ", " + key + "=" + value;
  return out + ": " + KernelTitle(group.candidate) + " vs " + KernelTitle(group.baseline);
}

Table SamePressureTable(const ComparisonGroup& group) {
  Table table;
  const bool has_knob = !group.knob.empty();
  if (has_knob) table.headers.push_back(NamesForKnob(group.knob).header);
  for (const std::string& h :
       {KernelTitle(group.baseline), KernelTitle(group.candidate), std::string("Improvement")}) {
    table.headers.push_back(h);
  }
  table.right_align.assign(table.headers.size(), true);
  for (const v1::Comparison* c : group.cells) {
    std::vector<std::string> row;
    if (has_knob) row.push_back(CellValue(*c, group.knob));
    row.push_back(Throughput(c->n_baseline(), c->baseline_median()));
    row.push_back(Throughput(c->n_candidate(), c->candidate_median()));
    // The change as the statistics estimate it (Hodges-Lehmann, paired where the runs are),
    // not the ratio of the two medians beside it: one number per change in a report.
    row.push_back(FormatChange(c->ratio()));
    table.rows.push_back(std::move(row));
  }
  const size_t first = has_knob ? 1 : 0;
  for (size_t col = first; col < first + 2; ++col) {
    std::vector<std::string*> cells;
    for (auto& row : table.rows) cells.push_back(&row[col]);
    AlignRight(cells);
  }
  return table;
}

std::string SamePressureTitle(const ComparisonGroup& group) {
  if (group.knob.empty()) return "Throughput (higher is better):";
  return "Throughput at the same " + NamesForKnob(group.knob).pressure + " (higher is better):";
}

Table PressureTable(const ComparisonGroup& group) {
  Table table;
  table.odd_space_left = true;  // as seed 001 centres this table
  const KnobNames names = NamesForKnob(group.knob);
  table.headers.push_back("Kernel");
  for (const v1::Comparison* c : group.cells)
    table.headers.push_back(names.Column(CellValue(*c, group.knob)));
  if (group.knob.empty() || group.cells.size() < 2) return table;

  struct Part {
    std::string throughput, change;
  };
  std::vector<std::vector<Part>> parts(2);
  for (int side = 0; side < 2; ++side) {
    const v1::Comparison& first = *group.cells[0];
    const uint32_t n0 = side == 0 ? first.n_baseline() : first.n_candidate();
    const double m0 = side == 0 ? first.baseline_median() : first.candidate_median();
    for (size_t i = 0; i < group.cells.size(); ++i) {
      const v1::Comparison& c = *group.cells[i];
      const uint32_t n = side == 0 ? c.n_baseline() : c.n_candidate();
      const double m = side == 0 ? c.baseline_median() : c.candidate_median();
      Part part{Throughput(n, m), ""};
      if (i > 0) {
        const std::string change = FormatChange(Ratio(n0, m0, n, m));
        if (change != "-") part.change = "(" + change + ")";
      }
      parts[side].push_back(std::move(part));
    }
  }
  for (size_t i = 0; i < group.cells.size(); ++i) {  // line both parts up within a column
    AlignRight({&parts[0][i].throughput, &parts[1][i].throughput});
    if (!parts[0][i].change.empty() && !parts[1][i].change.empty()) {
      AlignRight({&parts[0][i].change, &parts[1][i].change});
    }
  }
  for (int side = 0; side < 2; ++side) {
    std::vector<std::string> row{KernelTitle(side == 0 ? group.baseline : group.candidate)};
    for (const Part& part : parts[side]) {
      row.push_back(part.change.empty() ? part.throughput : part.throughput + " " + part.change);
    }
    table.rows.push_back(std::move(row));
  }
  table.right_align.assign(table.headers.size(), true);
  table.right_align[0] = false;
  return table;
}

std::string PressureTitle(const ComparisonGroup& group) {
  return "Throughput under increasing " + NamesForKnob(group.knob).pressure +
         " (higher is better):";
}

Table ComparisonStatsTable(const ComparisonGroup& group) {
  Table table;
  const bool has_knob = !group.knob.empty();
  if (has_knob) table.headers.push_back(NamesForKnob(group.knob).header);
  for (const std::string& h :
       {"n " + KernelTitle(group.baseline), "n " + KernelTitle(group.candidate),
        std::string("Change"), std::string("95% CI"), std::string("p"), std::string("q"),
        std::string("Verdict")}) {
    table.headers.push_back(h);
  }
  table.right_align.assign(table.headers.size(), true);
  table.right_align.back() = false;
  for (const v1::Comparison* c : group.cells) {
    std::vector<std::string> row;
    if (has_knob) row.push_back(CellValue(*c, group.knob));
    row.push_back(std::to_string(c->n_baseline()));
    row.push_back(std::to_string(c->n_candidate()));
    row.push_back(FormatChange(c->ratio()));
    row.push_back(FormatCi(c->ci_low(), c->ci_high()));
    row.push_back(FormatPValue(c->p_value()));
    row.push_back(FormatPValue(c->q_value()));
    std::string verdict = v1::VerdictText(*c).empty() ? "-" : v1::VerdictText(*c);
    // Runs too coarse in rounds: the cell was compared in pages touched per second.
    if (c->metric() == "pages/s") verdict += " (in pages/s)";
    // Paired (adjacent A/B blocks): say what the unpaired estimate was, for comparison.
    if (c->paired()) {
      verdict += " (paired; unpaired " + FormatChange(c->unpaired_ratio()) + " " +
                 FormatCi(c->unpaired_ci_low(), c->unpaired_ci_high()) + ")";
    }
    row.push_back(verdict);
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::string StatsTitle(const ComparisonGroup& group, double alpha, double min_effect) {
  return KernelTitle(group.candidate) + " vs " + KernelTitle(group.baseline) +
         ": Hodges-Lehmann change, 95% CI, one-sided p, q (BH-adjusted two-sided p); " +
         EffectText(alpha, min_effect) + ":";
}

namespace {

std::string CounterValue(double v) {
  if (std::isnan(v)) return "-";
  if (v == 0) return "0";
  return Printf("%.4g", v);
}

std::string CounterRatio(const v1::CounterComparison& k, const std::string& baseline,
                         const std::string& candidate) {
  if (k.only_on() == "candidate") return "only on " + KernelTitle(candidate);
  if (k.only_on() == "baseline") return "only on " + KernelTitle(baseline);
  if (IsDifference(k)) return Printf("%+.3g", k.difference());
  if (!std::isfinite(k.ratio())) return "-";
  return Printf("×%.3g", k.ratio());
}

std::string CounterCi(const v1::CounterComparison& k) {
  if (IsDifference(k)) return FormatCounterCi(k);
  if (std::isnan(k.ci_low()) || std::isnan(k.ci_high())) return "-";
  if (!(k.ci_low() > 0) || std::isinf(k.ci_high())) return "unbounded";
  return Printf("[%.3g, %.3g]", k.ci_low(), k.ci_high());
}

// The counters other than the frames' (those have their own table: frames.h).
int NonFrameCounters(const v1::Comparison& c) {
  return static_cast<int>(std::count_if(c.counters().begin(), c.counters().end(),
                                        [](const auto& k) { return !IsFrameCounter(k.name()); }));
}

std::string CounterTitle(const ComparisonGroup& group, const v1::Comparison& c, const Table& table,
                         bool all_counters, double alpha) {
  std::string where;
  if (!group.knob.empty()) where = " at " + group.knob + "=" + CellValue(c, group.knob);
  if (table.rows.empty()) {
    return "Counters" + where + ": no significant change among " +
           std::to_string(NonFrameCounters(c)) + " (q ≤ " + Fraction(alpha) + ")\n";
  }
  if (all_counters) {
    return "Counters" + where + ", all " + std::to_string(c.counters_size()) +
           " (per round; significant ones first, q ≤ " + Fraction(alpha) + "):";
  }
  size_t significant = table.rows.size();
  return "Counters that changed" + where + " (per round, q ≤ " + Fraction(alpha) +
         ", largest first; " + std::to_string(significant) + " of " +
         std::to_string(NonFrameCounters(c)) + "):";
}

}  // namespace

Table CounterTable(const v1::Comparison& c, bool all_counters) {
  Table table;
  table.headers = {"Counter",
                   KernelTitle(c.baseline()) + " /unit",
                   KernelTitle(c.candidate()) + " /unit",
                   "Ratio",
                   "95% CI",
                   "q"};
  table.right_align = {false, true, true, true, true, true};
  for (const v1::CounterComparison& k : c.counters()) {
    if (!all_counters && (!k.significant() || IsFrameCounter(k.name()))) continue;
    const std::string unit = k.unit() == "second" ? "/s" : "/round";
    table.rows.push_back({k.name() + unit, CounterValue(k.baseline_median()),
                          CounterValue(k.candidate_median()),
                          CounterRatio(k, c.baseline(), c.candidate()), CounterCi(k),
                          k.only_on().empty() ? FormatPValue(k.q_value()) : "-"});
  }
  table.headers[1] = KernelTitle(c.baseline());
  table.headers[2] = KernelTitle(c.candidate());
  return table;
}

std::string RenderComparisons(const v1::GetReportResponse& report, ReportFormat format,
                              bool all_counters) {
  if (report.comparisons().empty() || format == ReportFormat::kJson || format == ReportFormat::kCsv)
    return "";
  const bool markdown = format == ReportFormat::kMarkdown;
  std::string out;
  for (const ComparisonGroup& group : GroupComparisons(report)) {
    out += "\n" + (markdown ? "**" + GroupHeading(group) + "**\n" : GroupHeading(group) + "\n");
    out += "\n" + RenderSection(SamePressureTitle(group), SamePressureTable(group), format);
    const Table pressure = PressureTable(group);
    if (!pressure.rows.empty()) out += "\n" + RenderSection(PressureTitle(group), pressure, format);
    out += std::string(markdown ? "\n" : "") + kImprovementNote + "\n";
    out += "\n" + RenderSection(StatsTitle(group, report.alpha(), report.min_effect()),
                                ComparisonStatsTable(group), format);
    for (const v1::Comparison* c : group.cells) {
      if (c->counters_size() == 0) continue;
      const Table counters = CounterTable(*c, all_counters);
      const std::string title = CounterTitle(group, *c, counters, all_counters, report.alpha());
      out += "\n" + (counters.rows.empty() ? title : RenderSection(title, counters, format));
      const bool differences = std::any_of(
          c->counters().begin(), c->counters().end(), [&](const v1::CounterComparison& k) {
            return IsDifference(k) &&
                   (all_counters || (k.significant() && !IsFrameCounter(k.name())));
          });
      if (differences) out += std::string(markdown ? "\n" : "") + kDifferenceNote + "\n";
      if (!all_counters) {
        const std::string where =
            group.knob.empty() ? "" : " at " + group.knob + "=" + CellValue(*c, group.knob);
        out += RenderFrames(*c, where, format, report.alpha());
      }
    }
    for (const v1::Comparison* c : group.cells) {
      const std::string where =
          group.knob.empty() ? "" : " at " + group.knob + "=" + CellValue(*c, group.knob);
      out += RenderMedianTables(*c, where, format, report.alpha());
    }
  }
  // Keys are "board/fact" (or plain "fact"): one section per board, in key order.
  std::set<std::string> boards;
  for (const v1::Comparison& c : report.comparisons()) boards.insert(c.board());
  std::map<std::string, std::map<std::string, std::string>> by_board;
  for (const auto& [key, value] : report.environment_differences()) {
    std::string board, fact = key;
    if (const size_t slash = key.find('/');
        slash != std::string::npos && boards.count(key.substr(0, slash)) > 0) {
      board = key.substr(0, slash);
      fact = key.substr(slash + 1);
    }
    by_board[board][fact] = value;
  }
  for (const auto& [board, facts] : by_board) {
    out += "\nEnvironment differences between the kernels" +
           (board.empty() ? "" : " on board " + board) + ":\n";
    if (markdown) out += "\n";
    for (const auto& [fact, value] : facts)
      out += (markdown ? "- `" + fact + "`: " : "  " + fact + ": ") + value + "\n";
  }
  return out;
}

v1::Comparison ToComparison(const stats::CellComparison& cell, std::string_view baseline,
                            std::string_view candidate) {
  v1::Comparison out;
  out.set_baseline(std::string(baseline));
  out.set_candidate(std::string(candidate));
  out.set_n_baseline(static_cast<uint32_t>(cell.n_a));
  out.set_n_candidate(static_cast<uint32_t>(cell.n_b));
  out.set_baseline_median(cell.median_a);
  out.set_candidate_median(cell.median_b);
  out.set_ratio(cell.ratio);
  out.set_ci_low(cell.ci_low);
  out.set_ci_high(cell.ci_high);
  out.set_p_value(cell.p_value);
  out.set_q_value(cell.q_value);
  v1::SetVerdict(&out, v1::ParseVerdict(stats::ToString(cell.verdict)));
  out.set_paired(cell.paired);
  return out;
}

std::string RenderOfflineComparison(const v1::Comparison& c, const stats::CompareOptions& options,
                                    ReportFormat format) {
  if (format == ReportFormat::kJson) {
    v1::GetReportResponse response;
    *response.add_comparisons() = c;
    response.set_alpha(options.alpha);
    response.set_min_effect(options.min_effect);
    return MessageToJson(response);
  }
  if (format == ReportFormat::kCsv) {
    Table table;
    table.headers = {"baseline",        "candidate",        "n_baseline", "n_candidate",
                     "baseline_median", "candidate_median", "ratio",      "ci_low",
                     "ci_high",         "p_value",          "q_value",    "verdict",
                     "alpha",           "min_effect"};
    table.rows.push_back({c.baseline(), c.candidate(), std::to_string(c.n_baseline()),
                          std::to_string(c.n_candidate()), CsvNumber(c.baseline_median()),
                          CsvNumber(c.candidate_median()), CsvNumber(c.ratio()),
                          CsvNumber(c.ci_low()), CsvNumber(c.ci_high()), CsvNumber(c.p_value()),
                          CsvNumber(c.q_value()), v1::VerdictText(c), CsvNumber(options.alpha),
                          CsvNumber(options.min_effect)});
    return RenderCsv(table);
  }
  const bool markdown = format == ReportFormat::kMarkdown;
  const std::string bullet = markdown ? "- " : "";
  std::string out = bullet + "A (baseline): " + c.baseline() + ", " +
                    std::to_string(c.n_baseline()) + " samples, median " +
                    Throughput(c.n_baseline(), c.baseline_median()) + "\n";
  out += bullet + "B (candidate): " + c.candidate() + ", " + std::to_string(c.n_candidate()) +
         " samples, median " + Throughput(c.n_candidate(), c.candidate_median()) + "\n\n";
  Table table;
  table.headers = {"n A", "n B", "Change", Printf("%g%% CI", options.confidence * 100),
                   "p",   "q",   "Verdict"};
  table.right_align = {true, true, true, true, true, true, false};
  table.rows.push_back({std::to_string(c.n_baseline()), std::to_string(c.n_candidate()),
                        FormatChange(c.ratio()), FormatCi(c.ci_low(), c.ci_high()),
                        FormatPValue(c.p_value()), FormatPValue(c.q_value()), v1::VerdictText(c)});
  const std::string test =
      c.paired() ? "paired (line i of A with line i of B): Hodges-Lehmann change of the "
                   "log ratios, CI and one-sided p from the exact signed-rank distribution"
                 : "Hodges-Lehmann change, CI, one-sided p";
  table.headers[0] = c.paired() ? "pairs" : "n A";
  out += RenderSection("B vs A: " + test + ", q (two-sided p); " +
                           EffectText(options.alpha, options.min_effect) + ":",
                       table, format);
  out += "\n" +
         std::string(markdown ? "**verdict: " + v1::VerdictText(c) + "**"
                              : "verdict: " + v1::VerdictText(c)) +
         "\n";
  return out;
}

}  // namespace faultline::report
