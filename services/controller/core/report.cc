#include "services/controller/core/report.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace faultline::controller {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::vector<SummaryRow> Summarize(const std::vector<RunOutcome>& outcomes) {
  std::vector<SummaryRow> rows;
  std::vector<std::vector<double>> values;
  for (const auto& o : outcomes) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const SummaryRow& r) {
      return std::tie(r.cell, r.kernel, r.board) == std::tie(o.cell, o.kernel, o.board);
    });
    size_t index = static_cast<size_t>(it - rows.begin());
    if (it == rows.end()) {
      rows.push_back(SummaryRow{o.cell, o.kernel, o.board});
      values.emplace_back();
    }
    if (o.succeeded) values[index].push_back(o.throughput);
    if (o.failed) ++rows[index].failed;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& v = values[i];
    rows[i].n = static_cast<uint32_t>(v.size());
    if (v.empty()) continue;
    rows[i].median = Median(v);
    rows[i].min = *std::min_element(v.begin(), v.end());
    rows[i].max = *std::max_element(v.begin(), v.end());
    rows[i].mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  }
  return rows;
}

}  // namespace faultline::controller
