#include "services/controller/core/counters.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace faultline::controller {
namespace {

std::vector<double> PerUnit(const std::vector<RunCounters>& runs, const std::string& name,
                            bool per_second) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const auto& r : runs) out.push_back(CounterPerUnit(r, name, per_second));
  return out;
}

}  // namespace

double CounterValue(const RunCounters& run, const std::string& name) {
  auto it = run.values.find(name);
  return it == run.values.end() ? 0.0 : it->second;
}

double CounterPerUnit(const RunCounters& run, const std::string& name, bool per_second) {
  const double unit = per_second ? run.seconds : run.rounds;
  return unit > 0 ? CounterValue(run, name) / unit : std::nan("");
}

void PairByRepetition(const std::vector<RunCounters>& a, const std::vector<RunCounters>& b,
                      std::vector<RunCounters>* paired_a, std::vector<RunCounters>* paired_b) {
  // Pair i = repetition i on both sides; unmatched repetitions are dropped.
  std::map<int, const RunCounters*> by_rep_a, by_rep_b;
  for (const auto& r : a) by_rep_a[r.repetition] = &r;
  for (const auto& r : b) by_rep_b[r.repetition] = &r;
  paired_a->clear();
  paired_b->clear();
  for (const auto& [rep, run] : by_rep_a) {
    auto it = by_rep_b.find(rep);
    if (it == by_rep_b.end()) continue;
    paired_a->push_back(*run);
    paired_b->push_back(*it->second);
  }
}

bool CountersPerSecond(const std::vector<RunCounters>& a, const std::vector<RunCounters>& b) {
  auto all_have_rounds = [](const std::vector<RunCounters>& runs) {
    return std::all_of(runs.begin(), runs.end(), [](const RunCounters& r) {
      return r.rounds >= kMinRoundsPerRunForCounters;
    });
  };
  return !all_have_rounds(a) || !all_have_rounds(b);
}

bool IsComparableCounter(std::string_view name) {
  if (name == "memcg.peak_bytes" || name.starts_with("rounds_per_thread_")) return false;
  for (std::string_view prefix : {"vmstat.", "memcg.", "psi.", "rusage.", "perf."}) {
    if (name.starts_with(prefix)) return true;
  }
  // mmap_lock waits (agent/sys/lock_waits.h): the acquisitions, waits and buckets; not the
  // tracer's own bookkeeping (records lost, starts never answered).
  if (name.starts_with("mmap_lock_wait.")) {
    return name != "mmap_lock_wait.lost_records" && name != "mmap_lock_wait.unpaired";
  }
  if (name.starts_with("mmap_lock_contention.")) return !name.ends_with(".max_us");
  // Call-stack samples (agent/workloads/profile_sampling.h): per frame and in user mode,
  // compared per round (a frame's CPU time per unit of work); not the sampler's bookkeeping.
  if (name.starts_with("profile.")) {
    return name.starts_with("profile.total.") || name.starts_with("profile.self.") ||
           name == "profile.user";
  }
  return name == "cpu_seconds" || name.ends_with("_rounds");
}

