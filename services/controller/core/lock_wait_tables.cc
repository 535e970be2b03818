#include "services/controller/core/lock_wait_tables.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "common/lock_wait_names.h"

namespace faultline::controller {
namespace {

constexpr char kPrefix[] = "mmap_lock_wait.";
// The counters' side and the seed's word for it.
const std::pair<std::string, std::string> kSides[] = {{"read", "Read"}, {"write", "Write"}};

bool Traced(const RunCounters& run) {
  return std::any_of(run.values.begin(), run.values.end(),
                     [](const auto& kv) { return kv.first.starts_with(kPrefix); });
}

// A run's value of one row, already per unit where it is a count.
using RowValue = std::function<double(const RunCounters&)>;

std::vector<double> Values(const std::vector<RunCounters>& runs, const RowValue& value) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const auto& r : runs) out.push_back(value(r));
  return out;
}

MedianTableRow Row(std::string label, const std::vector<RunCounters>& a,
                   const std::vector<RunCounters>& b, const RowValue& value, bool paired,
                   const stats::CompareOptions& options, bool per_unit = true) {
  MedianTableRow row;
  row.label = std::move(label);
  row.per_unit = per_unit;
  const std::vector<double> va = Values(a, value), vb = Values(b, value);
  row.baseline = stats::MedianCi(va, options.confidence);
  row.candidate = stats::MedianCi(vb, options.confidence);
  row.ratio = row.ci_low = row.ci_high = std::nan("");
  auto all_zero = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return !(x > 0); });
  };
  // No ratio where a side never saw any (the seed prints N/A for 0 → 0).
  if (va.size() < 2 || vb.size() < 2 || all_zero(va) || all_zero(vb)) return row;
  // Some runs saw none: log ratios of a zero are meaningless (the Hodges–Lehmann estimate
  // would swing on the clamp), so the change is the ratio of the medians, without a CI.
  auto any_zero = [](const std::vector<double>& v) {
    return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x) && !(x > 0); });
  };
  // Its p is the rank test's on the values themselves (a shift, not a ratio).
  if (any_zero(va) || any_zero(vb)) {
    if (row.baseline.median > 0 && row.candidate.median > 0) {
      row.ratio = row.candidate.median / row.baseline.median;
    }
    row.p_value = stats::CompareDifference(va, vb, paired, options).p_value;
    return row;
  }
  const stats::CellComparison s =
      paired ? stats::ComparePaired(va, vb, options) : stats::Compare(va, vb, options);
  row.ratio = s.ratio;
  row.ci_low = s.ci_low;
  row.ci_high = s.ci_high;
  row.p_value = std::min(1.0, 2 * s.p_value);
  return row;
}

}  // namespace

std::vector<MedianTable> LockWaitTables(const std::vector<RunCounters>& baseline,
                                        const std::vector<RunCounters>& candidate, bool paired,
                                        const stats::CompareOptions& options) {
  if (std::none_of(baseline.begin(), baseline.end(), Traced) &&
      std::none_of(candidate.begin(), candidate.end(), Traced)) {
    return {};
  }
  std::vector<RunCounters> a = baseline, b = candidate;
  if (paired) PairByRepetition(baseline, candidate, &a, &b);
  const bool per_second = CountersPerSecond(a, b);
  const std::string unit = per_second ? "second" : "round";
  auto per_unit = [per_second](const std::string& name) -> RowValue {
    return [name, per_second](const RunCounters& r) { return CounterPerUnit(r, name, per_second); };
  };

  MedianTable waits{"mmap_lock Acquisitions And Wait Time", "Metric", unit, {}};
  std::vector<MedianTable> out;
  for (const auto& [side, title] : kSides) {
    const std::string p = std::string(kPrefix) + side + ".";
    waits.rows.push_back(Row(title + " Lock Count", a, b, per_unit(p + "count"), paired, options));
    waits.rows.push_back(
        Row(title + " Total Wait (us)", a, b, per_unit(p + "total_us"), paired, options));
    // Per run: its total wait over its acquisitions (no unit: µs per acquisition).
    waits.rows.push_back(Row(
        title + " Avg Wait (us)", a, b,
        [p](const RunCounters& r) {
          const double count = CounterValue(r, p + "count");
          return count > 0 ? CounterValue(r, p + "total_us") / count : std::nan("");
        },
        paired, options, /*per_unit=*/false));
  }
  out.push_back(std::move(waits));
  // True contention (lock:contention_begin/end), where the boards' kernels traced it.
  auto contention_traced = [](const RunCounters& r) {
    return r.values.count("mmap_lock_contention.read.count") > 0;
  };
  const bool contention = std::any_of(a.begin(), a.end(), contention_traced) ||
                          std::any_of(b.begin(), b.end(), contention_traced);
  std::optional<MedianTable> contended;
  if (contention) {
    contended = MedianTable{"mmap_lock Contention (lock:contention_begin/end)", "Metric", unit, {}};
    for (const auto& [side, title] : kSides) {
      const std::string p = std::string("mmap_lock_contention.") + side + ".";
      contended->rows.push_back(
          Row(title + " Contended Count", a, b, per_unit(p + "count"), paired, options));
      contended->rows.push_back(
          Row(title + " Contended Wait (us)", a, b, per_unit(p + "total_us"), paired, options));
      // The run's longest (µs, no unit).
      contended->rows.push_back(Row(
          title + " Max Wait (us)", a, b,
          [p](const RunCounters& r) { return CounterValue(r, p + "max_us"); }, paired, options,
          /*per_unit=*/false));
    }
  }
  for (const auto& [side, title] : kSides) {
    const std::string p = std::string(kPrefix) + side + ".";
    MedianTable dist{
        title + " Lock Waiting Time Distribution of mmap_lock", "Range (us)", unit, {}};
    for (size_t d = 0; d < kWaitDecades; ++d) {
      dist.rows.push_back(
          Row(WaitDecadeLabel(d), a, b, per_unit(p + WaitDecadeCounter(d)), paired, options));
    }
    out.push_back(std::move(dist));
  }
  if (contended) out.push_back(std::move(*contended));
  // One family: every row with a p, across the tables.
  std::vector<MedianTableRow*> family;
  std::vector<double> p_values;
  for (MedianTable& table : out) {
    for (MedianTableRow& row : table.rows) {
      if (!std::isfinite(row.p_value)) continue;
      family.push_back(&row);
      p_values.push_back(row.p_value);
    }
  }
  const std::vector<double> q = stats::BenjaminiHochberg(p_values);
  for (size_t i = 0; i < family.size(); ++i) {
    family[i]->q_value = q[i];
    family[i]->significant = q[i] <= options.alpha;
  }
  return out;
}

}  // namespace faultline::controller
