#pragma once
// Which parked board gets which queued run, decided in one pass over one read of the queue.
// The rule is WorkStore::DecideWorkForBoards', applied to each board in the order the boards asked:
// a board's next step is the first queued run (the queue's order: job, planned sequence, id) that
// it may serve with a kernel it runs or can boot and that no earlier board took in this pass. When
// the board runs that kernel it claims the run; otherwise it is ordered to switch and the run stays
// queued for others.
#include <cstdint>
#include <string>
#include <vector>

namespace faultline::controller {

struct QueuedRun {
  int64_t id = 0;
  int64_t job_id = 0;
  std::string kernel;
  std::vector<std::string> arches;  // empty: any
  std::vector<std::string> boards;  // empty: any
  uint64_t memory_max = 0;          // the job's memory.max
};

// A parked board that is healthy and has no run in progress.
struct FreeBoard {
  std::string name;
  std::string arch;
  uint64_t memory_bytes = 0;
  std::vector<std::string> running_kernels;   // labels the running kernel serves
  std::vector<std::string> bootable_kernels;  // labels it can switch to
};

struct BoardStep {
  size_t board = 0;            // index into the boards
  size_t run = 0;              // index into the runs
  bool switch_kernel = false;  // false: claim the run
};

// Which board may serve a run, written once (the dispatcher's passes, a board's own look down
// the whole queue and a failed boot's "can another board take it" all ask this): it runs or
// can boot the run's kernel, is of an arch and a name the run allows, and holds its memory.
bool MayServe(const FreeBoard& board, const QueuedRun& run);
// Does `board` run `kernel` now (no switch needed)?
bool RunsKernel(const FreeBoard& board, const std::string& kernel);

// One step for each board that has one, in the boards' order. `runs` must be in queue order.
std::vector<BoardStep> MatchParkedBoards(const std::vector<FreeBoard>& boards,
                                         const std::vector<QueuedRun>& runs);

}  // namespace faultline::controller
