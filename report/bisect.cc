#include "report/bisect.h"

#include <cmath>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"
#include "faultline/v1/values.h"
#include "report/table.h"

namespace faultline::report {
namespace {

std::string Short(const std::string& sha) {
  return sha.substr(0, 12);
}

// At most 7 columns (the step table's width depends on it): 0.870, 61.000, 2480, and
// 1.0e+12 for a counter that good never hit (its zero is clamped at 1e-9).
std::string Ratio(double r) {
  if (!std::isfinite(r) || r <= 0) return "-";
  if (r < 1e-3 || r >= 1e4) return Printf("%.1e", r);
  return r >= 100 ? Printf("%.0f", r) : Printf("%.3f", r);
}

std::string Ci(double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high) || high <= 0) return "-";
  return "[" + Ratio(low) + ", " + Ratio(high) + "]";
}

// " [low, high]" or nothing.
std::string CiSuffix(double low, double high) {
  const std::string ci = Ci(low, high);
  return ci == "-" ? "" : " " + ci;
}

std::string Duration(double seconds) {
  if (seconds <= 0 || !std::isfinite(seconds)) return "?";
  if (seconds < 120) return Printf("%.0f s", seconds);
  if (seconds < 7200) return Printf("%.0f min", seconds / 60);
  return Printf("%.1f h", seconds / 3600);
}

const v1::BisectCommit* CommitAt(const v1::Bisection& b, int index) {
  if (index < 0 || index >= b.request().commits_size()) return nullptr;
  return &b.request().commits(index);
}

std::string CommitName(const v1::Bisection& b, int index) {
  const auto* c = CommitAt(b, index);
  return c == nullptr ? "?" : Short(c->sha());
}

std::string MetricName(const v1::BisectRequest& r) {
  if (r.metric().empty() || r.metric() == "throughput") return "throughput (rounds/s)";
  return r.metric().substr(r.metric().find(':') + 1) + " per round";
}

std::string Verdict(const v1::BisectStep& s) {
  const v1::BisectMark outcome = v1::OutcomeOf(s);
  const v1::BisectRole role = v1::RoleOf(s);
  if (outcome == v1::BISECT_MARK_UNTESTED) return "measuring";
  if (role == v1::BISECT_ROLE_ENDPOINTS && outcome == v1::BISECT_MARK_BAD) return "differ";
  if (role == v1::BISECT_ROLE_ENDPOINTS && outcome == v1::BISECT_MARK_GOOD) return "same";
  if (role == v1::BISECT_ROLE_REVERT && outcome == v1::BISECT_MARK_BROKEN) return "no revert";
  return std::string(v1::BisectMarkName(outcome));
}

// The step's role in words, and the revert's candidate as the table names it.
std::string RoleText(const v1::BisectStep& s) {
  return std::string(v1::BisectRoleName(v1::RoleOf(s)));
}
bool IsRevert(const v1::BisectStep& s) {
  return v1::RoleOf(s) == v1::BISECT_ROLE_REVERT;
}

constexpr size_t kWidth = 80;     // every line of a bisection's text (docs/bisect.md)
constexpr size_t kMinPiece = 12;  // the least of a too long word that starts a line's end

// At most `width` bytes of `text`, not splitting a UTF-8 sequence (bytes ≥ columns).
std::string Clip(absl::string_view text, size_t width) {
  if (text.size() <= width) return std::string(text);
  size_t end = width;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(absl::StripTrailingAsciiWhitespace(text.substr(0, end)));
}

// `text` (one line) word-wrapped to 80 columns, its leading spaces kept, continuation lines
// indented by `indent` spaces. A word longer than a line (a path) is wrapped across lines,
// never cut.
std::string Fold(const std::string& text, size_t indent) {
  const size_t lead = text.find_first_not_of(' ');
  if (lead == std::string::npos) return "\n";
  std::string out;
  std::string line(lead, ' ');
  bool empty = true;  // no word on this line yet
  auto next_line = [&] {
    out += line + "\n";
    line.assign(indent, ' ');
    empty = true;
  };
  for (absl::string_view word :
       absl::StrSplit(absl::string_view(text).substr(lead), ' ', absl::SkipEmpty())) {
    // A word too long for any line (a path) starts where it is, if a little of it fits.
    const bool fits_a_line = indent + word.size() <= kWidth;
    if (!empty && line.size() + 1 + (fits_a_line ? word.size() : kMinPiece) > kWidth) {
      next_line();
    }
    if (!empty) line += ' ';
    while (line.size() + word.size() > kWidth) {
      const std::string piece = Clip(word, kWidth > line.size() ? kWidth - line.size() : 0);
      if (piece.empty()) break;  // an indent as wide as a line: nothing fits
      line += piece;
      word.remove_prefix(piece.size());
      next_line();
    }
    line.append(word.data(), word.size());
    empty = false;
  }
  return out + line + "\n";
}

