#include "report/frames.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "report/comparison.h"

namespace faultline::report {
namespace {

constexpr std::string_view kTotal = kProfileTotalPrefix;
constexpr std::string_view kSelf = kProfileSelfPrefix;

std::string Number(double v) {
  if (std::isnan(v)) return "-";
  if (v == 0) return "0";
  return Printf("%.4g", v);
}

}  // namespace

std::vector<ChangedFrame> ChangedFrames(const v1::Comparison& comparison, int* compared) {
  std::vector<ChangedFrame> out;
  std::set<std::string> frames;
  for (const v1::CounterComparison& k : comparison.counters()) {
    if (!IsFrameCounter(k.name())) continue;
    const bool total = k.name().starts_with(kTotal);
    std::string frame = k.name().substr(total ? kTotal.size() : kSelf.size());
    frames.insert(frame);
    if (k.significant()) out.push_back({std::move(frame), total ? "total" : "self", &k});
  }
  if (compared != nullptr) *compared = static_cast<int>(frames.size());
  return out;
}

Table FrameTable(const std::vector<ChangedFrame>& frames, const std::string& a,
                 const std::string& b) {
  Table t;
  t.headers = {"Frame", "Stacks", a, b, "Change", "95% CI"};
  t.right_align = {false, false, true, true, true, false};
  for (const ChangedFrame& f : frames) {
    t.rows.push_back({f.frame, f.stacks, Number(f.counter->baseline_median()),
                      Number(f.counter->candidate_median()), FormatCounterChange(*f.counter),
                      FormatCounterCi(*f.counter)});
  }
  return t;
}

std::string FramesTitle(const std::vector<ChangedFrame>& frames, int compared,
                        const std::string& where, double alpha) {
  const std::string q = Printf("q ≤ %g", alpha);
  if (frames.empty()) {
    return "Frames" + where + ": no significant change among " + std::to_string(compared) +
           " frames of the call-stack samples (" + q + ")\n";
  }
  return "Frames that changed" + where + " (call-stack samples per round, " + q + "; " +
         std::to_string(frames.size()) + " changes among " + std::to_string(compared) + " frames):";
}

std::string RenderFrames(const v1::Comparison& comparison, const std::string& where,
                         ReportFormat format, double alpha) {
  int compared = 0;
  const std::vector<ChangedFrame> frames = ChangedFrames(comparison, &compared);
  if (compared == 0) return "";
  const std::string title = FramesTitle(frames, compared, where, alpha);
  if (frames.empty()) return "\n" + title;
  const Table t =
      FrameTable(frames, KernelTitle(comparison.baseline()), KernelTitle(comparison.candidate()));
  const bool markdown = format == ReportFormat::kMarkdown;
  std::string out =
      "\n" + title + "\n" + (markdown ? "\n" + RenderMarkdownTable(t) : RenderBoxTable(t));
  const bool differences = std::any_of(
      frames.begin(), frames.end(), [](const ChangedFrame& f) { return IsDifference(*f.counter); });
  if (differences) {
    out += std::string(markdown ? "\n" : "") +
           "A change without %: the difference B - A per round, where some run did not keep\n"
           "the frame (under 0.1% of its samples).\n";
  }
  return out;
}

}  // namespace faultline::report
