#include "services/cli/bisect.h"

#include <grpcpp/client_context.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"
#include "kbuild/process.h"
#include "services/cli/spec_file.h"
#include "services/cli/table.h"

namespace faultline::cli {
namespace {

constexpr int kMaxCommits = 4096;

absl::Status Usage(const std::string& what) {
  return absl::InvalidArgumentError(what);
}

absl::StatusOr<std::string> Git(const std::string& tree, std::vector<std::string> args) {
  args.insert(args.begin(), {"git", "-C", tree});
  kbuild::Command command;
  command.argv = std::move(args);
  absl::StatusOr<kbuild::Finished> run = kbuild::Run(command);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::FailedPreconditionError(
        std::string(absl::StripAsciiWhitespace(kbuild::Tail(run->output, 3))));
  }
  return run->output;
}

absl::StatusOr<std::string> CommitOf(const std::string& tree, const std::string& ref,
                                     const std::string& flag) {
  if (ref.empty() || ref.front() == '-') return Usage(flag + ": a ref is needed");
  auto out = Git(tree, {"rev-parse", "--verify", "--quiet", ref + "^{commit}"});
  if (!out.ok()) return Usage(absl::StrCat(flag, ": '", ref, "' is not a commit in ", tree));
  return std::string(absl::StripAsciiWhitespace(*out));
}

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
  if (s.outcome() == "untested") return "measuring";
  if (s.role() == "endpoints" && s.outcome() == "bad") return "differ";
  if (s.role() == "endpoints" && s.outcome() == "good") return "same";
  if (s.role() == "revert" && s.outcome() == "broken") return "no revert";
  return s.outcome();
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
  if (b.state() == "running") return "running (" + b.phase() + ")";
  if (b.state() == "cancelled") return "cancelled";
  if (b.state() == "failed") return "failed: " + Explain(b.failure()).head;
  if (b.culprit() >= 0) {
    if (b.confirmation() == "bad") return "done: first bad commit found and confirmed";
    if (b.confirmation() == "untested") return "done: first bad commit found (not confirmed)";
    return "done: first bad commit found, NOT confirmed (" + b.confirmation() + ")";
  }
  return "done: skipped commits leave " + std::to_string(b.candidates_size()) + " candidates";
}

// A failed build in a note (the controller's "kernel LABEL: build N (ARCH) failed: ...").
bool IsBuildFailure(const std::string& note) {
  const absl::string_view head = absl::string_view(note).substr(0, note.find('\n'));
  return absl::StrContains(head, ": build ") && absl::StrContains(head, ") failed: ");
}