// A note split into what a reader needs: the first line without the build log's place and
// the "last lines:" that introduced its tail, the first compiler "error:" line (its path
// from the tree's top), the log's last non-empty lines when there is no such line, and
// where the log is kept.
struct Reason {
  std::string head;
  std::string error;              // "build error: mm/util.c:1:36: error: ..."
  std::vector<std::string> tail;  // the log's last lines (no error line found)
  std::string log;                // the full path of the build log, if named
};

Reason Explain(const std::string& note) {
  constexpr int kTailLines = 5;
  Reason r;
  std::vector<std::string> lines = absl::StrSplit(note, '\n');
  std::string head(absl::StripAsciiWhitespace(lines.front()));
  constexpr std::string_view kLog = "log kept at ";
  if (const size_t at = head.find(kLog); at != std::string::npos) {
    const size_t from = at + kLog.size();
    const size_t end = head.find(';', from);
    r.log = head.substr(from, end == std::string::npos ? std::string::npos : end - from);
    head.erase(at, end == std::string::npos ? std::string::npos : end + 1 - at);
  }
  head = std::string(absl::StripAsciiWhitespace(head));
  head = std::string(absl::StripSuffix(head, "last lines:"));
  head = std::string(absl::StripAsciiWhitespace(head));
  while (!head.empty() && (head.back() == ';' || head.back() == ',')) head.pop_back();
  r.head = std::string(absl::StripAsciiWhitespace(head));
  for (size_t i = 1; i < lines.size(); ++i) {  // the log's lines (the first is the note's)
    const std::string& raw = lines[i];
    if (raw.find("error:") == std::string::npos || absl::StartsWith(raw, "make")) continue;
    std::string l(absl::StripAsciiWhitespace(raw));
    // kbuild's worktree: <cache>/src/<tree id>-<arch>/path/in/tree
    if (const size_t src = l.find("/src/"); src != std::string::npos && l.front() == '/') {
      const size_t top = l.find('/', src + 5);
      if (top != std::string::npos) l = l.substr(top + 1);
    }
    r.error = "build error: " + l;
    return r;
  }
  for (size_t i = lines.size(); i-- > 1 && static_cast<int>(r.tail.size()) < kTailLines;) {
    const absl::string_view l = absl::StripAsciiWhitespace(lines[i]);
    if (!l.empty()) r.tail.insert(r.tail.begin(), std::string(l));
  }
  return r;
}

// The reason's lines after its first: the build error (when `with_error`), or the log's
// last lines; then where the log is. Indented by `indent`, wrapped to 80 columns.
std::string ReasonDetail(const Reason& r, size_t indent, bool with_error) {
  const std::string pad(indent, ' ');
  std::string out;
  if (with_error && !r.error.empty()) out += Fold(pad + r.error, indent + 2);
  if (r.error.empty() && !r.tail.empty()) {
    out += Fold(pad + (r.log.empty() ? "its last lines:" : "the log's last lines:"), indent);
    for (const std::string& line : r.tail) out += Fold(pad + "  " + line, indent + 4);
  }
  if (!r.log.empty()) out += Fold(pad + "log: " + r.log, indent + 5);
  return out;
}

// Why a commit was skipped: the build's first "error:" line, else the reason's first line
// with the log's last lines; and the log's full path.
std::string WhySkipped(const std::string& prefix, const std::string& note, size_t indent) {
  const Reason r = Explain(note);
  return Fold(prefix + (r.error.empty() ? r.head : r.error), indent) +
         ReasonDetail(r, indent, /*with_error=*/false);
}

