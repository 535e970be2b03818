#include "services/controller/core/matching.h"

#include <algorithm>

namespace faultline::controller {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

bool RunsKernel(const FreeBoard& board, const std::string& kernel) {
  return Contains(board.running_kernels, kernel);
}

bool MayServe(const FreeBoard& board, const QueuedRun& run) {
  return (RunsKernel(board, run.kernel) || Contains(board.bootable_kernels, run.kernel)) &&
         (run.arches.empty() || Contains(run.arches, board.arch)) &&
         (run.boards.empty() || Contains(run.boards, board.name)) &&
         run.memory_max <= board.memory_bytes;
}

std::vector<BoardStep> MatchParkedBoards(const std::vector<FreeBoard>& boards,
                                         const std::vector<QueuedRun>& runs) {
  std::vector<BoardStep> steps;
  std::vector<bool> taken(runs.size(), false);
  // Runs before `first_open` are all taken: with thousands of boards and runs each board
  // starts its scan there instead of at the head.
  size_t first_open = 0;
  for (size_t b = 0; b < boards.size(); ++b) {
    while (first_open < runs.size() && taken[first_open]) ++first_open;
    for (size_t r = first_open; r < runs.size(); ++r) {
      if (taken[r] || !MayServe(boards[b], runs[r])) continue;
      const bool switch_kernel = !RunsKernel(boards[b], runs[r].kernel);
      if (!switch_kernel) taken[r] = true;
      steps.push_back({.board = b, .run = r, .switch_kernel = switch_kernel});
      break;
    }
  }
  return steps;
}

}  // namespace faultline::controller