// Kernels whose build failed (a commit, or the reverted bad end), counted once each.
int FailedBuilds(const v1::Bisection& b) {
  std::set<std::string> failed;
  for (const auto& s : b.steps()) {
    if (s.outcome() != "broken" || !IsBuildFailure(s.note())) continue;
    failed.insert(s.role() == "revert" ? "revert" : std::to_string(s.candidate()));
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

absl::StatusOr<std::vector<v1::BisectCommit>> ResolveCommits(const std::string& tree,
                                                             const std::string& good,
                                                             const std::string& bad) {
  if (tree.empty()) return Usage("--tree: the kernel git tree is needed");
  if (auto top = Git(tree, {"rev-parse", "--git-dir"}); !top.ok()) {
    return Usage("--tree: " + tree + " is not a git repository");
  }
  auto g = CommitOf(tree, good, "--good");
  if (!g.ok()) return g.status();
  auto b = CommitOf(tree, bad, "--bad");
  if (!b.ok()) return b.status();
  if (*g == *b) return Usage("--good and --bad are the same commit (" + Short(*g) + ")");
  if (auto anc = Git(tree, {"merge-base", "--is-ancestor", *g, *b}); !anc.ok()) {
    return Usage(absl::StrCat("--good ", good, " (", Short(*g), ") is not an ancestor of --bad ",
                              bad, " (", Short(*b), ")"));
  }
  // good, then every first-parent commit up to bad: NUL-separated fields, one per line.
  auto listed = Git(tree, {"log", "--first-parent", "--reverse", "--format=%H%x00%s%x00%an <%ae>",
                           absl::StrCat(*g, "..", *b)});
  if (!listed.ok()) return listed.status();
  auto head = Git(tree, {"log", "-1", "--format=%H%x00%s%x00%an <%ae>", *g});
  if (!head.ok()) return head.status();
  std::vector<v1::BisectCommit> commits;
  for (absl::string_view line : absl::StrSplit(*head + *listed, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits('\0', 2));
    if (f.size() != 3) continue;
    v1::BisectCommit c;
    c.set_sha(f[0]);
    c.set_subject(f[1].substr(0, 1024));
    c.set_author(f[2].substr(0, 512));
    commits.push_back(std::move(c));
  }
  if (commits.size() < 2 || commits.back().sha() != *b) {
    return Usage(absl::StrCat("--bad ", bad, " is not on the first-parent line from ", good,
                              " (bisect along a branch's first parents)"));
  }
  if (static_cast<int>(commits.size()) - 1 > kMaxCommits) {
    return Usage(absl::StrCat(commits.size() - 1,
                              " commits from --good to --bad, over the limit "
                              "of ",
                              kMaxCommits, ": narrow the range"));
  }
  return commits;
}

absl::StatusOr<v1::BisectRequest> MakeBisectRequest(const BisectArgs& args, v1::JobSpec spec) {
  v1::BisectRequest r;
  // The study's own kernels (if it brings any) give the tree and the config.
  const v1::KernelSource* source = nullptr;
  if (!spec.kernel_sources().empty()) {
    auto it = spec.kernel_sources().find(spec.baseline());
    if (it == spec.kernel_sources().end() && spec.kernels_size() > 0) {
      it = spec.kernel_sources().find(spec.kernels(0));
    }
    if (it == spec.kernel_sources().end()) it = spec.kernel_sources().begin();
    source = &it->second;
  }
  r.set_tree(!args.tree.empty() ? args.tree : source != nullptr ? source->tree() : "");
  if (!args.config_base.empty()) {
    r.set_config_base(args.config_base);
  } else if (source != nullptr) {
    r.set_config_base(source->config_base());
  }
  if (!args.fragments.empty()) {
    for (const std::string& path : args.fragments) {
      std::ifstream file(path);
      std::stringstream text;
      text << file.rdbuf();
      if (!file) return Usage("--fragment: cannot read " + path);
      auto* f = r.add_fragments();
      f->set_name(path.substr(path.rfind('/') + 1));
      f->set_content(text.str());
    }
  } else if (source != nullptr) {
    *r.mutable_fragments() = source->fragments();
  }
  auto commits = ResolveCommits(r.tree(), args.good, args.bad);
  if (!commits.ok()) return commits.status();
  for (auto& c : *commits) *r.add_commits() = std::move(c);
  if (args.metric == "throughput" || args.metric.empty()) {
    r.set_metric("throughput");
  } else {
    std::string name = args.metric;
    if (absl::StartsWith(name, "counter:")) name = name.substr(8);
    if (absl::StartsWith(name, "counter ")) name = name.substr(8);
    r.set_metric("counter:" + name);
  }
  for (const std::string& kv : args.cells) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("--cell: KNOB=VALUE, got '" + kv + "'");
    (*r.mutable_cell())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  r.set_board(args.board);
  r.set_arch(args.arch);
  r.set_block(args.block);
  r.set_max_pairs(args.max_pairs);
  r.set_error(args.error);
  r.set_no_confirm(args.no_confirm);
  r.set_no_revert(args.no_revert);
  r.set_command(args.command);
  if (args.from_job != 0) r.set_origin("job " + std::to_string(args.from_job));
  if (args.from_change != 0) r.set_origin("change point " + std::to_string(args.from_change));
  *r.mutable_spec() = std::move(spec);
  return r;
}

std::string FormatBisectProgress(const v1::Bisection& b) {
  std::string line = absl::StrCat("bisection ", b.id(), ": ", b.phase());
  if (b.state() != "running") {
    return b.state() == b.phase() ? line : absl::StrCat(line, " (", b.state(), ")");
  }
  if (b.phase() == "bisecting") {
    absl::StrAppend(&line, ", ", b.untested(), " commits left between ",
                    CommitName(b, b.range_good()), " (good) and ", CommitName(b, b.range_bad()),
                    " (bad)");
  }
  if (b.steps_size() > 0) {
    const auto& s = b.steps(b.steps_size() - 1);
    absl::StrAppend(&line, "; ", s.role(), " ",
                    s.role() == "revert" ? "bad-revert" : CommitName(b, s.candidate()), ": ", s.n(),
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
  if (b.state() == "failed") out += ReasonDetail(Explain(b.failure()), 4, /*with_error=*/true);
  if (n >= 2) {
    absl::StrAppend(&out, "  good ", CommitName(b, 0), "  ", Clip(r.commits(0).subject(), 58),
                    "\n  bad  ", CommitName(b, n - 1), "  ", Clip(r.commits(n - 1).subject(), 58),
                    "\n");
  }
  absl::StrAppend(&out, Fold(absl::StrCat("  ", n - 1, " commits, tree ", r.tree()), 4));
  std::string metric = absl::StrCat("  metric ", MetricName(r), ", board ", r.board());
  for (const auto& [k, v] : r.cell()) absl::StrAppend(&metric, ", ", k, "=", v);
  absl::StrAppend(&out, Fold(metric, 4));
  if (b.steps_size() > 0 && b.steps(0).outcome() == "bad") {
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
      if (s.role() == "confirm") {
        absl::StrAppend(
            &out,
            Fold(absl::StrCat("Confirmed against its parent ", CommitName(b, s.reference()), ": ",
                              s.outcome() == "bad" ? "yes" : "no (" + s.outcome() + ")", ", ratio ",
                              Ratio(s.ratio()), CiSuffix(s.ci_low(), s.ci_high()), ", n=", s.n()),
                 2));
      }
      if (s.role() == "revert") {
        if (s.outcome() == "broken") {
          absl::StrAppend(
              &out, WhySkipped("Reverted on the bad end: could not be measured: ", s.note(), 2));
          continue;
        }
        const std::string what = s.outcome() == "good"
                                     ? "like good (the revert removes the regression)"
                                 : s.outcome() == "bad" ? "still like bad"
                                                        : s.outcome();
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
      const std::string mark = absl::StrCat("  [", b.marks(i), "]");
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
      t.rows.push_back({std::to_string(i++), s.role() == "endpoints" ? "ends" : s.role(),
                        s.role() == "revert" ? "bad-rev" : CommitName(b, s.candidate()),
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
      if (s.outcome() == "broken" && s.role() == "step") {
        absl::StrAppend(&out,
                        WhySkipped(absl::StrCat("  ", CommitName(b, s.candidate()), " skipped: "),
                                   s.note(), 4));
      }
    }
  }
  if (!r.command().empty()) absl::StrAppend(&out, "\n", WrapCommand("Reproduce: ", r.command()));
  return out;
}

namespace {

// The tree and config of a kernel a bisection starts from (--from, --from-change): one built
// from a tree, without a series; what the arguments already say is kept.
absl::Status TakeSource(const v1::KernelSource& source, const std::string& what, BisectArgs& args) {
  if (source.tree().empty() || !source.series().empty()) {
    return Usage(absl::StrCat(what,
                              " must be built from a tree without a series (bisect a series by "
                              "giving its patches as commits of a branch)"));
  }
  if (!source.fragments().empty() && args.fragments.empty()) {
    return Usage(absl::StrCat(what,
                              ": the job stored its config fragments by name only; pass them "
                              "with --fragment"));
  }
  if (args.tree.empty()) args.tree = source.tree();
  if (args.config_base.empty()) args.config_base = source.config_base();
  return absl::OkStatus();
}

int Refuse(const CliEnv& env, const absl::Status& s) {
  *env.err << "faultline: " << OneLine(std::string(s.message()), "; ") << "\n";
  return kExitUsage;
}

}  // namespace

absl::Status FromJob(const v1::Job& job, BisectArgs& args, v1::JobSpec& spec) {
  spec = job.spec();
  const std::string what = absl::StrCat("--from ", job.id());
  // Two kernels of one tree at two refs: the baseline is good, the other bad.
  const std::string base =
      spec.baseline().empty() && spec.kernels_size() > 0 ? spec.kernels(0) : spec.baseline();
  const v1::KernelSource *a = nullptr, *b = nullptr;
  for (const auto& [label, source] : spec.kernel_sources()) {
    if (label == base) {
      a = &source;
    } else if (b == nullptr) {
      b = &source;
    }
  }
  if (a == nullptr || b == nullptr || a->tree().empty() || b->tree() != a->tree() ||
      !b->series().empty()) {
    return Usage(what +
                 ": the job must compare two refs of one tree without series (bisect a series "
                 "by giving its patches as commits of a branch)");
  }
  if (absl::Status s = TakeSource(*a, what, args); !s.ok()) return s;
  if (args.good.empty()) args.good = a->ref();
  if (args.bad.empty()) args.bad = b->ref();
  spec.clear_kernel_sources();
  return absl::OkStatus();
}

absl::Status FromChange(const v1::ChangePoint& cp, const v1::Job& before,
                        const std::vector<v1::Build>& before_builds, const v1::Job& after,
                        const std::vector<v1::Build>& after_builds, BisectArgs& args,
                        v1::JobSpec& spec) {
  const std::string what = absl::StrCat("--from-change ", cp.id());
  if (cp.previous_job_id() == 0) {
    return Usage(what +
                 ": the change point does not name the job before it (found by an older "
                 "controller); bisect with --tree, --good and --bad");
  }
  struct Side {
    const char* role;
    const v1::Job* job;
    const std::vector<v1::Build>* builds;
    std::string commit;
  };
  Side sides[] = {{"good", &before, &before_builds, ""}, {"bad", &after, &after_builds, ""}};
  for (Side& side : sides) {
    const v1::JobSpec& s = side.job->spec();
    // The kernel's label in the job: its series name, or that name with the slot of a
    // schedule that follows a branch ("LABEL@<hash>+<slot>").
    std::string label;
    for (const auto& k : s.kernels()) {
      if (k == cp.kernel() || absl::StartsWith(k, cp.kernel() + "+")) label = k;
    }
    auto it = s.kernel_sources().find(label);
    if (label.empty() || it == s.kernel_sources().end()) {
      return Usage(absl::StrCat(what, ": job ", side.job->id(), " does not build kernel ",
                                cp.kernel(),
                                " from a tree (a label installed on the board?); bisect with "
                                "--tree, --good and --bad"));
    }
    if (absl::Status st =
            TakeSource(it->second, absl::StrCat(what, ": kernel ", cp.kernel()), args);
        !st.ok()) {
      return st;
    }
    if (it->second.tree() != args.tree) {
      return Usage(absl::StrCat(what, ": jobs ", before.id(), " and ", after.id(),
                                " built the kernel from different trees"));
    }
    for (const v1::Build& b : *side.builds) {
      if (b.label() == label && b.arch() == cp.arch() && b.state() == "done") {
        side.commit = b.base_commit();
      }
    }
    if (side.commit.empty()) {
      return Usage(absl::StrCat(what, ": job ", side.job->id(), " has no finished build of ", label,
                                " for ", cp.arch()));
    }
  }
  if (sides[0].commit == sides[1].commit) {
    return Usage(absl::StrCat(what, ": jobs ", before.id(), " and ", after.id(),
                              " ran the same commit ", Short(sides[0].commit),
                              ": the kernel did not change there, so the change is not the "
                              "kernel's (look at the board, or mark the change point invalid)"));
  }
  args.good = sides[0].commit;
  args.bad = sides[1].commit;
  if (args.board.empty() && args.arch.empty()) args.board = cp.board();
  if (args.cells.empty() && cp.config() != "default") {
    args.cells = absl::StrSplit(cp.config(), ',', absl::SkipEmpty());
  }
  spec = after.spec();
  spec.clear_kernel_sources();
  return absl::OkStatus();
}

int BisectStartCommand(JobStub& client, const CliEnv& env, BisectArgs args, bool watch) {
  v1::JobSpec spec;
  auto get_job = [&](int64_t id, v1::Job* job, std::vector<v1::Build>* builds) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::GetJobResponse response;
    if (int rc = Unary(client, env, &JobStub::GetJob, get, &response); rc != kExitOk) return rc;
    *job = response.job();
    if (builds == nullptr) return kExitOk;
    v1::ListBuildsRequest list;
    list.set_job_id(id);
    v1::ListBuildsResponse listed;
    if (int rc = Unary(client, env, &JobStub::ListBuilds, list, &listed); rc != kExitOk) return rc;
    builds->assign(listed.builds().begin(), listed.builds().end());
    return kExitOk;
  };
  if (args.from_job != 0 && args.from_change != 0) {
    return Refuse(env, Usage("bisect: --from and --from-change exclude each other"));
  }
  if (args.from_job != 0) {
    v1::Job job;
    if (int rc = get_job(args.from_job, &job, nullptr); rc != kExitOk) return rc;
    if (absl::Status s = FromJob(job, args, spec); !s.ok()) return Refuse(env, s);
  } else if (args.from_change != 0) {
    v1::ListChangePointsRequest list;
    list.set_include_closed(true);
    v1::ListChangePointsResponse listed;
    if (int rc = Unary(client, env, &JobStub::ListChangePoints, list, &listed); rc != kExitOk) {
      return rc;
    }
    const v1::ChangePoint* cp = nullptr;
    for (const auto& c : listed.change_points()) {
      if (c.id() == args.from_change) cp = &c;
    }
    if (cp == nullptr) {
      return Refuse(env, Usage(absl::StrCat("--from-change: no change point ", args.from_change,
                                            " (faultline changes --all lists them)")));
    }
    v1::Job before, after;
    std::vector<v1::Build> before_builds, after_builds;
    if (cp->previous_job_id() != 0) {
      if (int rc = get_job(cp->previous_job_id(), &before, &before_builds); rc != kExitOk) {
        return rc;
      }
    }
    if (int rc = get_job(cp->job_id(), &after, &after_builds); rc != kExitOk) return rc;
    if (absl::Status s = FromChange(*cp, before, before_builds, after, after_builds, args, spec);
        !s.ok()) {
      return Refuse(env, s);
    }
  } else {
    if (args.spec_path.empty() || args.good.empty() || args.bad.empty()) {
      *env.err << "faultline: bisect: --good, --bad and --spec are needed (or --from JOB, "
                  "--from-change ID)\n";
      return kExitUsage;
    }
    absl::StatusOr<v1::JobSpec> loaded = LoadJobSpecFile(args.spec_path);
    if (!loaded.ok()) {
      *env.err << "faultline: " << OneLine(std::string(loaded.status().message()), "; ") << "\n";
      return kExitUsage;
    }
    spec = *std::move(loaded);
  }
  absl::StatusOr<v1::BisectRequest> request = MakeBisectRequest(args, std::move(spec));
  if (!request.ok()) {
    *env.err << "faultline: " << OneLine(std::string(request.status().message()), "; ") << "\n";
    return kExitUsage;
  }
  v1::StartBisectionRequest start;
  *start.mutable_request() = *std::move(request);
  start.set_request_id(
      absl::StrCat("cli-bisect-", std::chrono::steady_clock::now().time_since_epoch().count()));
  v1::Bisection response;
  if (int rc = Unary(client, env, &JobStub::StartBisection, start, &response); rc != kExitOk) {
    return rc;
  }
  *env.out << response.id() << "\n" << std::flush;
  *env.err << "bisection " << response.id() << " started: " << response.request().commits_size() - 1
           << " commits on board " << response.request().board() << "\n"
           << std::flush;
  if (!watch) return kExitOk;
  return BisectWatchCommand(client, env, response.id());
}

namespace {

int GetBisection(JobStub& client, const CliEnv& env, int64_t id, v1::Bisection* out) {
  v1::GetBisectionRequest get;
  get.set_id(id);
  return Unary(client, env, &JobStub::GetBisection, get, out);
}

int ExitOf(const v1::Bisection& b) {
  return b.state() == "done" && b.culprit() >= 0 ? kExitOk : kExitFailure;
}

}  // namespace

int BisectShowCommand(JobStub& client, const CliEnv& env, int64_t id, bool steps) {
  v1::Bisection b;
  if (int rc = GetBisection(client, env, id, &b); rc != kExitOk) return rc;
  *env.out << RenderBisection(b, steps) << std::flush;
  if (b.state() == "running") *env.err << FormatBisectProgress(b) << "\n";
  return kExitOk;
}

int BisectWatchCommand(JobStub& client, const CliEnv& env, int64_t id) {
  std::string last;
  for (int lost = 0;;) {
    v1::Bisection b;
    if (GetBisection(client, env, id, &b) != kExitOk) {
      if (++lost > 30) return kExitFailure;
    } else {
      lost = 0;
      const std::string line = FormatBisectProgress(b);
      if (line != last) *env.err << line << "\n" << std::flush;
      last = line;
      if (b.state() != "running") {
        *env.out << RenderBisection(b, true) << std::flush;
        return ExitOf(b);
      }
    }
    // A poll, not a wait for something to happen: the duties advance it once a second.
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

int BisectCancelCommand(JobStub& client, const CliEnv& env, int64_t id) {
  v1::CancelBisectionRequest req;
  req.set_id(id);
  v1::Bisection b;
  if (int rc = Unary(client, env, &JobStub::CancelBisection, req, &b); rc != kExitOk) return rc;
  *env.out << "bisection " << id << " " << b.state() << "\n" << std::flush;
  return kExitOk;
}

int BisectListCommand(JobStub& client, const CliEnv& env) {
  v1::ListBisectionsRequest req;
  v1::ListBisectionsResponse resp;
  if (int rc = Unary(client, env, &JobStub::ListBisections, req, &resp); rc != kExitOk) return rc;
  Table t;
  t.headers = {"id", "state", "phase", "commits", "board", "metric", "culprit"};
  for (const auto& b : resp.bisections()) {
    t.rows.push_back({std::to_string(b.id()), b.state(), b.phase(),
                      std::to_string(b.request().commits_size() - 1), b.request().board(),
                      MetricName(b.request()),
                      b.culprit() >= 0 ? CommitName(b, b.culprit()) : "-"});
  }
  *env.out << RenderPlainTable(t) << std::flush;
  return kExitOk;
}

}  // namespace faultline::cli