// The two most common causes of a stopped bisection, in the user's words.
std::string Summary(const v1::Bisection& b) {
  switch (v1::BisectionStateOf(b)) {
    case v1::BISECTION_STATE_RUNNING:
      return absl::StrCat("running (", std::string(v1::BisectPhaseName(v1::BisectPhaseOf(b))), ")");
    case v1::BISECTION_STATE_CANCELLED:
      return "cancelled";
    case v1::BISECTION_STATE_FAILED:
      return "failed: " + Explain(b.failure()).head;
    default:
      break;
  }
  if (b.culprit() >= 0) {
    const v1::BisectMark confirmation = v1::ConfirmationOf(b);
    if (confirmation == v1::BISECT_MARK_BAD) return "done: first bad commit found and confirmed";
    if (confirmation == v1::BISECT_MARK_UNTESTED) {
      return "done: first bad commit found (not confirmed)";
    }
    return absl::StrCat("done: first bad commit found, NOT confirmed (",
                        std::string(v1::BisectMarkName(confirmation)), ")");
  }
  return "done: skipped commits leave " + std::to_string(b.candidates_size()) + " candidates";
}

// Kernels whose build failed (a commit, or the reverted bad end), counted once each.
int FailedBuilds(const v1::Bisection& b) {
  std::set<std::string> failed;
  for (const auto& s : b.steps()) {
    if (!v1::BuildFailedOf(s)) continue;
    failed.insert(IsRevert(s) ? "revert" : std::to_string(s.candidate()));
  }
  return static_cast<int>(failed.size());
}

// "6 kernels built" (only builds that succeeded: the controller's count holds every kernel
// a step asked for) and ", 1 failed to build".
std::string KernelsBuilt(const v1::Bisection& b) {
  const int failed = FailedBuilds(b);
  const int built = std::max(0, static_cast<int>(b.kernels()) - failed);
  std::string out = absl::StrCat(built, built == 1 ? " kernel built" : " kernels built");
  if (failed > 0) absl::StrAppend(&out, " (", failed, " failed to build)");
  return out;
}

// The command line, split into shell words (quotes and backslash escapes kept as typed).
std::vector<std::string> ShellWords(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, escaped = false, any = false;
  for (char c : command) {
    if (escaped) {
      word += c;
      escaped = false;
    } else if (quoted) {
      word += c;
      quoted = c != '\'';
    } else if (c == ' ') {
      if (any) words.push_back(word);
      word.clear();
      any = false;
      continue;
    } else {
      word += c;
      quoted = c == '\'';
      escaped = c == '\\';
    }
    any = true;
  }
  if (any) words.push_back(word);
  return words;
}

// `command` as shell lines of at most 80 columns, continued with " \": the first line after
// `prefix`, the next ones indented by 4. An option stays on one line with its value. A word
// too long for any line is continued with a backslash-newline inside it (closing and
// reopening its quotes), its rest at the next line's start: pasted into a shell it is the
// same command.
std::string WrapCommand(const std::string& prefix, const std::string& command) {
  constexpr size_t kIndent = 4;
  const std::vector<std::string> words = ShellWords(command);
  std::vector<std::string> units;  // what stays on one line, if it fits in one
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const bool takes_value = absl::StartsWith(w, "-") && w.find('=') == std::string::npos &&
                             i + 1 < words.size() && !absl::StartsWith(words[i + 1], "-");
    units.push_back(takes_value ? w + " " + words[++i] : w);
  }
  std::string out;
  std::string line = prefix;
  bool empty = true;
  for (const std::string& unit : units) {
    // A unit too long for any line starts where it is, if a little of it fits.
    const bool fits_a_line = kIndent + unit.size() + 2 <= kWidth;
    if (!empty && line.size() + 1 + (fits_a_line ? unit.size() : kMinPiece) + 2 > kWidth) {
      out += line + " \\\n";
      line.assign(kIndent, ' ');
      empty = true;
    }
    if (!empty) line += ' ';
    empty = false;
    if (line.size() + unit.size() + 2 <= kWidth) {
      line += unit;
      continue;
    }
    // Longer than a line: cut where a backslash-newline may go (not inside an escape; inside
    // quotes, closing them before and reopening after), as late as the line allows.
    std::vector<bool> quoted(unit.size() + 1, false), escaped(unit.size() + 1, false);
    for (size_t i = 0; i < unit.size(); ++i) {
      const char c = unit[i];
      quoted[i + 1] = quoted[i] ? c != '\'' : (!escaped[i] && c == '\'');
      escaped[i + 1] = !quoted[i] && !escaped[i] && c == '\\';
    }
    size_t start = 0;
    while (line.size() + (unit.size() - start) + 2 > kWidth) {
      size_t cut = 0;
      for (size_t i = start + 1; i < unit.size(); ++i) {
        if (!escaped[i] && line.size() + (i - start) + (quoted[i] ? 2 : 1) <= kWidth) cut = i;
      }
      if (cut == 0) break;  // no room at all: the rest goes as it is
      out += line + unit.substr(start, cut - start) + (quoted[cut] ? "'\\\n" : "\\\n");
      line = quoted[cut] ? "'" : "";
      start = cut;
    }
    line += unit.substr(start);
  }
  return out + line + "\n";
}

}  // namespace

