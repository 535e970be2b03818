#pragma once
#include <vector>

#include "absl/status/statusor.h"
#include "services/controller/core/domain.h"

namespace faultline::controller {

// Validates a spec against the catalogue, the limits and the registered boards, and expands
// its matrix into runs (cell x kernel x repetition). Errors are InvalidArgument with a
// message that starts with the field path ("spec.matrix.threads[1]: ...") and names the limit.
absl::StatusOr<ValidatedJob> ValidateJobSpec(const JobSpecInput& spec,
                                             const std::vector<BoardSummary>& boards,
                                             const SpecLimits& limits = {});

// Orders runs for a fair A/B comparison: repetitions are grouped in blocks of block_size;
// within each block every kernel runs its repetitions in turn (A-block, B-block, …, then the
// next block), and the cells of each repetition are shuffled with `seed` (PlanBlock's rule,
// core/lifecycle.h), so slow drift (thermal, fragmentation, page cache) hits every kernel
// alike. Sets PlannedRun::sequence.
std::vector<PlannedRun> PlanRunOrder(const std::vector<Cell>& cells,
                                     const std::vector<std::string>& kernels, uint32_t repetitions,
                                     uint32_t block_size, uint64_t seed);

// each_board: every run once per board, pinned to it; the boards' copies interleave so that
// each board's own subsequence keeps the planned order (its kernel blocks alternate).
std::vector<PlannedRun> ReplicatePerBoard(const std::vector<PlannedRun>& runs,
                                          const std::vector<std::string>& boards);

// The cartesian product of the matrix, first key varying slowest. An empty matrix is one
// empty cell.
std::vector<Cell> ExpandMatrix(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& matrix);

}  // namespace faultline::controller
