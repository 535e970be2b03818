#include "services/controller/core/phases.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace faultline::controller {
namespace {

struct Interval {
  Phase phase;
  int64_t from_ms, to_ms;
};

// Adds to `out` the time of [lo, hi] in each phase: at every instant the first phase of
// `priority` that an interval covers, else `otherwise`. O(n log n) in the intervals.
void Sweep(int64_t lo, int64_t hi, const std::vector<Interval>& intervals,
           const std::vector<Phase>& priority, Phase otherwise,
           std::array<double, kPhaseCount>& out) {
  if (hi <= lo) return;
  struct Event {
    int64_t at;
    int delta;
    Phase phase;
  };
  std::vector<Event> events;
  events.reserve(intervals.size() * 2);
  for (const Interval& i : intervals) {
    const int64_t a = std::max(i.from_ms, lo), b = std::min(i.to_ms, hi);
    if (a >= b) continue;
    events.push_back({a, +1, i.phase});
    events.push_back({b, -1, i.phase});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& x, const Event& y) { return x.at < y.at; });
  std::array<int, kPhaseCount> active{};
  auto current = [&] {
    for (Phase p : priority) {
      if (active[static_cast<int>(p)] > 0) return p;
    }
    return otherwise;
  };
  int64_t at = lo;
  for (const Event& e : events) {
    if (e.at > at) {
      out[static_cast<int>(current())] += static_cast<double>(e.at - at) / 1000.0;
      at = e.at;
    }
    active[static_cast<int>(e.phase)] += e.delta;
  }
  out[static_cast<int>(current())] += static_cast<double>(hi - at) / 1000.0;
}

}  // namespace

// Each phase's name and words, in Phase's order.
constexpr struct {
  const char* name;
  const char* words;
} kPhases[kPhaseCount] = {{"build_queue", "queued for a build"},
                          {"building", "building"},
                          {"board_wait", "waiting for a board"},
                          {"switching", "switching kernels"},
                          {"measuring", "measuring"}};

const char* PhaseName(Phase p) {
  return kPhases[static_cast<int>(p)].name;
}
const char* PhaseWords(Phase p) {
  return kPhases[static_cast<int>(p)].words;
}

std::vector<ArchPhases> PhasesOf(const JobTimeline& t, int64_t now_ms) {
  const bool job_finished = t.finished_ms > 0;
  const int64_t now = job_finished ? t.finished_ms : now_ms;
  const int64_t t0 = t.created_ms;
  std::map<std::string, ArchPhases> by_arch;
  for (const auto& b : t.builds) by_arch[b.arch].arch = b.arch;
  for (const auto& r : t.runs) {
    if (!r.arch.empty()) by_arch[r.arch].arch = r.arch;
  }
  std::vector<ArchPhases> out;
  for (auto& [arch, phases] : by_arch) {
    // Up to the end of the arch's last build: building or queued for one.
    int64_t builds_end = t0;
    std::vector<Interval> building;
    for (const auto& b : t.builds) {
      if (b.arch != arch) continue;
      const int64_t end = b.finished_ms > 0 ? b.finished_ms : now;
      builds_end = std::max(builds_end, end);
      if (b.started_ms > 0) building.push_back({Phase::kBuilding, b.started_ms, end});
    }
    builds_end = std::min(builds_end, now);
    Sweep(t0, builds_end, building, {Phase::kBuilding}, Phase::kBuildQueue, phases.seconds);
    // Then up to the end of its last run: measuring, switching, or waiting for a board.
    int64_t runs_end = builds_end;
    bool open = false;
    std::vector<Interval> boards;
    for (const auto& r : t.runs) {
      // A run no board took yet has no arch: it keeps every arch of the job waiting.
      if (r.arch != arch && !(r.arch.empty() && r.assigned_ms == 0)) continue;
      if (r.assigned_ms == 0) {
        open = open || !job_finished;  // still queued (a finished job's were cancelled)
        continue;
      }
      const int64_t end = r.finished_ms > 0 ? r.finished_ms : now;
      open = open || r.finished_ms == 0;
      runs_end = std::max(runs_end, end);
      boards.push_back({Phase::kMeasuring, r.assigned_ms, end});
    }
    if (open) runs_end = now;
    for (const auto& s : t.switches) {
      if (s.arch != arch) continue;
      boards.push_back({Phase::kSwitching, s.ordered_ms, s.ended_ms > 0 ? s.ended_ms : now});
    }
    Sweep(builds_end, runs_end, boards, {Phase::kMeasuring, Phase::kSwitching}, Phase::kBoardWait,
          phases.seconds);
    phases.total_seconds = static_cast<double>(std::max(runs_end, t0) - t0) / 1000.0;
    phases.finished = job_finished || !open;
    out.push_back(std::move(phases));
  }
  return out;
}

std::vector<std::string> PhaseLines(const ArchPhases& a, size_t width) {
  std::vector<std::string> words;
  for (int p = 0; p < kPhaseCount; ++p) {
    if (std::llround(a.seconds[p]) == 0) continue;
    words.push_back(
        absl::StrCat(PhaseWords(static_cast<Phase>(p)), " ", HumanSeconds(a.seconds[p])));
  }
  std::string head = absl::StrCat(a.arch, ", ", HumanSeconds(a.total_seconds),
                                  a.finished ? "" : " so far", words.empty() ? "." : ":");
  std::vector<std::string> lines{std::move(head)};
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string piece = words[i] + (i + 1 == words.size() ? "." : ",");
    if (lines.back().size() + 1 + piece.size() > width) {
      lines.push_back("  " + piece);
    } else {
      absl::StrAppend(&lines.back(), " ", piece);
    }
  }
  return lines;
}

std::string HumanSeconds(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s < 60) return absl::StrCat(s, " s");
  if (s < 3600) {
    return s % 60 == 0 ? absl::StrCat(s / 60, " min") : absl::StrCat(s / 60, " min ", s % 60, " s");
  }
  if (s >= 86400) {
    const int64_t h = (s % 86400) / 3600;
    return h == 0 ? absl::StrCat(s / 86400, " d") : absl::StrCat(s / 86400, " d ", h, " h");
  }
  const int64_t min = (s % 3600) / 60;
  return min == 0 ? absl::StrCat(s / 3600, " h") : absl::StrCat(s / 3600, " h ", min, " min");
}

}  // namespace faultline::controller