std::string BisectMetricName(const v1::BisectRequest& r) {
  return MetricName(r);
}

std::string BisectCommitName(const v1::Bisection& b, int index) {
  return CommitName(b, index);
}

std::string FormatBisectProgress(const v1::Bisection& b) {
  const std::string phase(v1::BisectPhaseName(v1::BisectPhaseOf(b)));
  const std::string state(v1::BisectionStateName(v1::BisectionStateOf(b)));
  std::string line = absl::StrCat("bisection ", b.id(), ": ", phase);
  if (v1::BisectionStateOf(b) != v1::BISECTION_STATE_RUNNING) {
    // "done" and "failed" are both a state and a phase: said once.
    return state == phase ? line : absl::StrCat(line, " (", state, ")");
  }
  if (v1::BisectPhaseOf(b) == v1::BISECT_PHASE_BISECTING) {
    absl::StrAppend(&line, ", ", b.untested(), " commits left between ",
                    CommitName(b, b.range_good()), " (good) and ", CommitName(b, b.range_bad()),
                    " (bad)");
  }
  if (b.steps_size() > 0) {
    const auto& s = b.steps(b.steps_size() - 1);
    absl::StrAppend(&line, "; ", RoleText(s), " ",
                    IsRevert(s) ? "bad-revert" : CommitName(b, s.candidate()), ": ", s.n(),
                    " reps");
  }
  absl::StrAppend(&line, "; ", KernelsBuilt(b), ", ", b.runs(), " runs, ~", b.steps_left(),
                  " steps / ", Duration(b.seconds_left()), " left");
  return line;
}

