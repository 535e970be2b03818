#include "services/cli/mail.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/cli/comparison.h"
#include "services/cli/median_tables.h"
#include "services/cli/report.h"
#include "services/cli/spec_yaml.h"
#include "services/cli/table.h"
#include "stats/statistics.h"

namespace faultline::cli {
namespace {

constexpr int kMaxCountersPerCell = 12;

std::string Fact(const v1::BoardFacts& b, const std::string& key) {
  auto it = b.facts().find(key);
  return it == b.facts().end() ? "" : it->second;
}

// "always [madvise] never" -> "madvise"; anything else as it is.
std::string Chosen(const std::string& choice) {
  const size_t open = choice.find('['), close = choice.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return choice;
  return choice.substr(open + 1, close - open - 1);
}

std::string Bytes(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return text;
  const double b = std::stod(text);
  if (b >= 1024.0 * 1024 * 1024) return Printf("%.1f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return Printf("%.0f MiB", b / (1024.0 * 1024));
  return Printf("%.0f B", b);
}

// A, B, C... in the job's kernel order, the baseline first.
std::map<std::string, std::string> KernelLetters(const v1::GetReportResponse& report,
                                                 std::vector<std::string>* order) {
  const v1::JobSpec& spec = report.job().spec();
  std::vector<std::string> kernels(spec.kernels().begin(), spec.kernels().end());
  std::string baseline = spec.baseline().empty() && !kernels.empty() ? kernels[0] : spec.baseline();
  for (const auto& c : report.comparisons()) baseline = c.baseline();
  std::vector<std::string> ordered;
  if (!baseline.empty()) ordered.push_back(baseline);
  for (const auto& k : kernels) {
    if (k != baseline) ordered.push_back(k);
  }
  std::map<std::string, std::string> letters;
  for (size_t i = 0; i < ordered.size(); ++i) {
    letters[ordered[i]] = std::string(1, static_cast<char>('A' + std::min<size_t>(i, 25)));
  }
  *order = ordered;
  return letters;
}

std::string KernelLines(const v1::GetReportResponse& report,
                        const std::map<std::string, std::string>& letters,
                        const std::vector<std::string>& order) {
  std::string out = "Kernels:\n";
  for (const std::string& label : order) {
    std::vector<const v1::Build*> builds;
    for (const v1::Build& b : report.builds()) {
      if (b.label() == label) builds.push_back(&b);
    }
    std::string line = absl::StrCat("  ", letters.at(label), " ", label, ": ");
    if (builds.empty()) {
      // Its release where every board ran one release for all of the job's kernels.
      std::set<std::string> releases;
      for (const v1::BoardFacts& b : report.boards()) releases.insert(Fact(b, "kernel.release"));
      const std::string release = releases.size() == 1 ? *releases.begin() : "";
      absl::StrAppend(
          &out, line, "a kernel installed on the boards",
          release.empty() || release.find(" | ") != std::string::npos ? "" : " (" + release + ")",
          "\n");
      continue;
    }
    const v1::Build& b = *builds.front();
    std::vector<std::string> arches;
    for (const auto* x : builds) arches.push_back(x->arch());
    if (b.state() != "done") {
      absl::StrAppend(&out, line, b.state(), " (", absl::StrJoin(arches, ", "), ")\n");
      continue;
    }
    if (!b.image_url().empty()) {
      absl::StrAppend(&out, line, b.release(), ", prebuilt, sha256 ",
                      b.image_sha256().substr(0, 12), "\n    ", b.image_url(), "\n");
      continue;
    }
    absl::StrAppend(&out, line, b.release(), " (", absl::StrJoin(arches, ", "), ")\n");
    std::string base = absl::StrCat("    ", b.ref().empty() ? "" : b.ref() + " at ",
                                    b.base_commit().substr(0, 12));
    if (b.series_size() > 0) {
      absl::StrAppend(&base, " + ", b.series_size(), b.series_size() == 1 ? " patch" : " patches");
    }
    absl::StrAppend(&out, base, ", config ", b.config_base(), " ", b.config_sha256().substr(0, 12),
                    ", ", b.compiler(), "\n");
    for (const std::string& subject : b.series()) absl::StrAppend(&out, "      ", subject, "\n");
  }
  return out;
}

std::string BoardLines(const v1::GetReportResponse& report) {
  if (report.boards().empty()) return "";
  std::string out = "Boards:\n";
  for (const v1::BoardFacts& b : report.boards()) {
    std::vector<std::string> parts;
    if (!Fact(b, "cpu.arch").empty()) parts.push_back(Fact(b, "cpu.arch"));
    const std::string cpus = Fact(b, "cpu.count"), model = Fact(b, "cpu.model");
    if (!cpus.empty()) {
      parts.push_back(absl::StrCat(cpus, " CPUs", model.empty() ? "" : " (" + model + ")"));
    }
    if (!Fact(b, "memory.total_bytes").empty()) {
      parts.push_back(Bytes(Fact(b, "memory.total_bytes")));
    }
    if (!Fact(b, "thp.enabled").empty()) parts.push_back("THP " + Chosen(Fact(b, "thp.enabled")));
    if (!Fact(b, "swap.total_bytes").empty()) {
      parts.push_back("swap " + Bytes(Fact(b, "swap.total_bytes")));
    }
    if (!Fact(b, "cgroup.version").empty()) parts.push_back("cgroup v" + Fact(b, "cgroup.version"));
    if (!Fact(b, "virt.accel").empty()) parts.push_back("virt.accel " + Fact(b, "virt.accel"));
    absl::StrAppend(&out, "  ", b.board(), ": ", absl::StrJoin(parts, ", "), "\n");
  }
  return out;
}

std::string StudyLines(const v1::GetReportResponse& report) {
  const v1::JobSpec& s = report.job().spec();
  std::string out = absl::StrCat("Study: ", s.benchmark(), ", ", s.duration(), " runs, ",
                                 s.repetitions(), " per cell and kernel");
  if (s.block_size() > 1) absl::StrAppend(&out, ", in blocks of ", s.block_size());
  absl::StrAppend(&out, "\n");
  std::vector<std::string> limits;
  if (!s.memcg().memory_max().empty()) limits.push_back("memory.max " + s.memcg().memory_max());
  if (!s.memcg().memory_high().empty()) limits.push_back("memory.high " + s.memcg().memory_high());
  if (!s.memcg().swap_max().empty()) limits.push_back("swap.max " + s.memcg().swap_max());
  if (!limits.empty()) absl::StrAppend(&out, "  memcg ", absl::StrJoin(limits, ", "), "\n");
  std::map<std::string, std::string> params(s.params().begin(), s.params().end());
  if (!params.empty()) {
    absl::StrAppend(&out, "  params ", absl::StrJoin(params, ", ", absl::PairFormatter("=")), "\n");
  }
  for (const std::string& key : report.matrix_keys()) {
    auto it = s.matrix().find(key);
    if (it == s.matrix().end()) continue;
    absl::StrAppend(&out, "  ", key, ": ", absl::StrJoin(it->second.values(), ", "), "\n");
  }
  if (!s.events().empty())
    absl::StrAppend(&out, "  events ", absl::StrJoin(s.events(), ", "), "\n");
  absl::StrAppend(&out, "  alpha ", Printf("%g", report.alpha()),
                  " after Benjamini-Hochberg, smallest change that counts ",
                  Printf("%g%%", report.min_effect() * 100), "\n");
  return out;
}

std::string CellText(const google::protobuf::Map<std::string, std::string>& cell,
                     const google::protobuf::RepeatedPtrField<std::string>& keys,
                     bool values_only) {
  std::vector<std::string> parts;
  for (const std::string& k : keys) {
    auto it = cell.find(k);
    if (it == cell.end()) continue;
    parts.push_back(values_only ? it->second : k + "=" + it->second);
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

// A ruled table indented by two; where a line would be wider than `width`, each row stacked:
// its first cell on a line, the rest beneath, after a line that names the columns.
std::string FittedTable(const Table& t, size_t width) {
  const std::string rendered = RenderRuledTable(t);
  bool fits = true;
  for (absl::string_view line : absl::StrSplit(rendered, '\n')) fits &= line.size() + 2 <= width;
  std::string out;
  if (fits) {
    for (absl::string_view line : absl::StrSplit(rendered, '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "  ", line, "\n");
    }
    return out;
  }
  // The other columns, aligned under a header of their own.
  std::vector<size_t> widths(t.headers.size(), 0);
  for (size_t i = 1; i < t.headers.size(); ++i) {
    widths[i] = t.headers[i].size();
    for (const auto& row : t.rows) widths[i] = std::max(widths[i], row[i].size());
  }
  auto rest = [&](const std::vector<std::string>& cells) {
    std::string line = "     ";
    for (size_t i = 1; i < cells.size(); ++i) {
      const bool right = i < t.right_align.size() && t.right_align[i];
      const std::string pad(widths[i] - cells[i].size(), ' ');
      absl::StrAppend(&line, " ", right ? pad + cells[i] : cells[i] + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  absl::StrAppend(&out, "  ", t.headers.front(), "\n", rest(t.headers));
  absl::StrAppend(&out, "  ", std::string(std::min<size_t>(width - 2, 40), '-'), "\n");
  for (const auto& row : t.rows) absl::StrAppend(&out, "  ", row.front(), "\n", rest(row));
  return out;
}

std::string Median(double v, uint32_t n) {
  return n == 0 || !std::isfinite(v) ? "-" : Printf("%.2f", v);
}

// One line per cell: medians, change, CI, verdict, n; a stacked form where it is too wide.
std::string ComparisonLines(const v1::GetReportResponse& report,
                            const std::map<std::string, std::string>& letters, size_t width) {
  std::set<std::string> boards;
  for (const auto& c : report.comparisons()) boards.insert(c.board());
  std::map<std::pair<std::string, std::string>, std::vector<const v1::Comparison*>> pairs;
  std::vector<std::pair<std::string, std::string>> pair_order;
  for (const auto& c : report.comparisons()) {
    auto key = std::make_pair(c.baseline(), c.candidate());
    if (!pairs.count(key)) pair_order.push_back(key);
    pairs[key].push_back(&c);
  }
  const bool one_key = report.matrix_keys_size() == 1;
  std::string out;
  for (const auto& key : pair_order) {
    const auto& cells = pairs[key];
    const std::string a = letters.count(key.first) ? letters.at(key.first) : "A";
    const std::string b = letters.count(key.second) ? letters.at(key.second) : "B";
    const bool paired =
        std::all_of(cells.begin(), cells.end(), [](auto* c) { return c->paired(); });
    absl::StrAppend(&out, "\nThroughput in ",
                    cells.front()->metric().empty() ? "rounds/s" : cells.front()->metric(),
                    " (higher is better), ", b, " vs ", a, paired ? ", paired" : "", ":\n");
    Table t;
    if (report.matrix_keys_size() > 0) {
      t.headers.push_back(one_key ? report.matrix_keys(0) : "cell");
      t.right_align.push_back(one_key);
    }
    if (boards.size() > 1) {
      t.headers.push_back("board");
      t.right_align.push_back(false);
    }
    for (const std::string& h : {a + " median", b + " median", std::string("change"),
                                 std::string("95% CI"), std::string("verdict"), std::string("n")}) {
      t.headers.push_back(h);
      t.right_align.push_back(h != "95% CI" && h != "verdict");
    }
    for (const v1::Comparison* c : cells) {
      std::vector<std::string> row;
      if (report.matrix_keys_size() > 0) {
        row.push_back(CellText(c->cell(), report.matrix_keys(), one_key));
      }
      if (boards.size() > 1) row.push_back(c->board());
      row.push_back(Median(c->baseline_median(), c->n_baseline()));
      row.push_back(Median(c->candidate_median(), c->n_candidate()));
      row.push_back(FormatChange(c->ratio()));
      row.push_back(FormatCi(c->ci_low(), c->ci_high()));
      row.push_back(c->verdict());
      row.push_back(absl::StrCat(c->n_baseline(), "/", c->n_candidate()));
      t.rows.push_back(std::move(row));
    }
    absl::StrAppend(&out, FittedTable(t, width));
  }
  return out;
}

std::string CounterLines(const v1::GetReportResponse& report,
                         const std::map<std::string, std::string>& letters, size_t width) {
  std::string out;
  for (const v1::Comparison& c : report.comparisons()) {
    std::vector<const v1::CounterComparison*> changed;
    for (const auto& k : c.counters()) {
      if (k.significant() && k.only_on().empty()) changed.push_back(&k);
    }
    if (changed.empty()) continue;
    const std::string b = letters.count(c.candidate()) ? letters.at(c.candidate()) : "B";
    const std::string a = letters.count(c.baseline()) ? letters.at(c.baseline()) : "A";
    absl::StrAppend(&out, "\nCounters that changed, ", b, " vs ", a, " per ",
                    changed.front()->unit().empty() ? "round" : changed.front()->unit(),
                    " (q <= ", Printf("%g", report.alpha()), ")");
    if (report.matrix_keys_size() > 0) {
      absl::StrAppend(&out, ", ", CellText(c.cell(), report.matrix_keys(), false));
    }
    if (report.boards_size() > 1) absl::StrAppend(&out, ", board ", c.board());
    absl::StrAppend(&out, ":\n");
    Table t;
    t.headers = {"counter", a, b, "change", "95% CI"};
    t.right_align = {false, true, true, true, false};
    int shown = 0;
    for (const auto* k : changed) {
      if (shown++ == kMaxCountersPerCell) break;
      t.rows.push_back({k->name(), Printf("%.4g", k->baseline_median()),
                        Printf("%.4g", k->candidate_median()), FormatCounterChange(*k),
                        FormatCounterCi(*k)});
    }
    absl::StrAppend(&out, FittedTable(t, width));
    const auto shown_end = changed.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(
                                                 changed.size(), kMaxCountersPerCell));
    if (std::any_of(changed.begin(), shown_end, [](auto* k) { return IsDifference(*k); })) {
      absl::StrAppend(&out, kDifferenceNote, "\n");
    }
    if (changed.size() > kMaxCountersPerCell) {
      absl::StrAppend(&out, "  ... and ", changed.size() - kMaxCountersPerCell,
                      " more (faultline report --counters all)\n");
    }
  }
  return out;
}

// The seed's mmap_lock tables of every comparison that traced them (mmap_lock_waits: true),
// each fitted to the width (stacked where a row would be wider).
std::string LockTables(const v1::GetReportResponse& report,
                       const std::map<std::string, std::string>& letters, size_t width) {
  std::string out;
  for (const v1::Comparison& c : report.comparisons()) {
    if (c.tables().empty()) continue;
    const std::string b = letters.count(c.candidate()) ? letters.at(c.candidate()) : "B";
    const std::string a = letters.count(c.baseline()) ? letters.at(c.baseline()) : "A";
    absl::StrAppend(&out, "\nmmap_lock waits, ", b, " vs ", a);
    if (report.matrix_keys_size() > 0) {
      absl::StrAppend(&out, ", ", CellText(c.cell(), report.matrix_keys(), false));
    }
    if (report.boards_size() > 1) absl::StrAppend(&out, ", board ", c.board());
    absl::StrAppend(&out, ": ", MedianTablesLegend(c, report.alpha()));
    for (const v1::MedianTable& table : c.tables()) {
      absl::StrAppend(&out, "\n", MedianTableHeading(table),
                      FittedTable(MedianTableRows(table, c.baseline(), c.candidate()), width));
    }
  }
  return out;
}

// The seeds' box tables, where they fit the width.
std::string SeedTables(const v1::GetReportResponse& report, size_t width) {
  std::string out;
  for (const ComparisonGroup& group : GroupComparisons(report)) {
    for (const auto& [title, table] :
         {std::make_pair(SamePressureTitle(group), SamePressureTable(group)),
          std::make_pair(PressureTitle(group), PressureTable(group))}) {
      if (table.rows.empty()) continue;
      const std::string box = RenderBoxTable(table);
      if (box.find('\n') > width) continue;
      absl::StrAppend(&out, "\n", title, "\n", box);
    }
  }
  if (!out.empty()) absl::StrAppend(&out, kImprovementNote, "\n");
  return out;
}

std::string Finish(std::string text, const MailOptions& options) {
  if (!options.utf8) text = ToAscii(text);
  return text;
}

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
  bool positive = true;
  for (double x : v) {
    sum += x;
    positive &= x > 0;
    if (x > 0) inv += 1 / x;
  }
  s.mean = sum / static_cast<double>(v.size());
  s.hmean = positive ? static_cast<double>(v.size()) / inv : NAN;
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

std::string Significant(const std::string& verdict) {
  return verdict == "improvement" || verdict == "regression" || verdict == "collapse" ? "*" : "";
}

}  // namespace

std::string ToAscii(std::string_view text) {
  static const std::vector<std::pair<std::string_view, std::string_view>> kMap = {
      {"±", "+-"}, {"µ", "u"}, {"μ", "u"},   {"×", "x"},  {"≤", "<="}, {"≥", ">="},
      {"–", "-"},  {"—", "-"}, {"…", "..."}, {"→", "->"}, {"δ", "d"},  {"α", "alpha"},
      {"≈", "~"},  {"’", "'"}, {"“", "\""},  {"”", "\""}, {"·", "."}};
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    bool mapped = false;
    for (const auto& [from, to] : kMap) {
      if (text.substr(i, from.size()) == from) {
        out += to;
        i += from.size();
        mapped = true;
        break;
      }
    }
    if (mapped) continue;
    size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
    out += '?';
    i += std::min(len, text.size() - i);
  }
  return out;
}

std::string FoldLines(std::string_view text, size_t width) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::string rest(line.data(), line.size());
    const size_t indent = std::min(rest.find_first_not_of(' '), rest.size());
    const std::string cont(std::min(indent + 2, width / 2), ' ');
    bool first = true;
    while (rest.size() > width) {
      size_t cut = rest.rfind(' ', width);
      const size_t floor = first ? indent : cont.size();
      if (cut == std::string::npos || cut <= floor) cut = width;  // one long word: cut it
      out += rest.substr(0, cut);
      out += '\n';
      size_t next = cut;
      while (next < rest.size() && rest[next] == ' ') ++next;
      rest = cont + rest.substr(next);
      first = false;
    }
    out += rest;
    out += '\n';
  }
  if (!out.empty()) out.pop_back();  // the split gave one piece more than there were lines
  return out;
}

std::string RenderMail(const v1::GetReportResponse& report, const MailOptions& options) {
  const size_t width = options.width;
  std::vector<std::string> order;
  const auto letters = KernelLetters(report, &order);
  std::string text = "faultline " + ReportTitle(report) + "\n\n";
  absl::StrAppend(&text, KernelLines(report, letters, order), BoardLines(report),
                  StudyLines(report));
  if (report.rows().empty()) {
    absl::StrAppend(&text, "\nNo results yet.\n");
  } else if (report.comparisons().empty()) {
    // One kernel: the medians per cell.
    absl::StrAppend(&text, "\nThroughput, rounds/s (higher is better):\n");
    Table t = ReportTable(report);
    for (absl::string_view line : absl::StrSplit(RenderRuledTable(t), '\n', absl::SkipEmpty())) {
      absl::StrAppend(&text, "  ", line, "\n");
    }
  } else {
    absl::StrAppend(&text, SeedTables(report, width), ComparisonLines(report, letters, width),
                    CounterLines(report, letters, width), LockTables(report, letters, width));
  }
  if (!report.environment_differences().empty()) {
    absl::StrAppend(&text, "\nFacts that differ between the kernels' runs (board/fact):\n");
    std::map<std::string, std::string> sorted(report.environment_differences().begin(),
                                              report.environment_differences().end());
    for (const auto& [key, value] : sorted) absl::StrAppend(&text, "  ", key, ": ", value, "\n");
  }
  for (const std::string& c : report.caveats()) absl::StrAppend(&text, "\nCaveat: ", c, "\n");
  std::string out = FoldLines(Finish(text, options), width);
  absl::StrAppend(&out,
                  "\nTo run it again, save this as study.yaml (config fragments and series\n"
                  "beside it) and run `faultline submit study.yaml`:\n\n");
  const std::vector<v1::Build> builds(report.builds().begin(), report.builds().end());
  absl::StrAppend(&out, Finish(SpecToYaml(report.job().spec(), builds, width), options));
  return out;
}

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
    std::map<std::string, std::pair<RunStats, std::string>> per;  // kernel -> stats, verdict
    per[kernels.front()] = {base, ""};
    for (const v1::Comparison* c : cs) {
      per[c->candidate()] = {StatsOf(Throughputs(report, *c, c->candidate())), c->verdict()};
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
    std::string label = letters.count(k) ? letters.at(k) + " " + SpecLabel(k) : SpecLabel(k);
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
  absl::StrAppend(&out, LockTables(report, letters, options.width));
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
    return SpecLabel(label);
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
    const std::string change = Significant(c.verdict()).empty() ? "" : FormatChange(c.ratio());
    absl::StrAppend(
        &out,
        Printf("%10s%s %10s %10s%s", value(c.baseline_median()).c_str(), stddev(a).c_str(),
               change.c_str(), value(c.candidate_median()).c_str(), stddev(b).c_str()),
        "  ", spec.benchmark(), ".throughput\n");
    int shown = 0;
    for (const v1::CounterComparison& k : c.counters()) {
      if (!k.significant() || !k.only_on().empty()) continue;
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
  absl::StrAppend(&out, LockTables(report, KernelLetters(report, &order), options.width));
  absl::StrAppend(&out, "\nMedians over the runs (counters per round); %change only where\n",
                  "faultline's verdict says the kernels differ (counters: q <= ",
                  Printf("%g", report.alpha()), ").\n");
  return Finish(out, options);
}

}  // namespace faultline::cli
