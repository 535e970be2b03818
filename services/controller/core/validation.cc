#include "services/controller/core/validation.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/benchmarks.h"
#include "common/units.h"
#include "services/controller/core/lifecycle.h"

namespace faultline::controller {
namespace {

const std::vector<std::string>& KnownArches() {
  static const std::vector<std::string> kArches = {"x86_64", "aarch64", "riscv64"};
  return kArches;
}

absl::Status Invalid(const std::string& field, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", message));
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Indexed(const std::string& field, size_t i) {
  return absl::StrCat(field, "[", i, "]");
}

}  // namespace

std::vector<Cell> ExpandMatrix(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& matrix) {
  std::vector<Cell> cells = {Cell{}};
  for (const auto& [key, values] : matrix) {
    std::vector<Cell> next;
    next.reserve(cells.size() * values.size());
    for (const auto& cell : cells) {
      for (const auto& value : values) {
        Cell c = cell;
        c.emplace_back(key, value);
        next.push_back(std::move(c));
      }
    }
    cells = std::move(next);
  }
  return cells;
}

std::vector<PlannedRun> ReplicatePerBoard(const std::vector<PlannedRun>& runs,
                                          const std::vector<std::string>& boards) {
  std::vector<PlannedRun> out;
  out.reserve(runs.size() * boards.size());
  for (const auto& run : runs) {
    for (const auto& board : boards) {
      PlannedRun copy = run;
      copy.board = board;
      copy.sequence = static_cast<int>(out.size());
      out.push_back(std::move(copy));
    }
  }
  return out;
}

std::vector<PlannedRun> PlanRunOrder(const std::vector<Cell>& cells,
                                     const std::vector<std::string>& kernels, uint32_t repetitions,
                                     uint32_t block_size, uint64_t seed) {
  std::vector<PlannedRun> runs;
  runs.reserve(cells.size() * kernels.size() * repetitions);
  std::vector<int> indices(cells.size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int>(i);
  const int block = static_cast<int>(std::max<uint32_t>(block_size, 1));
  for (int first = 1; first <= static_cast<int>(repetitions); first += block) {
    const int last = std::min(static_cast<int>(repetitions), first + block - 1);
    for (const RunSlot& slot :
         PlanBlock(indices, kernels, first, last, seed, static_cast<int>(runs.size()))) {
      PlannedRun run;
      run.cell_index = slot.cell_index;
      run.cell = cells[static_cast<size_t>(slot.cell_index)];
      run.kernel = slot.kernel;
      run.repetition = slot.repetition;
      run.sequence = slot.sequence;
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

namespace {

// What the steps of ValidateJobSpec share: the spec (a preset applied), the fleet and the
// limits, the job being filled, and what one step found for the later ones.
struct Validation {
  const JobSpecInput& spec;
  const std::vector<BoardSummary>& boards;
  const SpecLimits& limits;
  ValidatedJob job;
  const BenchmarkSpec* bench = nullptr;
  std::vector<const BoardSummary*> eligible;  // boards the placement filters leave
  std::vector<std::string> replica_boards;    // each_board: the boards that run it all
  std::set<std::string> matrix_keys;
  // Every knob value parsed once, here, and used typed from then on: the fixed ones
  // (defaults included), each matrix axis's values by their canonical text, and the
  // kernels' overrides.
  std::map<std::string, KnobValue> fixed_knobs;
  std::map<std::string, std::map<std::string, KnobValue>> matrix_values;
  std::map<std::string, std::map<std::string, KnobValue>> overrides;
};

// A preset (params.preset) fills what the spec leaves out: benchmark, duration, memcg
// limits and matrix; its knobs become defaults in ResolveKnobs. The spec always wins.
absl::Status ApplyPreset(JobSpecInput& spec) {
  if (auto it = spec.params.find("preset"); it != spec.params.end()) {
    const PresetSpec* preset = FindPreset(it->second);
    if (preset == nullptr) {
      return Invalid("params.preset", absl::StrCat("unknown preset '", it->second.substr(0, 64),
                                                   "' (known: ", PresetNames(), ")"));
    }
    if (spec.benchmark.empty() || spec.benchmark == preset->benchmark) {
      spec.benchmark = preset->benchmark;
      if (spec.duration.empty()) spec.duration = absl::StrCat(preset->duration_seconds, "s");
      if (spec.memory_max.empty() && spec.memory_high.empty() && spec.swap_max.empty()) {
        spec.memory_max = preset->memcg.memory_max;
        spec.memory_high = preset->memcg.memory_high;
        spec.swap_max = preset->memcg.swap_max;
      }
      if (spec.matrix.empty()) {
        for (const auto& [knob, values] : preset->matrix) {
          if (!spec.params.count(knob)) spec.matrix.emplace_back(knob, values);
        }
      }
    }
  }
  return absl::OkStatus();
}

// Name, benchmark, duration (whole seconds) and repetitions.
absl::Status CheckBasics(Validation& v) {
  if (v.spec.name.size() > v.limits.max_string_length) {
    return Invalid("name", absl::StrCat("must be at most ", v.limits.max_string_length,
                                        " characters, got ", v.spec.name.size()));
  }

  // Benchmark.
  if (v.spec.benchmark.empty()) {
    return Invalid("benchmark", absl::StrCat("is required (one of ", BenchmarkNames(), ")"));
  }
  v.bench = FindBenchmark(v.spec.benchmark);
  if (v.bench == nullptr) {
    return Invalid("benchmark", absl::StrCat("unknown benchmark '", v.spec.benchmark.substr(0, 64),
                                             "' (known: ", BenchmarkNames(), ")"));
  }
  v.job.benchmark = v.bench->name;

  // Duration: whole seconds, so a result has exactly one sample per measured second.
  if (v.spec.duration.empty()) {
    return Invalid("duration", "is required (e.g. 30s; at most 4h)");
  }
  std::string why;
  auto duration = ParseDuration(v.spec.duration, &why);
  if (!duration) return Invalid("duration", why);
  if (duration->count() <= 0) {
    return Invalid("duration", absl::StrCat("must be positive, got ", v.spec.duration));
  }
  if (duration->count() % 1000 != 0) {
    return Invalid("duration", absl::StrCat("must be whole seconds (one sample per second), got ",
                                            v.spec.duration));
  }
  if (*duration > v.limits.max_duration) {
    return Invalid("duration",
                   absl::StrCat("must be at most ", FormatDuration(v.limits.max_duration), ", got ",
                                v.spec.duration));
  }
  v.job.duration = std::chrono::duration_cast<std::chrono::seconds>(*duration);

  // Repetitions.
  if (v.spec.repetitions < 1 || v.spec.repetitions > v.limits.max_repetitions) {
    return Invalid("repetitions", absl::StrCat("must be between 1 and ", v.limits.max_repetitions,
                                               ", got ", v.spec.repetitions));
  }
  v.job.repetitions = v.spec.repetitions;
  return absl::OkStatus();
}

// Arches and boards filters, the eligible boards, the kernels they know, each_board.
absl::Status CheckPlacement(Validation& v) {
  // Placement filters.
  for (size_t i = 0; i < v.spec.arches.size(); ++i) {
    if (!Contains(KnownArches(), v.spec.arches[i])) {
      return Invalid(Indexed("arches", i),
                     absl::StrCat("unknown arch '", v.spec.arches[i].substr(0, 64),
                                  "' (known: ", absl::StrJoin(KnownArches(), ", "), ")"));
    }
  }
  for (size_t i = 0; i < v.spec.boards.size(); ++i) {
    bool known = std::any_of(v.boards.begin(), v.boards.end(),
                             [&](const BoardSummary& b) { return b.name == v.spec.boards[i]; });
    if (!known) {
      return Invalid(Indexed("boards", i),
                     absl::StrCat("unknown board '", v.spec.boards[i].substr(0, 64), "'"));
    }
  }
  v.job.arches = v.spec.arches;
  v.job.boards = v.spec.boards;
  for (const auto& b : v.boards) {
    if (!v.spec.arches.empty() && !Contains(v.spec.arches, b.arch)) continue;
    if (!v.spec.boards.empty() && !Contains(v.spec.boards, b.name)) continue;
    v.eligible.push_back(&b);
  }

  // Kernels: labels that an eligible board can boot.
  if (v.spec.kernels.empty()) {
    return Invalid("kernels", "at least one kernel label is required (e.g. [vanilla])");
  }
  std::set<std::string> known_labels;
  for (const auto* b : v.eligible)
    known_labels.insert(b->kernel_labels.begin(), b->kernel_labels.end());
  for (size_t i = 0; i < v.spec.kernels.size(); ++i) {
    const std::string& label = v.spec.kernels[i];
    if (std::count(v.spec.kernels.begin(), v.spec.kernels.end(), label) > 1) {
      return Invalid(Indexed("kernels", i), absl::StrCat("kernel '", label, "' is listed twice"));
    }
    if (!known_labels.count(label)) {
      std::string known = known_labels.empty()
                              ? std::string("no eligible board has registered")
                              : absl::StrCat("known: ", absl::StrJoin(known_labels, ", "));
      return Invalid(Indexed("kernels", i), absl::StrCat("unknown kernel label '",
                                                         label.substr(0, 64), "' (", known, ")"));
    }
  }
  v.job.kernels = v.spec.kernels;

  // each_board: the boards that run the whole matrix, each on its own.
  if (v.spec.each_board) {
    for (const auto* b : v.eligible) {
      bool boots_all = std::all_of(v.spec.kernels.begin(), v.spec.kernels.end(),
                                   [&](const auto& k) { return Contains(b->kernel_labels, k); });
      if (boots_all) v.replica_boards.push_back(b->name);
    }
    if (v.replica_boards.empty()) {
      return Invalid("each_board", absl::StrCat("no eligible board serves every kernel (",
                                                absl::StrJoin(v.spec.kernels, ", "), ")"));
    }
    v.job.each_board = true;
  }
  return absl::OkStatus();
}

// Baseline (its block first), block size, alpha, min_effect, adaptive repetitions.
absl::Status CheckAbSettings(Validation& v) {
  // A/B settings.
  v.job.baseline = v.spec.baseline.empty() ? v.spec.kernels.front() : v.spec.baseline;
  if (!Contains(v.spec.kernels, v.job.baseline)) {
    return Invalid("baseline", absl::StrCat("must be one of the job's kernels (",
                                            absl::StrJoin(v.spec.kernels, ", "), "), got '",
                                            v.spec.baseline.substr(0, 64), "'"));
  }
  // The baseline's block comes first in every block of repetitions.
  v.job.kernels.erase(std::find(v.job.kernels.begin(), v.job.kernels.end(), v.job.baseline));
  v.job.kernels.insert(v.job.kernels.begin(), v.job.baseline);
  v.job.block_size = v.spec.block_size == 0 ? 1 : v.spec.block_size;
  if (v.job.block_size > v.job.repetitions) {
    return Invalid("block_size", absl::StrCat("must be between 1 and repetitions (",
                                              v.job.repetitions, "), got ", v.spec.block_size));
  }
  v.job.alpha = v.spec.alpha == 0 ? 0.01 : v.spec.alpha;
  if (!(v.job.alpha > 0 && v.job.alpha <= 0.5)) {
    return Invalid("alpha", absl::StrCat("must be in (0, 0.5], got ", v.spec.alpha));
  }
  v.job.min_effect = v.spec.min_effect == 0 ? 0.03 : v.spec.min_effect;
  if (!(v.job.min_effect > 0 && v.job.min_effect < 1)) {
    return Invalid("min_effect", absl::StrCat("must be in (0, 1), got ", v.spec.min_effect));
  }
  v.job.shuffle_seed = v.spec.shuffle_seed;
  if (v.spec.max_repetitions != 0) {
    if (v.job.kernels.size() < 2) {
      return Invalid("max_repetitions",
                     "adaptive repetitions need at least two kernels to compare");
    }
    if (v.spec.max_repetitions < v.job.repetitions ||
        v.spec.max_repetitions > v.limits.max_repetitions) {
      return Invalid("max_repetitions",
                     absl::StrCat("must be between repetitions (", v.job.repetitions, ") and ",
                                  v.limits.max_repetitions, ", got ", v.spec.max_repetitions));
    }
    v.job.max_repetitions = v.spec.max_repetitions;
    v.job.target_ci_half_width =
        v.spec.target_ci_half_width == 0 ? v.job.min_effect : v.spec.target_ci_half_width;
    if (!(v.job.target_ci_half_width > 0 && v.job.target_ci_half_width < 1)) {
      return Invalid("target_ci_half_width",
                     absl::StrCat("must be in (0, 1), got ", v.spec.target_ci_half_width));
    }
  } else if (v.spec.target_ci_half_width != 0) {
    return Invalid("target_ci_half_width", "needs max_repetitions (adaptive repetitions)");
  }
  return absl::OkStatus();
}

absl::Status CheckMemcg(Validation& v) {
  std::string why;
  // Memory cgroup limits.
  if (v.spec.memory_max.empty()) {
    return Invalid("memcg.memory_max", absl::StrCat("is required (at least ",
                                                    FormatSize(v.limits.min_memory_max), ")"));
  }
  auto memory_max = ParseSize(v.spec.memory_max, &why);
  if (!memory_max) return Invalid("memcg.memory_max", why);
  if (*memory_max < v.limits.min_memory_max) {
    return Invalid("memcg.memory_max",
                   absl::StrCat("must be at least ", FormatSize(v.limits.min_memory_max), ", got ",
                                v.spec.memory_max));
  }
  uint64_t largest_board = 0;
  for (const auto* b : v.eligible) {
    bool serves = std::any_of(v.spec.kernels.begin(), v.spec.kernels.end(),
                              [&](const std::string& k) { return Contains(b->kernel_labels, k); });
    if (serves) largest_board = std::max(largest_board, b->memory_bytes);
  }
  if (*memory_max > largest_board) {
    return Invalid("memcg.memory_max",
                   absl::StrCat("must not exceed the board's RAM (", FormatSize(largest_board),
                                " on the largest eligible board), got ", v.spec.memory_max));
  }
  v.job.memcg.memory_max = *memory_max;
  if (!v.spec.memory_high.empty() && v.spec.memory_high != "max") {
    auto high = ParseSize(v.spec.memory_high, &why);
    if (!high) return Invalid("memcg.memory_high", why);
    if (*high == 0 || *high > *memory_max) {
      return Invalid("memcg.memory_high",
                     absl::StrCat("must be between 1 and memory_max (", v.spec.memory_max,
                                  "), got ", v.spec.memory_high));
    }
    v.job.memcg.memory_high = *high;
  }
  if (!v.spec.swap_max.empty() && v.spec.swap_max != "max") {
    auto swap = ParseSize(v.spec.swap_max, &why);
    if (!swap) return Invalid("memcg.swap_max", why);
    v.job.memcg.swap_max = *swap;
  }
  return absl::OkStatus();
}

// Fixed params and matrix axes against the catalogue; the longest warm-up of any cell.
absl::Status CheckKnobs(Validation& v) {
  std::string why;
  // Knobs: fixed params and matrix axes, all checked against the catalogue.
  std::map<std::string, std::string> fixed;
  for (const auto& [knob, value] : v.spec.params) {
    if (value.size() > v.limits.max_string_length) {
      return Invalid(absl::StrCat("params.", knob.substr(0, 64)), "value too long");
    }
    fixed[knob] = value;
  }
  for (const auto& [knob, values] : v.spec.matrix) {
    std::string field = absl::StrCat("matrix.", knob.substr(0, 64));
    const KnobSpec* knob_spec = v.bench->FindKnob(knob);
    if (knob_spec == nullptr) {
      std::vector<std::string> names;
      for (const auto& k : v.bench->knobs) names.push_back(k.name);
      return Invalid(field, absl::StrCat("unknown knob for ", v.bench->name,
                                         " (knobs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (!v.matrix_keys.insert(knob).second) return Invalid(field, "listed twice");
    if (knob == "preset") {
      return Invalid(field, "a preset sets several knobs; choose it in params, not the matrix");
    }
    if (fixed.count(knob)) {
      return Invalid(field, absl::StrCat("is also set in params; set it in one place"));
    }
    if (values.empty()) {
      return Invalid(field, "needs at least one value (an empty matrix axis runs nothing)");
    }
    if (values.size() > v.limits.max_matrix_values) {
      return Invalid(field, absl::StrCat("at most ", v.limits.max_matrix_values, " values, got ",
                                         values.size()));
    }
    std::vector<std::string> canonical;
    for (size_t i = 0; i < values.size(); ++i) {
      auto parsed = ParseKnob(*knob_spec, values[i], &why);
      if (!parsed) return Invalid(Indexed(field, i), why);
      if (Contains(canonical, parsed->text)) {
        return Invalid(Indexed(field, i), absl::StrCat("value ", parsed->text, " is listed twice"));
      }
      canonical.push_back(parsed->text);
      v.matrix_values[knob].emplace(parsed->text, *parsed);
    }
    v.job.matrix.emplace_back(knob, std::move(canonical));
  }
  std::string bad_knob;
  auto resolved = ResolveKnobs(*v.bench, fixed, &bad_knob, &why);
  if (!resolved) return Invalid(absl::StrCat("params.", bad_knob.substr(0, 64)), why);
  for (const auto& [knob, value] : *resolved) {
    if (v.matrix_keys.count(knob)) continue;
    v.job.fixed_params[knob] = value.text;
    v.fixed_knobs[knob] = value;
  }
  return absl::OkStatus();
}

// The expansion's size, per-kernel overrides, and the planned runs.
absl::Status PlanRuns(Validation& v) {
  std::string why;
  // Expansion: cell x kernel x repetition.
  std::vector<Cell> cells = ExpandMatrix(v.job.matrix);
  // Adaptive jobs may grow to max_repetitions: the limit holds for the largest they can get.
  const uint64_t copies = std::max<uint64_t>(1, v.replica_boards.size());
  uint64_t total = static_cast<uint64_t>(cells.size()) * v.job.kernels.size() *
                   std::max(v.job.repetitions, v.job.max_repetitions) * copies;
  if (total > v.limits.max_runs) {
    return Invalid("matrix", absl::StrCat("the job expands to ", total, " runs (", cells.size(),
                                          " cells x ", v.job.kernels.size(), " kernels x ",
                                          v.job.repetitions, " repetitions",
                                          copies > 1 ? absl::StrCat(" x ", copies, " boards") : "",
                                          "); at most ", v.limits.max_runs, " are allowed"));
  }
  // Per-label overrides of fixed knobs (never of swept ones: the cell would lie).
  for (const auto& [label, knobs] : v.spec.kernel_overrides) {
    std::string field = absl::StrCat("kernel_overrides.", label.substr(0, 64));
    if (!Contains(v.spec.kernels, label)) {
      return Invalid(field, absl::StrCat("is not one of the job's kernels (",
                                         absl::StrJoin(v.spec.kernels, ", "), ")"));
    }
    for (const auto& [knob, value] : knobs) {
      std::string knob_field = absl::StrCat(field, ".params.", knob.substr(0, 64));
      const KnobSpec* knob_spec = v.bench->FindKnob(knob);
      if (knob_spec == nullptr) return Invalid(knob_field, "unknown knob for " + v.bench->name);
      if (v.matrix_keys.count(knob)) {
        return Invalid(knob_field, "is swept by the matrix; override only fixed knobs");
      }
      auto parsed = ParseKnob(*knob_spec, value, &why);
      if (!parsed) return Invalid(knob_field, why);
      v.overrides[label][knob] = *parsed;
    }
  }

  v.job.runs =
      PlanRunOrder(cells, v.job.kernels, v.job.repetitions, v.job.block_size, v.job.shuffle_seed);
  // Each run's knobs, typed: the fixed ones, its cell's, its kernel's overrides. The lease
  // covers the longest warm-up of any run.
  v.job.warmup = std::chrono::milliseconds(0);
  for (auto& run : v.job.runs) {
    std::map<std::string, KnobValue> knobs = v.fixed_knobs;
    for (const auto& [k, text] : run.cell) knobs[k] = v.matrix_values.at(k).at(text);
    if (auto it = v.overrides.find(run.kernel); it != v.overrides.end()) {
      for (const auto& [k, value] : it->second) knobs[k] = value;
    }
    run.params.clear();
    for (const auto& [k, value] : knobs) run.params[k] = value.text;
    v.job.warmup = std::max(v.job.warmup, std::chrono::milliseconds(knobs.at("warmup").number));
  }
  if (!v.replica_boards.empty()) v.job.runs = ReplicatePerBoard(v.job.runs, v.replica_boards);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidatedJob> ValidateJobSpec(const JobSpecInput& given,
                                             const std::vector<BoardSummary>& boards,
                                             const SpecLimits& limits) {
  JobSpecInput spec = given;
  if (absl::Status s = ApplyPreset(spec); !s.ok()) return s;
  Validation v{spec, boards, limits, {}};
  for (auto step :
       {CheckBasics, CheckPlacement, CheckAbSettings, CheckMemcg, CheckKnobs, PlanRuns}) {
    if (absl::Status s = step(v); !s.ok()) return s;
  }
  v.job.run_options = spec.run_options;  // checked by convert (run_options.h), carried unread
  return std::move(v.job);
}

}  // namespace faultline::controller
