#include "report/html.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "faultline/v1/values.h"
#include "report/comparison.h"
#include "report/frames.h"
#include "report/html_frames.h"
#include "report/mail.h"
#include "report/median_tables.h"
#include "report/report.h"
#include "report/table.h"

namespace faultline::report {
namespace {

constexpr double kWidth = 760, kHeight = 260;
constexpr double kLeft = 70, kRight = 20, kTop = 28, kBottom = 40;
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string Escape(const std::string& s) {
  return HtmlEscape(s);
}

std::string Num(double v) {
  return Printf("%.1f", v);
}

// About five round ticks over [lo, hi].
std::vector<double> Ticks(double lo, double hi) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push_back(t);
  return out;
}

std::string TickLabel(double v) {
  if (std::fabs(v) >= 1e6) return Printf("%.3g", v);
  if (std::fabs(v - std::round(v)) < 1e-9) return Printf("%.0f", v);
  return Printf("%g", v);
}

struct Frame {
  double x0, x1, y0, y1;  // data ranges
  bool log_x = false;
  double X(double x) const {
    const double a = log_x ? std::log(x) : x, lo = log_x ? std::log(x0) : x0,
                 hi = log_x ? std::log(x1) : x1;
    return kLeft + (hi > lo ? (a - lo) / (hi - lo) : 0.5) * (kWidth - kLeft - kRight);
  }
  double Y(double y) const {
    return kHeight - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * (kHeight - kTop - kBottom);
  }
};

std::string SvgOpen(const std::string& kind, size_t points, const std::string& title,
                    const std::string& id) {
  return absl::StrCat("<svg class=\"plot\" id=\"", id, "\" data-plot=\"", kind, "\" data-points=\"",
                      points, "\" viewBox=\"0 0 ", kWidth, " ", kHeight, "\" width=\"", kWidth,
                      "\" height=\"", kHeight, "\" role=\"img\" aria-label=\"", Escape(title),
                      "\"><text x=\"", kLeft, "\" y=\"16\" class=\"t\">", Escape(title), "</text>");
}

std::string YAxis(const Frame& f, const std::string& label) {
  std::string out = absl::StrCat("<line class=\"ax\" x1=\"", kLeft, "\" y1=\"", kTop, "\" x2=\"",
                                 kLeft, "\" y2=\"", kHeight - kBottom, "\"/>");
  for (double t : Ticks(f.y0, f.y1)) {
    absl::StrAppend(&out, "<line class=\"grid\" x1=\"", kLeft, "\" x2=\"", kWidth - kRight,
                    "\" y1=\"", Num(f.Y(t)), "\" y2=\"", Num(f.Y(t)),
                    "\"/><text class=\"tick\" x=\"", kLeft - 6, "\" y=\"", Num(f.Y(t) + 4),
                    "\" text-anchor=\"end\">", TickLabel(t), "</text>");
  }
  absl::StrAppend(&out, "<text class=\"lab\" transform=\"translate(14,", kHeight / 2,
                  ") rotate(-90)\" text-anchor=\"middle\">", Escape(label), "</text>");
  return out;
}

// Ticks and their labels under the plot (whole numbers only: runs, seconds).
std::string XAxis(const Frame& f, const std::string& label) {
  std::string out =
      absl::StrCat("<line class=\"ax\" x1=\"", kLeft, "\" y1=\"", kHeight - kBottom, "\" x2=\"",
                   kWidth - kRight, "\" y2=\"", kHeight - kBottom, "\"/>");
  for (double t : Ticks(f.x0, f.x1)) {
    if (std::fabs(t - std::round(t)) > 1e-9) continue;
    absl::StrAppend(&out, "<line class=\"ax\" x1=\"", Num(f.X(t)), "\" x2=\"", Num(f.X(t)),
                    "\" y1=\"", kHeight - kBottom, "\" y2=\"", kHeight - kBottom + 4,
                    "\"/><text class=\"tick xtick\" x=\"", Num(f.X(t)), "\" y=\"",
                    kHeight - kBottom + 16, "\" text-anchor=\"middle\">", TickLabel(t), "</text>");
  }
  absl::StrAppend(&out, "<text class=\"lab\" x=\"", (kWidth + kLeft) / 2, "\" y=\"", kHeight - 6,
                  "\" text-anchor=\"middle\">", Escape(label), "</text>");
  return out;
}

std::string Legend(const std::vector<std::string>& kernels,
                   const std::map<std::string, std::string>& colour) {
  std::string out;
  double x = kWidth - kRight;
  for (auto it = kernels.rbegin(); it != kernels.rend(); ++it) {
    x -= 9 * static_cast<double>(it->size()) + 24;
    absl::StrAppend(&out, "<circle cx=\"", Num(x), "\" cy=\"12\" r=\"4\" fill=\"", colour.at(*it),
                    "\"/><text class=\"tick\" x=\"", Num(x + 8), "\" y=\"16\">", Escape(*it),
                    "</text>");
  }
  return out;
}

std::string CellName(const google::protobuf::Map<std::string, std::string>& cell,
                     const google::protobuf::RepeatedPtrField<std::string>& keys) {
  std::vector<std::string> parts;
  for (const auto& k : keys) {
    auto it = cell.find(k);
    if (it != cell.end()) parts.push_back(k + "=" + it->second);
  }
  return parts.empty() ? "" : absl::StrJoin(parts, ",");
}

// The runs of one board and cell in the order they finished.
std::string RunsPlot(const std::vector<const v1::RunResult*>& runs, const std::string& title,
                     const std::string& id, const std::vector<std::string>& kernels,
                     const std::map<std::string, std::string>& colour) {
  double lo = INFINITY, hi = -INFINITY;
  uint32_t first = UINT32_MAX, last = 0;
  for (const auto* r : runs) {
    lo = std::min(lo, r->throughput());
    hi = std::max(hi, r->throughput());
    first = std::min(first, r->order());
    last = std::max(last, r->order());
  }
  const double pad = (hi - lo) * 0.08 + 1e-9;
  Frame f{static_cast<double>(first) - 0.5, static_cast<double>(last) + 0.5,
          std::max(0.0, lo - pad), hi + pad};
  std::string out = SvgOpen("runs", runs.size(), title, id) + YAxis(f, "rounds/s") +
                    XAxis(f, "run, in the order they finished");
  for (const auto* r : runs) {
    absl::StrAppend(&out, "<circle class=\"pt\" data-kernel=\"", Escape(r->kernel()),
                    "\" data-order=\"", r->order(), "\" data-y=\"", Printf("%.6g", r->throughput()),
                    "\" cx=\"", Num(f.X(r->order())), "\" cy=\"", Num(f.Y(r->throughput())),
                    "\" r=\"4\" fill=\"", colour.at(r->kernel()), "\"><title>", Escape(r->kernel()),
                    " #", r->repetition(), ": ", Printf("%.2f", r->throughput()),
                    " rounds/s</title></circle>");
  }
  return out + Legend(kernels, colour) + "</svg>\n";
}

// Each kernel's runs side by side, the median as a bar.
std::string DistPlot(const std::map<std::string, std::vector<double>>& by_kernel,
                     const std::string& title, const std::string& id,
                     const std::vector<std::string>& kernels,
                     const std::map<std::string, std::string>& colour, const std::string& unit) {
  double lo = INFINITY, hi = -INFINITY;
  size_t n = 0;
  for (const auto& [k, v] : by_kernel) {
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      ++n;
    }
  }
  const double pad = (hi - lo) * 0.08 + 1e-9;
  Frame f{0, static_cast<double>(kernels.size()), std::max(0.0, lo - pad), hi + pad};
  std::string out = SvgOpen("dist", n, title, id) + YAxis(f, unit);
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto it = by_kernel.find(kernels[i]);
    if (it == by_kernel.end()) continue;
    const double centre = f.X(static_cast<double>(i) + 0.5);
    std::vector<double> v = it->second;
    for (size_t j = 0; j < v.size(); ++j) {
      // A deterministic spread, so equal values stay visible.
      const double dx = (static_cast<double>((j * 37) % 21) - 10) * 4;
      absl::StrAppend(&out, "<circle class=\"pt\" data-kernel=\"", Escape(kernels[i]),
                      "\" data-y=\"", Printf("%.6g", v[j]), "\" cx=\"", Num(centre + dx),
                      "\" cy=\"", Num(f.Y(v[j])), "\" r=\"3.5\" fill=\"", colour.at(kernels[i]),
                      "\" fill-opacity=\"0.7\"><title>", Printf("%.2f", v[j]), "</title></circle>");
    }
    std::sort(v.begin(), v.end());
    if (!v.empty()) {
      const double m = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
      absl::StrAppend(&out, "<line class=\"median\" x1=\"", Num(centre - 55), "\" x2=\"",
                      Num(centre + 55), "\" y1=\"", Num(f.Y(m)), "\" y2=\"", Num(f.Y(m)),
                      "\"/><text class=\"tick\" x=\"", Num(centre), "\" y=\"", kHeight - 22,
                      "\" text-anchor=\"middle\">", Escape(kernels[i]), " (median ",
                      Printf("%.2f", m), ")</text>");
    }
  }
  return out + "</svg>\n";
}

