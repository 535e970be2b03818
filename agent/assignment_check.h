#pragma once
// The agent's own look at an assignment before anything runs: the controller validated the
// job against the fleet, but a board trusts nobody with its memory. Every knob is parsed
// and bounds-checked against the shared catalogue, the duration and memcg limit against
// fixed bounds, and the sizes against this board's RAM (and the work directory's free
// space for the files of filemap-thrash).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace faultline::agent {

struct AssignmentFacts {
  std::string benchmark;
  std::map<std::string, std::string> params;
  uint32_t duration_seconds = 0;
  uint64_t memory_max = 0;  // bytes (0, none, is refused: every run is limited)
  // Perf events (syntax only: whether a tracepoint exists the workload finds out, and its
  // refusal, naming the event, becomes the run's failure reason).
  std::vector<std::string> events{};
  // Run options this agent does not know (fields of Assignment.options from a newer
  // controller): refused, never run measuring less than the job asked.
  std::vector<int> unknown_run_options{};
};

struct BoardCapacity {
  uint64_t memory_bytes = 0;
  uint64_t work_dir_free_bytes = 0;
};

constexpr uint32_t kMaxRunSeconds = 4 * 3600;

// "" when the assignment may run here, otherwise why not, naming the field and the limit.
std::string CheckAssignment(const AssignmentFacts& assignment, const BoardCapacity& board);

}  // namespace faultline::agent
