#include "report/mail.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "faultline/v1/run_options.h"
#include "faultline/v1/values.h"
#include "report/comparison.h"
#include "report/frames.h"
#include "report/mail_parts.h"
#include "report/median_tables.h"
#include "report/report.h"
#include "report/table.h"
#include "spec/spec_yaml.h"
#include "stats/statistics.h"

namespace faultline::report {
namespace {

using mail_parts::Finish;
using mail_parts::FrameLines;
using mail_parts::KernelLetters;
using mail_parts::kMaxCountersPerCell;
using mail_parts::LockTables;

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
    if (v1::BuildStateOf(b) != v1::BUILD_STATE_DONE) {
      absl::StrAppend(&out, line, v1::BuildStateText(b), " (", absl::StrJoin(arches, ", "), ")\n");
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
  if (const v1::RunOptions options = v1::RunOptionsOf(s); !options.events().empty())
    absl::StrAppend(&out, "  events ", absl::StrJoin(options.events(), ", "), "\n");
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
      row.push_back(v1::VerdictText(*c));
      row.push_back(absl::StrCat(c->n_baseline(), "/", c->n_candidate()));
      t.rows.push_back(std::move(row));
    }
    absl::StrAppend(&out, FittedTable(t, width));
  }
  return out;
}

// One comparison's counter table under `title`, B vs A per unit, at most kMaxCountersPerCell
// rows: the counters that changed (q <= alpha), or with `with_q` those that did not (q > alpha,
// each with its q).
std::string CounterTable(const v1::GetReportResponse& report, const v1::Comparison& c,
                         const std::vector<const v1::CounterComparison*>& counters,
                         const std::string& title, bool with_q,
                         const std::map<std::string, std::string>& letters, size_t width) {
  const std::string b = letters.count(c.candidate()) ? letters.at(c.candidate()) : "B";
  const std::string a = letters.count(c.baseline()) ? letters.at(c.baseline()) : "A";
  std::string out;
  absl::StrAppend(&out, "\n", title, ", ", b, " vs ", a, " per ",
                  counters.front()->unit().empty() ? "round" : counters.front()->unit(), " (q ",
                  with_q ? "> " : "<= ", Printf("%g", report.alpha()), ")");
  if (report.matrix_keys_size() > 0) {
    absl::StrAppend(&out, ", ", CellText(c.cell(), report.matrix_keys(), false));
  }
  if (report.boards_size() > 1) absl::StrAppend(&out, ", board ", c.board());
  absl::StrAppend(&out, ":\n");
  Table t;
  t.headers = {"counter", a, b, "change", "95% CI"};
  t.right_align = {false, true, true, true, false};
  if (with_q) {
    t.headers.push_back("q");
    t.right_align.push_back(true);
  }
  int shown = 0;
  for (const auto* k : counters) {
    if (shown++ == kMaxCountersPerCell) break;
    std::vector<std::string> row = {k->name(), Printf("%.4g", k->baseline_median()),
                                    Printf("%.4g", k->candidate_median()), FormatCounterChange(*k),
                                    FormatCounterCi(*k)};
    if (with_q) row.push_back(FormatPValue(k->q_value()));
    t.rows.push_back(std::move(row));
  }
  absl::StrAppend(&out, FittedTable(t, width));
  const auto shown_end = counters.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(
                                                counters.size(), kMaxCountersPerCell));
  if (std::any_of(counters.begin(), shown_end, [](auto* k) { return IsDifference(*k); })) {
    absl::StrAppend(&out, kDifferenceNote, "\n");
  }
  if (counters.size() > kMaxCountersPerCell) {
    absl::StrAppend(&out, "  ... and ", counters.size() - kMaxCountersPerCell,
                    " more (faultline report --counters all)\n");
  }
  return out;
}

// Per comparison, the counters that changed; then the perf events the study asked for
// (spec.events) that did not: on an emulated board those counters are the evidence, and a
// mail that leaves them out hides that they were measured and what they showed (with few
// runs per kernel a counter seldom reaches q <= alpha among ~30; its q says how far it was).
std::string CounterLines(const v1::GetReportResponse& report,
                         const std::map<std::string, std::string>& letters, size_t width) {
  std::set<std::string> asked;
  const v1::RunOptions options = v1::RunOptionsOf(report.job().spec());
  for (const std::string& event : options.events()) asked.insert("perf." + event);
  std::string out;
  for (const v1::Comparison& c : report.comparisons()) {
    std::vector<const v1::CounterComparison*> changed, unchanged_asked;
    for (const auto& k : c.counters()) {
      if (IsFrameCounter(k.name())) continue;
      if (k.significant() && k.only_on().empty()) {
        changed.push_back(&k);
      } else if (!k.significant() && asked.count(k.name()) > 0) {
        unchanged_asked.push_back(&k);
      }
    }
    if (!changed.empty()) {
      absl::StrAppend(
          &out, CounterTable(report, c, changed, "Counters that changed", false, letters, width));
    }
    if (!unchanged_asked.empty()) {
      absl::StrAppend(
          &out, CounterTable(report, c, unchanged_asked, "The study's events, not called changed",
                             true, letters, width));
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

}  // namespace

namespace mail_parts {

std::string Finish(std::string text, const MailOptions& options) {
  if (!options.utf8) text = ToAscii(text);
  return text;
}

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

std::string FrameLines(const v1::GetReportResponse& report,
                       const std::map<std::string, std::string>& letters, size_t width) {
  std::string out;
  for (const v1::Comparison& c : report.comparisons()) {
    int compared = 0;
    std::vector<ChangedFrame> frames = ChangedFrames(c, &compared);
    if (compared == 0) continue;
    const std::string b = letters.count(c.candidate()) ? letters.at(c.candidate()) : "B";
    const std::string a = letters.count(c.baseline()) ? letters.at(c.baseline()) : "A";
    std::string where = ", " + b + " vs " + a;
    if (report.matrix_keys_size() > 0) {
      absl::StrAppend(&where, ", ", CellText(c.cell(), report.matrix_keys(), false));
    }
    if (report.boards_size() > 1) absl::StrAppend(&where, ", board ", c.board());
    const size_t changed = frames.size();
    if (frames.size() > kMaxFramesPerCell) frames.resize(kMaxFramesPerCell);
    absl::StrAppend(&out, "\n", FramesTitle(frames, compared, where, report.alpha()));
    if (frames.empty()) continue;
    absl::StrAppend(&out, "\n", FittedTable(FrameTable(frames, a, b), width));
    if (std::any_of(frames.begin(), frames.end(),
                    [](const ChangedFrame& f) { return IsDifference(*f.counter); })) {
      absl::StrAppend(&out, kDifferenceNote, "\n");
    }
    if (changed > frames.size()) {
      absl::StrAppend(&out, "  ... and ", changed - frames.size(),
                      " more (faultline report --format csv --counters all)\n");
    }
  }
  return out;
}

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

}  // namespace mail_parts

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
                    CounterLines(report, letters, width), FrameLines(report, letters, width),
                    LockTables(report, letters, width));
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
  absl::StrAppend(&out, Finish(spec::SpecToYaml(report.job().spec(), builds, width), options));
  return out;
}

}  // namespace faultline::report
