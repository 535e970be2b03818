#pragma once
// Controller domain types. No protobuf, libpqxx or Beast here: storage and api convert
// at their boundary, so these are testable with plain GoogleTest.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace faultline::controller {

// A job spec as the user wrote it (text values; validation parses and bounds them).
struct JobSpecInput {
  std::string benchmark;
  std::string duration;
  uint32_t repetitions = 0;
  std::vector<std::string> kernels;
  std::string memory_max, memory_high, swap_max;
  std::map<std::string, std::string> params;
  std::vector<std::pair<std::string, std::vector<std::string>>> matrix;  // key order kept
  std::vector<std::string> arches;
  std::vector<std::string> boards;
  std::string name;
  // A/B settings; zero values mean "default".
  std::string baseline;
  uint32_t block_size = 0;
  uint64_t shuffle_seed = 0;  // 0: the caller must supply one (recorded with the job)
  double alpha = 0;
  double min_effect = 0;
  std::map<std::string, std::map<std::string, std::string>> kernel_overrides;  // label -> knobs
  uint32_t max_repetitions = 0;     // adaptive repetitions: 0 = off
  double target_ci_half_width = 0;  // 0: min_effect
  bool each_board = false;          // every eligible board runs the whole matrix
  // JobSpec.run_options as JSON, checked by convert/run_options.cc: core carries it unread
  // from the spec to the job and its assignments.
  std::string run_options = "{}";
};

// A board's health around kernel switches (core/board_health.h).
enum class BoardHealth { kOk, kSwitching, kNeedsCheck };

// What validation needs to know about a registered board.
struct BoardSummary {
  std::string name;
  std::string arch;
  uint64_t memory_bytes = 0;
  std::vector<std::string> kernel_labels;
  std::string running_kernel_label;
  std::vector<std::string> running_kernel_labels;
  // Kernels the board can boot on request (boot method other than none).
  std::vector<std::string> bootable_kernel_labels{};
  std::string boot_id{};
  BoardHealth health = BoardHealth::kOk;
  std::string health_reason{};
  uint64_t kernel_switches = 0;
  bool boots_built_kernels = false;         // agent.yaml built_kernels: boots what jobs bring
  std::vector<std::string> build_arches{};  // a builder for these arches
  // Hello from an agent that reports a switch that did not reboot itself (see the proto).
  bool reports_unbooted_switches = false;
};

struct MemcgLimitsBytes {
  uint64_t memory_max = 0;
  std::optional<uint64_t> memory_high;
  std::optional<uint64_t> swap_max;  // nullopt: unlimited ("max")
};

// A matrix cell: one value per swept knob, in the matrix's key order.
using Cell = std::vector<std::pair<std::string, std::string>>;

struct PlannedRun {
  int cell_index = 0;
  Cell cell;
  std::map<std::string, std::string> params;  // every knob: fixed + defaults + this cell
  std::string kernel;
  int repetition = 0;  // 1-based
  int sequence = 0;    // claim order: kernel blocks alternate, cells shuffled within a block
  std::string board;   // each_board jobs: the one board that runs it ("" = any eligible)
};

// A kernel a job brings, to be built for one arch. `label` is unique to the source
// ("patched@3f9c2a1b04de"); `source_json` the resolved v1.KernelSource as JSON.
struct BuildRequest {
  std::string label;
  std::string arch;
  std::string source_json;
};

struct ValidatedJob {
  std::string benchmark;
  std::chrono::seconds duration{0};
  std::chrono::milliseconds warmup{0};
  uint32_t repetitions = 0;
  std::vector<std::string> kernels;
  MemcgLimitsBytes memcg;
  std::map<std::string, std::string> fixed_params;  // canonical text, defaults included
  std::vector<std::pair<std::string, std::vector<std::string>>> matrix;  // canonical text
  std::vector<std::string> arches;
  std::vector<std::string> boards;
  std::string baseline;
  uint32_t block_size = 1;
  uint64_t shuffle_seed = 0;
  double alpha = 0.01;
  double min_effect = 0.03;
  uint32_t max_repetitions = 0;  // adaptive: add blocks of pairs up to this (0 = off)
  double target_ci_half_width = 0;
  bool each_board = false;
  std::string run_options = "{}";  // what each run measures (RunOptions as JSON), unread
  std::vector<PlannedRun> runs;    // in claim order (sequence 0, 1, …)
  // Kernels the job brings: one build per (label, arch), created with the job (a build of
  // the same label, i.e. the same source, is shared with earlier jobs).
  std::vector<BuildRequest> builds;
};

// Limits a spec must respect (bad input is refused naming the field and the limit).
struct SpecLimits {
  std::chrono::seconds max_duration{4 * 3600};
  uint32_t max_repetitions = 1000;
  uint32_t max_runs = 10'000;
  uint64_t min_memory_max = 16ull << 20;
  size_t max_matrix_values = 100;
  size_t max_string_length = 256;
};

// Per (cell, kernel, board) summary of succeeded runs' throughput.
struct RunOutcome {
  Cell cell;
  std::string kernel;
  std::string board;
  bool succeeded = false;
  bool failed = false;
  double throughput = 0;
  int repetition = -1;          // pairs A and B runs of one cell (-1: unknown, no pairing)
  bool too_coarse = false;      // fewer than 5 rounds: rounds/s is not comparable
  double pages_per_second = 0;  // progress at page granularity
};

struct SummaryRow {
  Cell cell;
  std::string kernel;
  std::string board;
  uint32_t n = 0;
  uint32_t failed = 0;
  uint32_t too_coarse = 0;
  double median = 0, min = 0, max = 0, mean = 0;
  double median_pages_per_second = 0;
};

}  // namespace faultline::controller
