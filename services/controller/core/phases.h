#pragma once
// Where a job's time went, arch by arch: from its submission to its last run on that arch,
// every instant is one phase — queued for a build, building, waiting for a board,
// switching kernels, measuring. Computed from what the store keeps (builds' claims and
// ends, kernel switches, runs' assignments and ends), so it can be recomputed for any job.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace faultline::controller {

// What a job's phases are computed from (JobStore::JobTimeline). Times in ms since the
// epoch; 0 where the thing has not happened.
struct JobTimeline {
  int64_t job_id = 0;
  int64_t created_ms = 0;
  int64_t finished_ms = 0;
  struct Build {
    std::string arch;
    int64_t started_ms = 0;   // claimed by the builder whose attempt finished it
    int64_t finished_ms = 0;  // done or failed
  };
  struct Switch {
    std::string arch;
    std::string board;
    int64_t ordered_ms = 0;
    int64_t ended_ms = 0;  // the hello from the new kernel, or the switch's lapse
  };
  struct Run {
    std::string arch;
    std::string board;
    int64_t assigned_ms = 0;
    int64_t finished_ms = 0;
  };
  std::vector<Build> builds;
  std::vector<Switch> switches;
  std::vector<Run> runs;
};

enum class Phase { kBuildQueue = 0, kBuilding, kBoardWait, kSwitching, kMeasuring };
inline constexpr int kPhaseCount = 5;
// Its name in the store, /metrics and replies: build_queue, building, board_wait,
// switching, measuring.
const char* PhaseName(Phase p);
// As a reader says it: "queued for a build", "building", "waiting for a board", ...
const char* PhaseWords(Phase p);

struct ArchPhases {
  std::string arch;
  std::array<double, kPhaseCount> seconds{};  // by Phase
  double total_seconds = 0;                   // submission to the arch's last run's end
  bool finished = false;                      // every run of the arch ended
  double of(Phase p) const { return seconds[static_cast<int>(p)]; }
};

// The phases of each arch the job ran (or built) on, sorted by arch. On an arch, the time
// from submission to the end of its last build is "building" while a build of it runs and
// "queued for a build" otherwise; from there to the end of its last run, "measuring" while
// a run is assigned, else "switching" while a board switches kernels, else "waiting for a
// board". Intervals before submission (a build another job made earlier) count nothing.
// `now_ms` ends what has not ended yet (an unfinished job's phases so far).
std::vector<ArchPhases> PhasesOf(const JobTimeline& t, int64_t now_ms);

// One arch's phases in words, wrapped to `width` columns (continuations indented by 2):
// "x86_64, 9 min 2 s: building 2 min 10 s, switching kernels 40 s, measuring 6 min 12 s."
// Phases that took no time are left out.
std::vector<std::string> PhaseLines(const ArchPhases& a, size_t width = 78);

// "5 min 10 s", "48 s", "1 h 2 min", "2 d 3 h": a duration as a reply prints it.
std::string HumanSeconds(double seconds);

}  // namespace faultline::controller