// The per-second throughput of the median run of each kernel (by its throughput).
std::string SamplesPlot(const std::vector<const v1::RunResult*>& runs, const std::string& title,
                        const std::string& id, const std::vector<std::string>& kernels,
                        const std::map<std::string, std::string>& colour) {
  std::vector<const v1::RunResult*> chosen;
  for (const std::string& k : kernels) {
    std::vector<const v1::RunResult*> mine;
    for (const auto* r : runs) {
      if (r->kernel() == k && r->samples_size() > 0) mine.push_back(r);
    }
    if (mine.empty()) continue;
    std::sort(mine.begin(), mine.end(),
              [](auto* a, auto* b) { return a->throughput() < b->throughput(); });
    chosen.push_back(mine[(mine.size() - 1) / 2]);
  }
  if (chosen.empty()) return "";
  double hi = 0;
  size_t seconds = 0, n = 0;
  for (const auto* r : chosen) {
    for (double s : r->samples()) hi = std::max(hi, s);
    seconds = std::max(seconds, static_cast<size_t>(r->samples_size()));
    n += static_cast<size_t>(r->samples_size());
  }
  Frame f{0.5, static_cast<double>(seconds) + 0.5, 0, hi * 1.08 + 1e-9};
  std::string out = SvgOpen("samples", n, title, id) + YAxis(f, "rounds in the second") +
                    XAxis(f, "second of the run");
  for (const auto* r : chosen) {
    std::string points;
    for (int s = 0; s < r->samples_size(); ++s) {
      absl::StrAppend(&points, Num(f.X(s + 1)), ",", Num(f.Y(r->samples(s))), " ");
    }
    absl::StrAppend(&out, "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"",
                    colour.at(r->kernel()), "\" points=\"", points, "\"/>");
    for (int s = 0; s < r->samples_size(); ++s) {
      absl::StrAppend(&out, "<circle class=\"pt\" data-kernel=\"", Escape(r->kernel()), "\" cx=\"",
                      Num(f.X(s + 1)), "\" cy=\"", Num(f.Y(r->samples(s))), "\" r=\"2.5\" fill=\"",
                      colour.at(r->kernel()), "\"><title>", Escape(r->kernel()), " #",
                      r->repetition(), " second ", s + 1, ": ", Printf("%.0f", r->samples(s)),
                      "</title></circle>");
    }
  }
  return out + Legend(kernels, colour) + "</svg>\n";
}

