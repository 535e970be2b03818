#include "report/html_frames.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "report/comparison.h"
#include "report/frames.h"
#include "report/table.h"

namespace faultline::report {
namespace {

constexpr double kFlameWidth = 760, kRowHeight = 16, kFlameTop = 26, kMinPixels = 0.5;

// A frame on the call path from the root: its samples per round on each side.
struct Node {
  std::string name;
  double a = 0, b = 0;
  std::map<std::string, std::unique_ptr<Node>> children;  // by name: flame graphs sort them
};

void Add(Node* root, const std::string& stack, double per_round, bool baseline) {
  Node* node = root;
  (baseline ? node->a : node->b) += per_round;
  for (absl::string_view frame : absl::StrSplit(stack, ';')) {
    auto& child = node->children[std::string(frame)];
    if (!child) {
      child = std::make_unique<Node>();
      child->name = std::string(frame);
    }
    node = child.get();
    (baseline ? node->a : node->b) += per_round;
  }
}

int Depth(const Node& node) {
  int deepest = 0;
  for (const auto& [name, child] : node.children) deepest = std::max(deepest, Depth(*child));
  return deepest + 1;
}

// Red for more on B, blue for less, by the change relative to the larger side.
std::string Colour(double a, double b) {
  const double rel = std::max(a, b) > 0 ? (b - a) / std::max(a, b) : 0;
  const int fade = static_cast<int>(std::lround(225 - 190 * std::min(1.0, std::fabs(rel))));
  if (std::fabs(rel) < 0.02) return "#dddddd";
  return rel > 0 ? Printf("#ff%02x%02x", fade, fade) : Printf("#%02x%02xff", fade, fade);
}

std::string Change(double a, double b) {
  if (a > 0) return Printf("%+.0f%%", (b / a - 1) * 100);
  return b > 0 ? "new on B" : "-";
}

struct Flame {
  bool widths_from_b = true;
  double scale = 1;  // pixels per sample per round
  double height = 0;
  int rects = 0;
  std::string svg;