std::vector<CounterComparison> CompareCounters(const std::vector<RunCounters>& a_in,
                                               const std::vector<RunCounters>& b_in, bool paired,
                                               const stats::CompareOptions& options) {
  std::vector<RunCounters> a = a_in, b = b_in;
  if (paired) PairByRepetition(a_in, b_in, &a, &b);
  std::set<std::string> names;
  for (const auto* side : {&a, &b}) {
    for (const auto& r : *side) {
      for (const auto& [name, value] : r.values) {
        if (IsComparableCounter(name) && value != 0) names.insert(name);
      }
    }
  }
  const bool per_second = CountersPerSecond(a, b);

  std::vector<CounterComparison> out;
  std::vector<size_t> family;  // indices of the comparable ones
  for (const auto& name : names) {
    CounterComparison c;
    c.name = name;
    c.unit = per_second ? "second" : "round";
    c.n_a = static_cast<int>(a.size());
    c.n_b = static_cast<int>(b.size());
    const std::vector<double> va = PerUnit(a, name, per_second);
    const std::vector<double> vb = PerUnit(b, name, per_second);
    c.median_a = stats::MedianOf(va);
    c.median_b = stats::MedianOf(vb);
    c.median_a_per_second = stats::MedianOf(PerUnit(a, name, true));
    c.median_b_per_second = stats::MedianOf(PerUnit(b, name, true));
    auto all_zero = [&](const std::vector<RunCounters>& runs) {
      return std::all_of(runs.begin(), runs.end(),
                         [&](const RunCounters& r) { return CounterValue(r, name) == 0; });
    };
    c.ratio = c.ci_low = c.ci_high = std::nan("");
    c.difference = c.difference_low = c.difference_high = std::nan("");
    auto any_zero = [](const std::vector<double>& v) {
      return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x) && !(x > 0); });
    };
    // A frame a run leaves out (under 0.1% of its samples) was seen little, not unknown: a
    // frame on one kernel's stacks only is the change to test (the rank test holds under
    // the null: the cut applies alike to both sides). Other counters absent on one side
    // are ones that kernel does not have.
    const bool absent_is_few = IsFrameCounter(name);
    if (all_zero(a) && !a.empty() && !absent_is_few) {
      c.only_on = "candidate";
    } else if (all_zero(b) && !b.empty() && !absent_is_few) {
      c.only_on = "baseline";
    } else if (a.size() >= 2 && b.size() >= 2 && (any_zero(va) || any_zero(vb))) {
      const stats::DifferenceComparison s = stats::CompareDifference(va, vb, paired, options);
      c.paired = s.paired;
      c.difference = s.shift;
      c.difference_low = s.ci_low;
      c.difference_high = s.ci_high;
      c.p_value = s.p_value;
      family.push_back(out.size());
    } else if (a.size() >= 2 && b.size() >= 2) {
      const stats::CellComparison s =
          paired ? stats::ComparePaired(va, vb, options) : stats::Compare(va, vb, options);
      c.paired = s.paired;
      c.ratio = s.ratio;
      c.ci_low = s.ci_low;
      c.ci_high = s.ci_high;
      c.p_value = std::min(1.0, 2 * s.p_value);
      family.push_back(out.size());
    }
    out.push_back(std::move(c));
  }
  // Two families, each with its own Benjamini-Hochberg: the call-stack frames (a profiled
  // run has up to 400 of them) and every other counter. One family would let the frames
  // dilute the counters a study is about: with 14 pairs the least p is 1.2e-4, and among
  // 460 hypotheses a counter needs five others at that p to pass at 1%.
  for (const bool frames : {false, true}) {
    std::vector<size_t> members;
    for (size_t i : family) {
      if (IsFrameCounter(out[i].name) == frames) members.push_back(i);
    }
    std::vector<double> p;
    for (size_t i : members) p.push_back(out[i].p_value);
    const std::vector<double> q = stats::BenjaminiHochberg(p);
    for (size_t k = 0; k < members.size(); ++k) {
      CounterComparison& c = out[members[k]];
      c.q_value = q[k];
      c.significant = c.q_value <= options.alpha &&
                      ((std::isfinite(c.ratio) && c.ratio > 0) || std::isfinite(c.difference));
    }
  }
  // The least change a significant ratio's CI allows, as |ln|: 0 when it holds ×1.
  auto least_change = [](const CounterComparison& c) {
    const double low = std::log(c.ci_low), high = std::log(c.ci_high);
    if (!std::isfinite(low) || !std::isfinite(high)) return std::fabs(std::log(c.ratio)) / 2;
    if (low <= 0 && high >= 0) return 0.0;
    return std::min(std::fabs(low), std::fabs(high));
  };
  auto rank = [](const CounterComparison& c) {
    if (c.significant) return std::isfinite(c.ratio) ? 0 : 1;
    return c.only_on.empty() ? 2 : 3;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const CounterComparison& x, const CounterComparison& y) {
                     if (rank(x) != rank(y)) return rank(x) < rank(y);
                     if (rank(x) == 0) return least_change(x) > least_change(y);
                     if (rank(x) <= 2) return x.q_value < y.q_value;
                     return x.name < y.name;
                   });
  return out;
}

}  // namespace faultline::controller