std::string RenderBisection(const v1::Bisection& b, bool steps) {
  const v1::BisectRequest& r = b.request();
  const int n = r.commits_size();
  std::string out = Fold(absl::StrCat("bisection ", b.id(), ": ", Summary(b)), 4);
  if (v1::BisectionStateOf(b) == v1::BISECTION_STATE_FAILED)
    out += ReasonDetail(Explain(b.failure()), 4, /*with_error=*/true);
  if (n >= 2) {
    absl::StrAppend(&out, "  good ", CommitName(b, 0), "  ", Clip(r.commits(0).subject(), 58),
                    "\n  bad  ", CommitName(b, n - 1), "  ", Clip(r.commits(n - 1).subject(), 58),
                    "\n");
  }
  absl::StrAppend(&out, Fold(absl::StrCat("  ", n - 1, " commits, tree ", r.tree()), 4));
  std::string metric = absl::StrCat("  metric ", MetricName(r), ", board ", r.board());
  for (const auto& [k, v] : r.cell()) absl::StrAppend(&metric, ", ", k, "=", v);
  absl::StrAppend(&out, Fold(metric, 4));
  if (b.steps_size() > 0 && v1::OutcomeOf(b.steps(0)) == v1::BISECT_MARK_BAD) {
    // d and its CI from one source: every ln(bad/good) measured, the endpoints' and the
    // bad end's in every step against good (the controller's display fields).
    absl::StrAppend(&out, Fold(absl::StrCat("  bad/good ", Ratio(std::exp(b.effect())), ", 99% CI ",
                                            Ci(std::exp(b.effect_low()), std::exp(b.effect_high())),
                                            " (both ends in every step so far)"),
                               4));
  }
  absl::StrAppend(&out, Fold(absl::StrCat("  ", KernelsBuilt(b), ", ", b.runs(), " runs (",
                                          Duration(b.board_seconds()), " measured), ",
                                          Duration(b.wall_seconds()), " in all"),
                             4));
  if (b.culprit() >= 0) {
    const auto* c = CommitAt(b, b.culprit());
    absl::StrAppend(&out, "\nFirst bad commit: ", c->sha(), "\n", Fold("    " + c->subject(), 4),
                    Fold("    Author: " + c->author(), 12));
    for (const auto& s : b.steps()) {
      const v1::BisectMark outcome = v1::OutcomeOf(s);
      const std::string said = std::string(v1::BisectMarkName(outcome));
      if (v1::RoleOf(s) == v1::BISECT_ROLE_CONFIRM) {
        absl::StrAppend(
            &out, Fold(absl::StrCat(
                           "Confirmed against its parent ", CommitName(b, s.reference()), ": ",
                           outcome == v1::BISECT_MARK_BAD ? "yes" : "no (" + said + ")", ", ratio ",
                           Ratio(s.ratio()), CiSuffix(s.ci_low(), s.ci_high()), ", n=", s.n()),
                       2));
      }
      if (IsRevert(s)) {
        if (outcome == v1::BISECT_MARK_BROKEN) {
          absl::StrAppend(
              &out, WhySkipped("Reverted on the bad end: could not be measured: ", s.note(), 2));
          continue;
        }
        const std::string what = outcome == v1::BISECT_MARK_GOOD
                                     ? "like good (the revert removes the regression)"
                                 : outcome == v1::BISECT_MARK_BAD ? "still like bad"
                                                                  : said;
        absl::StrAppend(&out,
                        Fold(absl::StrCat("Reverted on the bad end: ", what, ", ratio vs good ",
                                          Ratio(s.ratio()), CiSuffix(s.ci_low(), s.ci_high())),
                             2));
      }
    }
  } else if (b.candidates_size() > 0) {
    absl::StrAppend(&out, "\nThe first bad commit is one of (the others could not be tested):\n");
    for (int i : b.candidates()) {
      const auto* c = CommitAt(b, i);
      const std::string mark =
          absl::StrCat("  [", std::string(v1::BisectMarkName(v1::CommitMarkOf(b, i))), "]");
      absl::StrAppend(&out, "  ", Short(c->sha()), "  ",
                      Clip(c->subject(), kWidth - 16 - mark.size()), mark, "\n");
    }
  }
  if (steps) {
    Table t;
    t.headers = {"#", "role", "commit", "vs", "ratio", "95% CI", "n", "verdict"};
    t.right_align = {true, false, false, false, true, false, true, false};
    int i = 0;
    for (const auto& s : b.steps()) {
      // At most 80 columns whatever it holds: "ends" for the endpoints, "parent" for the
      // culprit's (named above), ratios of at most 7 columns.
      const bool ends = v1::RoleOf(s) == v1::BISECT_ROLE_ENDPOINTS;
      t.rows.push_back({std::to_string(i++), ends ? "ends" : RoleText(s),
                        IsRevert(s) ? "bad-rev" : CommitName(b, s.candidate()),
                        s.reference() == 0 ? "good" : "parent", Ratio(s.ratio()),
                        Ci(s.ci_low(), s.ci_high()), std::to_string(s.n()), Verdict(s)});
    }
    absl::StrAppend(&out, "\n", RenderRuledTable(t));
    bool no_ci = false;
    for (const auto& s : b.steps()) no_ci |= s.n() > 0 && s.n() < 6;
    if (no_ci) {
      absl::StrAppend(&out,
                      "  (no 95% CI below 6 repetitions; the verdicts are the sequential "
                      "tests')\n");
    }
    for (const auto& s : b.steps()) {
      if (v1::OutcomeOf(s) == v1::BISECT_MARK_BROKEN && v1::RoleOf(s) == v1::BISECT_ROLE_STEP) {
        absl::StrAppend(&out,
                        WhySkipped(absl::StrCat("  ", CommitName(b, s.candidate()), " skipped: "),
                                   s.note(), 4));
      }
    }
  }
  if (!r.command().empty()) absl::StrAppend(&out, "\n", WrapCommand("Reproduce: ", r.command()));
  return out;
}

}  // namespace faultline::report
