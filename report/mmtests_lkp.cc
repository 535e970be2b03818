// The mmtests and lkp layouts of mail.h.
#include "report/mail.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "faultline/v1/values.h"
#include "report/comparison.h"
#include "report/frames.h"
#include "report/mail_parts.h"
#include "report/report.h"
#include "report/table.h"
#include "spec/spec_yaml.h"

namespace faultline::report {
namespace {

using mail_parts::Finish;
using mail_parts::FrameLines;
using mail_parts::KernelLetters;
using mail_parts::kMaxCountersPerCell;
using mail_parts::LockTables;

// Where a report's runs are needed and absent.
std::string NeedRuns(const v1::GetReportResponse& report) {
  if (!report.run_results().empty()) return "";
  return "(this report has no runs: render it from `faultline report JOB --format json --runs`)\n";
}

struct RunStats {
  size_t n = 0;
  double min = NAN, q1 = NAN, q2 = NAN, q3 = NAN, max = NAN, hmean = NAN, mean = NAN, sd = NAN;
};

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return NAN;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

RunStats StatsOf(std::vector<double> v) {
  RunStats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.q1 = Quantile(v, 0.25);
  s.q2 = Quantile(v, 0.5);
  s.q3 = Quantile(v, 0.75);
  double sum = 0, inv = 0;
  bool positive = true, negative = false;
  for (double x : v) {
    sum += x;
    positive &= x > 0;
    negative |= x < 0;
    if (x > 0) inv += 1 / x;
  }
  s.mean = sum / static_cast<double>(v.size());
  // A run that made no progress (0 rounds/s, e.g. one round longer than the run under
  // load) makes the harmonic mean 0, its limit — not "nan".
  s.hmean = positive ? static_cast<double>(v.size()) / inv : negative ? NAN : 0;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

std::vector<double> Throughputs(const v1::GetReportResponse& report, const v1::Comparison& c,
                                const std::string& kernel) {
  std::vector<double> out;
  for (const v1::RunResult& r : report.run_results()) {
    if (r.kernel() == kernel && r.board() == c.board() && SameCell(r.cell(), c.cell())) {
      out.push_back(r.throughput());
    }
  }
  return out;
}

std::string Significant(v1::Verdict verdict) {
  return v1::SaysDifferent(verdict) ? "*" : "";
}

}  // namespace

std::string RenderMmtests(const v1::GetReportResponse& report, const MailOptions& options) {
  std::vector<std::string> order;
  const auto letters = KernelLetters(report, &order);
  std::string out = "faultline " + ReportTitle(report) + "\n" + NeedRuns(report);
  if (report.comparisons().empty() || report.run_results().empty()) return Finish(out, options);
  std::set<std::string> boards;
  for (const auto& c : report.comparisons()) boards.insert(c.board());
  // Rows per cell: every kernel's statistic over its runs; the baseline column first.
  struct Line {
    std::string stat, name;
    std::vector<std::string> cols;
  };
  std::vector<std::string> kernels;  // column order: baseline, then candidates
  std::map<std::string, std::vector<const v1::Comparison*>> by_cell;  // "board/cell" -> pairs
  std::vector<std::string> cell_order;
  for (const auto& c : report.comparisons()) {
    if (kernels.empty()) kernels.push_back(c.baseline());
    if (std::find(kernels.begin(), kernels.end(), c.candidate()) == kernels.end()) {
      kernels.push_back(c.candidate());
    }
    std::string name = "tput";
    for (const std::string& k : report.matrix_keys()) {
      auto it = c.cell().find(k);
      if (it != c.cell().end()) absl::StrAppend(&name, "-", k, "-", it->second);
    }
    if (boards.size() > 1) name = c.board() + "/" + name;
    if (!by_cell.count(name)) cell_order.push_back(name);
    by_cell[name].push_back(&c);
  }
  std::vector<Line> lines;
  for (const std::string& name : cell_order) {
    const auto& cs = by_cell[name];
    const RunStats base = StatsOf(Throughputs(report, *cs.front(), kernels.front()));
    std::map<std::string, std::pair<RunStats, v1::Verdict>> per;  // kernel -> stats, verdict
    per[kernels.front()] = {base, v1::VERDICT_UNSPECIFIED};
    for (const v1::Comparison* c : cs) {
      per[c->candidate()] = {StatsOf(Throughputs(report, *c, c->candidate())), v1::VerdictOf(*c)};
    }
    struct Stat {
      const char* label;
      double RunStats::*field;
      bool lower_better;
      bool starred;
    };
    const Stat stats[] = {
        {"Min", &RunStats::min, false, false},      {"1st-qrtle", &RunStats::q1, false, false},
        {"2nd-qrtle", &RunStats::q2, false, false}, {"3rd-qrtle", &RunStats::q3, false, false},
        {"Max-1", &RunStats::max, false, false},    {"Amean", &RunStats::mean, false, true},
        {"Hmean", &RunStats::hmean, false, true},   {"Stddev", &RunStats::sd, true, false}};
    for (const Stat& st : stats) {
      Line l{st.label, name, {}};
      const double a = base.*(st.field);
      for (const std::string& k : kernels) {
        auto it = per.find(k);
        if (it == per.end()) {
          l.cols.push_back(Printf("%10s %-10s", "-", ""));
          continue;
        }
        const double v = it->second.first.*(st.field);
        // mmtests: the gain in percent, positive is better (Stddev: a smaller one).
        double pct = a != 0 && std::isfinite(a) && std::isfinite(v) ? (v - a) / a * 100 : NAN;
        if (k == kernels.front() && std::isfinite(v)) pct = 0;  // the baseline against itself
        if (st.lower_better) pct = -pct;
        pct += 0.0;  // no "-0.00%"
        const std::string mark =
            k != kernels.front() && st.starred ? Significant(it->second.second) : "";
        const std::string change = std::isfinite(pct) ? Printf("%7.2f%%", pct) : "    nan%";
        l.cols.push_back(Printf("%10.2f ", v) +
                         (mark.empty() ? "(" + change + ")" : "*" + change + "*"));
      }
      lines.push_back(std::move(l));
    }
    Line cv{"CoeffVar", name, {}};
    for (const std::string& k : kernels) {
      auto it = per.find(k);
      const double v = it == per.end() || it->second.first.mean == 0
                           ? NAN
                           : it->second.first.sd / it->second.first.mean * 100;
      const double a = base.mean == 0 ? NAN : base.sd / base.mean * 100;
      const double pct = a != 0 && std::isfinite(a) ? -(v - a) / a * 100 + 0.0 : NAN;
      cv.cols.push_back(Printf("%10.2f ", v) + "(" +
                        (std::isfinite(pct) ? Printf("%7.2f%%", pct) : "    nan%") + ")");
    }
    lines.push_back(std::move(cv));
  }
  size_t name_width = 0;
  for (const Line& l : lines) name_width = std::max(name_width, l.name.size());
  std::string header = std::string(10 + name_width, ' ');
  for (const std::string& k : kernels) {
    std::string label =
        letters.count(k) ? letters.at(k) + " " + spec::SpecLabel(k) : spec::SpecLabel(k);
    if (label.size() > 21) label = label.substr(0, 21);
    absl::StrAppend(&header, Printf("%22s", label.c_str()));
  }
  absl::StrAppend(&out, "\n", header, "\n");
  for (const Line& l : lines) {
    absl::StrAppend(
        &out, Printf("%-9s %-*s", l.stat.c_str(), static_cast<int>(name_width), l.name.c_str()));
    for (const std::string& c : l.cols) absl::StrAppend(&out, " ", c);
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, FrameLines(report, letters, options.width),
                  LockTables(report, letters, options.width));
  absl::StrAppend(&out,
                  "\nRounds/s per run; A: the baseline. A change between stars: faultline's\n",
                  "verdict says the kernels differ (paired Hodges-Lehmann, alpha ",
                  Printf("%g", report.alpha()), " after BH).\n");
  return Finish(out, options);
}

std::string RenderLkp(const v1::GetReportResponse& report, const MailOptions& options) {
  const std::string pm = options.utf8 ? "±" : "+-";
  std::string out = "faultline " + ReportTitle(report) + "\n" + NeedRuns(report);
  if (report.comparisons().empty()) return Finish(out, options);
  const std::string rule(89, '=');
  auto value = [](double v) {
    if (!std::isfinite(v)) return std::string("-");
    if (v == 0) return std::string("0.00");
    if (std::fabs(v) >= 1e7 || std::fabs(v) < 0.01) return Printf("%.1e", v);
    if (std::fabs(v) >= 100) return Printf("%.0f", v);
    return Printf("%.2f", v);
  };
  auto stddev = [&](const std::vector<double>& v) {
    if (v.empty()) return std::string("    n/a");  // the report holds no such runs
    const RunStats s = StatsOf(v);
    if (s.n < 2 || s.mean == 0) return std::string(7, ' ');
    const double pct = s.sd / std::fabs(s.mean) * 100;
    if (pct < 2) return std::string(7, ' ');  // as LKP: below 2% nothing is shown
    return Printf(" %s%3.0f%%", pm.c_str(), pct);
  };
  auto commit_of = [&](const std::string& label) {
    for (const v1::Build& b : report.builds()) {
      if (b.label() == label && !b.base_commit().empty()) {
        return b.base_commit().substr(0, 12) + (b.series_size() > 0 ? "+" : "");
      }
    }
    return spec::SpecLabel(label);
  };
  const v1::JobSpec& spec = report.job().spec();
  for (const v1::Comparison& c : report.comparisons()) {
    // The parameter line, as LKP's: keys joined by '/', then their values.
    std::vector<std::string> keys = {"board", "benchmark"}, values = {c.board(), spec.benchmark()};
    if (!spec.memcg().memory_max().empty()) {
      keys.push_back("memory_max");
      values.push_back(spec.memcg().memory_max());
    }
    for (const auto& [k, v] :
         std::map<std::string, std::string>(spec.params().begin(), spec.params().end())) {
      keys.push_back(k);
      values.push_back(v);
    }
    for (const std::string& k : report.matrix_keys()) {
      auto it = c.cell().find(k);
      if (it == c.cell().end()) continue;
      keys.push_back(k);
      values.push_back(it->second);
    }
    absl::StrAppend(&out, "\n", rule, "\n", absl::StrJoin(keys, "/"), ":\n  ",
                    absl::StrJoin(values, "/"), "\n\n");
    absl::StrAppend(
        &out,
        Printf("%16s %27s", commit_of(c.baseline()).c_str(), commit_of(c.candidate()).c_str()),
        "\n---------------- ---------------------------\n",
        "         %stddev     %change         %stddev\n",
        "             \\          |                \\\n");
    const auto a = Throughputs(report, c, c.baseline());
    const auto b = Throughputs(report, c, c.candidate());
    const std::string change = Significant(v1::VerdictOf(c)).empty() ? "" : FormatChange(c.ratio());
    absl::StrAppend(
        &out,
        Printf("%10s%s %10s %10s%s", value(c.baseline_median()).c_str(), stddev(a).c_str(),
               change.c_str(), value(c.candidate_median()).c_str(), stddev(b).c_str()),
        "  ", spec.benchmark(), ".throughput\n");
    int shown = 0;
    for (const v1::CounterComparison& k : c.counters()) {
      if (!k.significant() || !k.only_on().empty() || IsFrameCounter(k.name())) continue;
      if (shown++ == kMaxCountersPerCell) break;
      std::vector<double> ka, kb;
      for (const v1::RunResult& r : report.run_results()) {
        auto it = r.counters().find(k.name());
        if (it == r.counters().end() || r.board() != c.board() || !SameCell(r.cell(), c.cell())) {
          continue;
        }
        // Per unit, as the medians: per round, or per second of the run.
        const double seconds =
            r.throughput() > 0 ? static_cast<double>(r.rounds()) / r.throughput() : 0;
        const double per = k.unit() == "second" ? seconds : static_cast<double>(r.rounds());
        if (per <= 0) continue;
        (r.kernel() == c.baseline() ? ka : kb).push_back(it->second / per);
      }
      absl::StrAppend(&out,
                      Printf("%10s%s %10s %10s%s", value(k.baseline_median()).c_str(),
                             stddev(ka).c_str(), FormatCounterChange(k).c_str(),
                             value(k.candidate_median()).c_str(), stddev(kb).c_str()),
                      "  ", k.name(), k.unit().empty() || k.unit() == "round" ? "" : "/" + k.unit(),
                      "\n");
    }
  }
  std::vector<std::string> order;
  const auto letters = KernelLetters(report, &order);
  absl::StrAppend(&out, FrameLines(report, letters, options.width),
                  LockTables(report, letters, options.width));
  absl::StrAppend(&out, "\nMedians over the runs (counters per round); %change only where\n",
                  "faultline's verdict says the kernels differ (counters: q <= ",
                  Printf("%g", report.alpha()), ").\n");
  return Finish(out, options);
}

}  // namespace faultline::report