  void Draw(const Node& node, double x, int level) {
    const double value = widths_from_b ? node.b : node.a;
    const double width = value * scale;
    if (width < kMinPixels) return;
    if (level > 0) {
      const double y = height - kRowHeight * level;
      const std::string tip =
          absl::StrCat(node.name, ": A ", Printf("%.4g", node.a), ", B ", Printf("%.4g", node.b),
                       " per round (", Change(node.a, node.b), ")");
      absl::StrAppend(&svg, "<rect class=\"pt\" x=\"", Printf("%.2f", x), "\" y=\"",
                      Printf("%.1f", y), "\" width=\"", Printf("%.2f", width), "\" height=\"",
                      kRowHeight - 1, "\" style=\"fill:", Colour(node.a, node.b),
                      "\" data-frame=\"", HtmlEscape(node.name), "\" data-a=\"",
                      Printf("%.6g", node.a), "\" data-b=\"", Printf("%.6g", node.b), "\"><title>",
                      HtmlEscape(tip), "</title></rect>");
      ++rects;
      const size_t fits = static_cast<size_t>(std::max(0.0, (width - 6) / 6.5));
      if (fits >= 3) {
        std::string label =
            node.name.size() <= fits ? node.name : node.name.substr(0, fits - 2) + "..";
        absl::StrAppend(&svg, "<text class=\"fl\" x=\"", Printf("%.2f", x + 3), "\" y=\"",
                        Printf("%.1f", y + 11.5), "\">", HtmlEscape(label), "</text>");
      }
    }
    for (const auto& [name, child] : node.children) {
      Draw(*child, x, level + 1);
      x += (widths_from_b ? child->b : child->a) * scale;
    }
  }
};

std::string FlameGraph(const Node& root, bool widths_from_b, const std::string& title,
                       const std::string& id) {
  const double total = widths_from_b ? root.b : root.a;
  if (!(total > 0)) return "";
  Flame f;
  f.widths_from_b = widths_from_b;
  f.scale = (kFlameWidth - 20) / total;
  f.height = kFlameTop + kRowHeight * (Depth(root) - 1) + 6;
  f.Draw(root, 10, 0);
  return absl::StrCat("<svg class=\"plot flame\" id=\"", id,
                      "\" data-plot=\"flame\" data-points=\"", f.rects, "\" viewBox=\"0 0 ",
                      kFlameWidth, " ", Printf("%.0f", f.height + 8), "\" width=\"", kFlameWidth,
                      "\" height=\"", Printf("%.0f", f.height + 8), "\" role=\"img\" aria-label=\"",
                      HtmlEscape(title), "\"><text x=\"10\" y=\"16\" class=\"t\">",
                      HtmlEscape(title), "</text>", f.svg, "</svg>\n");
}

std::string FramesTableHtml(const v1::Comparison& c, double alpha) {
  int compared = 0;
  const std::vector<ChangedFrame> frames = ChangedFrames(c, &compared);
  if (compared == 0) return "";
  const std::string title = FramesTitle(frames, compared, "", alpha);
  if (frames.empty()) return "<p>" + HtmlEscape(title) + "</p>\n";
  return HtmlTable(FrameTable(frames, "A", "B"), "lock frames", title);
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string HtmlTable(const Table& table, const std::string& css_class,
                      const std::string& caption) {
  std::string out = absl::StrCat("<table class=\"", css_class, "\"><caption>", HtmlEscape(caption),
                                 "</caption>\n<tr>");
  for (const std::string& h : table.headers) absl::StrAppend(&out, "<th>", HtmlEscape(h), "</th>");
  absl::StrAppend(&out, "</tr>\n");
  for (const auto& row : table.rows) {
    absl::StrAppend(&out, "<tr>");
    for (const std::string& cell : row) absl::StrAppend(&out, "<td>", HtmlEscape(cell), "</td>");
    absl::StrAppend(&out, "</tr>\n");
  }
  return out + "</table>\n";
}

std::string ProfilesHtml(const v1::GetReportResponse& report) {
  std::string out;
  int i = 0;
  for (const v1::Comparison& c : report.comparisons()) {
    const std::string table = FramesTableHtml(c, report.alpha());
    if (table.empty() && c.baseline_stacks().empty() && c.candidate_stacks().empty()) continue;
    std::string cell;
    for (const std::string& k : report.matrix_keys()) {
      auto it = c.cell().find(k);
      if (it != c.cell().end())
        absl::StrAppend(&cell, cell.empty() ? ", " : " ", k, "=", it->second);
    }
    const std::string heading =
        absl::StrCat("B ", c.candidate(), " vs A ", c.baseline(), " on ", c.board(), cell);
    absl::StrAppend(&out, "<h3>", HtmlEscape(heading), "</h3>\n", table);
    Node root;
    for (const auto& s : c.baseline_stacks()) Add(&root, s.stack(), s.per_round(), true);
    for (const auto& s : c.candidate_stacks()) Add(&root, s.stack(), s.per_round(), false);
    absl::StrAppend(&out,
                    FlameGraph(root, true, "B's stacks, coloured by the change from A",
                               absl::StrCat("flame-b-", i)),
                    FlameGraph(root, false, "A's stacks, coloured by the change on B",
                               absl::StrCat("flame-a-", i)));
    ++i;
  }
  if (out.empty()) return "";
  return "<h2>Where the time went: call-stack profiles</h2>\n<p>Samples per round of each "
         "frame on the runs' call stacks, averaged over each kernel's runs. Red: more on B, "
         "blue: less (the deeper, the larger the change); grey: within 2%. A colour is the "
         "estimate, not the test: the table above says which changes are significant. "
         "Frames narrower than half a pixel are left out.</p>\n" +
         out;
}

}  // namespace faultline::report