struct ForestRow {
  std::string name;
  double ratio, low, high;
};

// The x range every forest plot of a page shares: 1 and every finite estimate and bound,
// with a margin.
struct ForestScale {
  double lo = 1, hi = 1;
  void Add(const std::vector<ForestRow>& rows) {
    for (const auto& r : rows) {
      for (double v : {r.ratio, r.low, r.high}) {
        if (std::isfinite(v) && v > 0) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    }
  }
};

std::string ForestText(const ForestRow& r) {
  if (!std::isfinite(r.ratio) || !(r.ratio > 0)) return "-";
  std::string out = Printf("%.3gx", r.ratio);
  if (std::isfinite(r.low) && std::isfinite(r.high) && r.low > 0) {
    absl::StrAppend(&out, " [", Printf("%.3g", r.low), ", ", Printf("%.3g", r.high), "]");
  } else {
    absl::StrAppend(&out, " [unbounded]");
  }
  return out;
}

// Ratios B/A with their CIs on a log axis, 1 marked, each row's estimate and interval
// printed at its right; `scale` is shared by the page's plots so that they compare.
std::string ForestPlot(const std::vector<ForestRow>& rows, const std::string& title,
                       const std::string& id, const ForestScale& scale) {
  const double lo = scale.lo / 1.15, hi = scale.hi * 1.15;
  const double row_h = 18, height = kTop + row_h * static_cast<double>(rows.size()) + kBottom;
  const double left = 270, right = kWidth - 170;
  auto x = [&](double v) {
    const double a = std::log(std::clamp(v, lo, hi)), l = std::log(lo), h = std::log(hi);
    return left + (a - l) / (h - l) * (right - left);
  };
  std::string out = absl::StrCat(
      "<svg class=\"plot\" id=\"", id, "\" data-plot=\"forest\" data-points=\"", rows.size(),
      "\" data-lo=\"", Printf("%.6g", lo), "\" data-hi=\"", Printf("%.6g", hi), "\" viewBox=\"0 0 ",
      kWidth, " ", Num(height), "\" width=\"", kWidth, "\" height=\"", Num(height),
      "\" role=\"img\" aria-label=\"", Escape(title), "\"><text x=\"10\" y=\"16\" class=\"t\">",
      Escape(title), "</text>");
  absl::StrAppend(&out, "<line class=\"one\" x1=\"", Num(x(1)), "\" x2=\"", Num(x(1)), "\" y1=\"",
                  kTop - 4, "\" y2=\"", Num(height - kBottom + 4), "\"/>");
  double last_x = -1e9;
  for (double t : {0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 1.0, 1.25, 2.0, 5.0, 10.0, 20.0, 50.0,
                   100.0, 200.0, 500.0, 1000.0}) {
    if (t < lo || t > hi || x(t) - last_x < 34) continue;  // no labels on top of each other
    last_x = x(t);
    absl::StrAppend(&out, "<text class=\"tick xtick\" x=\"", Num(x(t)), "\" y=\"",
                    Num(height - kBottom + 18), "\" text-anchor=\"middle\">", Printf("%.3gx", t),
                    "</text>");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const ForestRow& r = rows[i];
    const double y = kTop + row_h * (static_cast<double>(i) + 0.5);
    absl::StrAppend(&out, "<text class=\"tick\" x=\"", left - 8, "\" y=\"", Num(y + 4),
                    "\" text-anchor=\"end\">", Escape(r.name.substr(0, 40)), "</text>");
    if (std::isfinite(r.low) && std::isfinite(r.high) && r.low > 0) {
      absl::StrAppend(&out, "<line class=\"ci\" x1=\"", Num(x(r.low)), "\" x2=\"", Num(x(r.high)),
                      "\" y1=\"", Num(y), "\" y2=\"", Num(y), "\"/>");
    }
    const double shown = std::isfinite(r.ratio) && r.ratio > 0 ? r.ratio : 1;
    absl::StrAppend(&out, "<rect class=\"pt\" x=\"", Num(x(shown) - 4), "\" y=\"", Num(y - 4),
                    "\" width=\"8\" height=\"8\"><title>", Escape(r.name), ": ",
                    Escape(ForestText(r)), "</title></rect><text class=\"tick est\" x=\"",
                    Num(right + 10), "\" y=\"", Num(y + 4), "\">", Escape(ForestText(r)),
                    "</text>");
  }
  absl::StrAppend(&out, "<text class=\"lab\" x=\"", (right + left) / 2, "\" y=\"", Num(height - 6),
                  "\" text-anchor=\"middle\">B/A with 95% CI (log scale, the same for every plot "
                  "on this page)</text>");
  return out + "</svg>\n";
}

// The seed's mmap_lock tables of a comparison as HTML tables.
std::string LockTablesHtml(const v1::Comparison& c, const std::string& heading, double alpha) {
  if (c.tables().empty()) return "";
  std::string out = absl::StrCat("<h3>mmap_lock waits, ", Escape(heading), "</h3>\n<p>",
                                 Escape(MedianTablesLegend(c, alpha)), "</p>\n");
  for (const v1::MedianTable& table : c.tables()) {
    absl::StrAppend(&out, HtmlTable(MedianTableRows(table, c.baseline(), c.candidate()), "lock",
                                    table.title() + " (" + TableUnit(table) + ")"));
  }
  return out;
}

constexpr const char* kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 820px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
pre { background: #f6f6f6; padding: 10px; overflow-x: auto; font-size: 12px; }
svg.plot { display: block; margin: 8px 0 16px; background: #fff; border: 1px solid #ddd; }
svg .t { font-size: 13px; font-weight: 600; } svg .tick { font-size: 11px; fill: #444; }
svg .lab { font-size: 11px; fill: #666; } svg .ax { stroke: #888; }
svg .grid { stroke: #eee; } svg .median { stroke: #000; stroke-width: 2; }
svg .one { stroke: #999; stroke-dasharray: 4 3; } svg .ci { stroke: #333; stroke-width: 2; }
svg rect.pt { fill: #d62728; }
table.lock { border-collapse: collapse; margin: 8px 0 16px; font-size: 12px; }
table.lock caption { text-align: left; font-weight: 600; padding: 4px 0; }
table.lock td, table.lock th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
table.lock td:first-child, table.lock th:first-child { text-align: left; }
svg.flame text.fl { font-size: 10px; fill: #222; pointer-events: none; }
)css";

// Every plot must hold the points it declares; the result is left on <body> for a test.
constexpr const char* kCheck = R"js(
(function () {
  var plots = document.querySelectorAll('svg.plot'), bad = 0;
  plots.forEach(function (svg) {
    var want = Number(svg.dataset.points), got = svg.querySelectorAll('.pt').length;
    if (want !== got) { bad++; console.error('plot ' + svg.id + ': ' + got + ' points, ' + want + ' declared'); }
  });
  document.body.dataset.checked = bad ? 'bad' : plots.length + ' plots';
})();
)js";

std::string Page(const std::string& title, const std::string& body) {
  return absl::StrCat("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>",
                      Escape(title), "</title>\n<style>", kStyle, "</style></head>\n<body>\n<h1>",
                      Escape(title), "</h1>\n", body, "<script>", kCheck,
                      "</script>\n</body></html>\n");
}

std::map<std::string, std::string> Colours(const std::vector<std::string>& kernels) {
  std::map<std::string, std::string> colour;
  for (size_t i = 0; i < kernels.size(); ++i) colour[kernels[i]] = kColours[i % 6];
  return colour;
}

}  // namespace

std::string RenderHtml(const v1::GetReportResponse& report) {
  // Kernels: the baseline first, in the job's order.
  std::vector<std::string> kernels;
  for (const auto& c : report.comparisons()) {
    if (kernels.empty()) kernels.push_back(c.baseline());
  }
  for (const auto& k : report.job().spec().kernels()) {
    if (std::find(kernels.begin(), kernels.end(), k) == kernels.end()) kernels.push_back(k);
  }
  for (const auto& r : report.run_results()) {
    if (std::find(kernels.begin(), kernels.end(), r.kernel()) == kernels.end()) {
      kernels.push_back(r.kernel());
    }
  }
  const auto colour = Colours(kernels);
  std::string body;
  // Groups of runs: board and cell, in the order first seen.
  std::vector<std::pair<std::string, const v1::RunResult*>> groups;  // key, a run of it
  std::map<std::string, std::vector<const v1::RunResult*>> runs_of;
  for (const auto& r : report.run_results()) {
    const std::string cell = CellName(r.cell(), report.matrix_keys());
    const std::string key = r.board() + (cell.empty() ? "" : ", " + cell);
    if (!runs_of.count(key)) groups.emplace_back(key, &r);
    runs_of[key].push_back(&r);
  }
  if (report.run_results().empty()) {
    body +=
        "<p>This report holds no runs: save it with <code>faultline report JOB --format json "
        "--runs</code> to draw them.</p>\n";
  }
  if (!groups.empty()) {
    body +=
        "<h2>Runs in the order they ran</h2>\n<p>Each run's throughput by when it finished, "
        "coloured by kernel: a board that drifts shows it here, whatever the medians "
        "say.</p>\n";
    int i = 0;
    for (const auto& [key, first] : groups) {
      auto runs = runs_of[key];
      std::sort(runs.begin(), runs.end(), [](auto* a, auto* b) { return a->order() < b->order(); });
      body += RunsPlot(runs, key, absl::StrCat("runs-", i++), kernels, colour);
    }
    body += "<h2>Distributions</h2>\n";
    i = 0;
    for (const auto& [key, first] : groups) {
      std::map<std::string, std::vector<double>> by_kernel;
      for (const auto* r : runs_of[key]) by_kernel[r->kernel()].push_back(r->throughput());
      body += DistPlot(by_kernel, key, absl::StrCat("dist-", i++), kernels, colour, "rounds/s");
    }
    std::string samples;
    i = 0;
    for (const auto& [key, first] : groups) {
      samples += SamplesPlot(runs_of[key], key + ": the median run of each kernel",
                             absl::StrCat("samples-", i++), kernels, colour);
    }
    if (!samples.empty()) {
      body +=
          "<h2>Second by second</h2>\n<p>The rounds completed in each second of the run "
          "whose throughput is its kernel's median: warm-up, stalls and steps within a "
          "run.</p>\n" +
          samples;
    }
  }
  if (!report.comparisons().empty()) {
    body += "<h2>What changed, B/A</h2>\n";
    std::vector<std::vector<ForestRow>> plots;
    ForestScale scale;
    for (const auto& c : report.comparisons()) {
      std::vector<ForestRow> rows = {{"throughput (rounds/s)", c.ratio(), c.ci_low(), c.ci_high()}};
      for (const auto& k : c.counters()) {
        // Differences (a run counted 0) have no ratio to draw: the text below has them.
        // Frames have a section of their own (ProfilesHtml).
        if (k.significant() && k.only_on().empty() && !IsDifference(k) &&
            !IsFrameCounter(k.name()) && rows.size() < 25) {
          rows.push_back({k.name(), k.ratio(), k.ci_low(), k.ci_high()});
        }
      }
      scale.Add(rows);
      plots.push_back(std::move(rows));
    }
    int i = 0;
    std::string locks;
    for (const auto& c : report.comparisons()) {
      const std::string cell = CellName(c.cell(), report.matrix_keys());
      const std::string heading = absl::StrCat(c.candidate(), " vs ", c.baseline(), " on ",
                                               c.board(), cell.empty() ? "" : ", " + cell);
      body += ForestPlot(plots[static_cast<size_t>(i)], heading + ": " + v1::VerdictText(c),
                         absl::StrCat("forest-", i), scale);
      ++i;
      locks += LockTablesHtml(c, heading, report.alpha());
    }
    if (!locks.empty()) body += "<h2>mmap_lock waits</h2>\n" + locks;
    body += ProfilesHtml(report);
  }
  MailOptions text;
  text.utf8 = true;
  body += "<h2>The report as text</h2>\n<pre>" + Escape(RenderMail(report, text)) + "</pre>\n";
  return Page("faultline " + ReportTitle(report), body);
}

std::string RenderComparisonHtml(const v1::Comparison& c, const std::vector<double>& a,
                                 const std::vector<double>& b, const std::string& text) {
  const std::vector<std::string> kernels = {c.baseline(), c.candidate()};
  const auto colour = Colours(kernels);
  // The samples in file order, A's and B's interleaved as line i of each (what --paired
  // assumes): drift within a file is visible.
  std::vector<v1::RunResult> runs;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    for (int side = 0; side < 2; ++side) {
      const auto& v = side == 0 ? a : b;
      if (i >= v.size()) continue;
      v1::RunResult r;
      r.set_kernel(kernels[side]);
      r.set_repetition(static_cast<uint32_t>(i + 1));
      r.set_throughput(v[i]);
      r.set_order(static_cast<uint32_t>(runs.size() + 1));
      runs.push_back(r);
    }
  }
  std::vector<const v1::RunResult*> ptrs;
  for (const auto& r : runs) ptrs.push_back(&r);
  std::string body = "<h2>Samples in file order</h2>\n" +
                     RunsPlot(ptrs, "line i of A, then line i of B", "runs-0", kernels, colour);
  body += "<h2>Distributions</h2>\n" + DistPlot({{c.baseline(), a}, {c.candidate(), b}}, "A and B",
                                                "dist-0", kernels, colour, "value");
  const std::vector<ForestRow> rows = {
      {"Hodges-Lehmann ratio", c.ratio(), c.ci_low(), c.ci_high()}};
  ForestScale scale;
  scale.Add(rows);
  body += "<h2>B/A</h2>\n" +
          ForestPlot(rows, c.candidate() + " vs " + c.baseline() + ": " + v1::VerdictText(c),
                     "forest-0", scale);
  body += "<h2>As text</h2>\n<pre>" + Escape(text) + "</pre>\n";
  return Page("faultline compare " + c.baseline() + " " + c.candidate(), body);
}

}  // namespace faultline::report
