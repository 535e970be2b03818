#include "agent/assignment_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/benchmarks.h"
#include "common/perf_events.h"
#include "common/units.h"

namespace faultline::agent {

std::string CheckAssignment(const AssignmentFacts& a, const BoardCapacity& board) {
  const BenchmarkSpec* bench = FindBenchmark(a.benchmark);
  if (bench == nullptr) {
    return absl::StrCat("benchmark: unknown '", a.benchmark.substr(0, 64),
                        "' (known: ", BenchmarkNames(), ")");
  }
  if (a.duration_seconds < 1 || a.duration_seconds > kMaxRunSeconds) {
    return absl::StrCat("duration_seconds: must be between 1 and ", kMaxRunSeconds, ", got ",
                        a.duration_seconds);
  }
  if (a.memory_max == 0) {
    return "memcg.memory_max: missing (a controller older than this agent sends the limits as "
           "text: upgrade the controller)";
  }
  if (a.memory_max < (16ull << 20) || a.memory_max > board.memory_bytes) {
    return absl::StrCat("memcg.memory_max: must be between 16M and the board's memory (",
                        FormatSize(board.memory_bytes), "), got ", FormatSize(a.memory_max));
  }
  std::string bad_knob, why;
  auto knobs = ResolveKnobs(*bench, a.params, &bad_knob, &why);
  if (!knobs) return absl::StrCat("params.", bad_knob.substr(0, 64), ": ", why);
  size_t bad_event = 0;
  if (!CheckPerfEventList(a.events, &bad_event, &why)) {
    return bad_event < a.events.size() ? absl::StrCat("run_options.events[", bad_event, "]: ", why)
                                       : absl::StrCat("run_options.events: ", why);
  }
  if (!a.unknown_run_options.empty()) {
    return absl::StrCat("run_options: field ", absl::StrJoin(a.unknown_run_options, ", "),
                        " unknown to this agent (a newer controller's option: upgrade the agent)");
  }
  auto number = [&](const char* knob) -> uint64_t {
    auto it = knobs->find(knob);
    return it == knobs->end() ? 0 : it->second.number;
  };
  auto too_big = [&](const std::string& what, uint64_t bytes, uint64_t limit,
                     const std::string& limit_name) {
    return absl::StrCat(what, " = ", FormatSize(bytes), " exceeds ", limit_name, " (",
                        FormatSize(limit), ")");
  };
  if (a.benchmark == "filemap-thrash") {
    const uint64_t files = number("threads") + number("munmap_threads");
    const uint64_t bytes = files * number("file_size");
    if (bytes > board.work_dir_free_bytes) {
      return too_big("params.file_size x (threads + munmap_threads)", bytes,
                     board.work_dir_free_bytes, "the free space of the work directory");
    }
  } else if (a.benchmark == "swap-in" || a.benchmark == "mmap-writer-pressure") {
    if (number("region_size") > board.memory_bytes) {
      return too_big("params.region_size", number("region_size"), board.memory_bytes,
                     "the board's memory");
    }
    const uint64_t writers = number("writers") * number("writer_map_size");
    if (writers > board.memory_bytes) {
      return too_big("params.writers x writer_map_size", writers, board.memory_bytes,
                     "the board's memory");
    }
  } else if (a.benchmark == "shmem-folio-fault") {
    const uint64_t bytes = number("threads") * number("shmem_size");
    if (bytes > board.memory_bytes) {
      return too_big("params.threads x shmem_size", bytes, board.memory_bytes,
                     "the board's memory");
    }
  }
  return "";
}

}  // namespace faultline::agent
