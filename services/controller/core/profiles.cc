#include "services/controller/core/profiles.h"

#include <algorithm>
#include <charconv>

namespace faultline::controller {

std::map<std::string, double> FoldedPerRound(std::string_view folded, double rounds) {
  std::map<std::string, double> out;
  if (!(rounds > 0)) return out;
  while (!folded.empty()) {
    const size_t end = folded.find('\n');
    std::string_view line = folded.substr(0, end);
    folded.remove_prefix(end == std::string_view::npos ? folded.size() : end + 1);
    const size_t space = line.rfind(' ');
    if (space == std::string_view::npos || space == 0) continue;
    const std::string_view number = line.substr(space + 1);
    uint64_t count = 0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
    if (ec != std::errc() || ptr != number.data() + number.size() || count == 0) continue;
    out[std::string(line.substr(0, space))] += static_cast<double>(count) / rounds;
  }
  return out;
}

std::vector<FoldedStack> MergeStacks(const std::vector<std::map<std::string, double>>& runs,
                                     size_t limit) {
  std::map<std::string, double> sum;
  for (const auto& run : runs) {
    for (const auto& [stack, per_round] : run) sum[stack] += per_round;
  }
  std::vector<FoldedStack> out;
  out.reserve(sum.size());
  for (auto& [stack, total] : sum) {
    out.push_back({stack, total / static_cast<double>(runs.size())});
  }
  std::stable_sort(out.begin(), out.end(), [](const FoldedStack& a, const FoldedStack& b) {
    return a.per_round > b.per_round;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace faultline::controller
