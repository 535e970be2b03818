#include "services/controller/core/validation.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/benchmarks.h"
#include "services/common/perf_events.h"
#include "services/common/units.h"

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
  std::mt19937_64 rng(seed);
  std::vector<size_t> order(cells.size());
  for (uint32_t first = 1; first <= repetitions; first += block_size) {
    uint32_t last = std::min(repetitions, first + block_size - 1);
    for (const auto& kernel : kernels) {
      for (uint32_t rep = first; rep <= last; ++rep) {
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        for (size_t c : order) {
          PlannedRun run;
          run.cell_index = static_cast<int>(c);
          run.cell = cells[c];
          run.kernel = kernel;
          run.repetition = static_cast<int>(rep);
          run.sequence = static_cast<int>(runs.size());
          runs.push_back(std::move(run));
        }
      }
    }
  }
  return runs;
}

absl::StatusOr<ValidatedJob> ValidateJobSpec(const JobSpecInput& given,
                                             const std::vector<BoardSummary>& boards,
                                             const SpecLimits& limits) {
  ValidatedJob job;
  // A preset (params.preset) fills what the spec leaves out: benchmark, duration, memcg
  // limits and matrix; its knobs become defaults in ResolveKnobs. The spec always wins.
  JobSpecInput spec = given;
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

  if (spec.name.size() > limits.max_string_length) {
    return Invalid("name", absl::StrCat("must be at most ", limits.max_string_length,
                                        " characters, got ", spec.name.size()));
  }

  // Benchmark.
  if (spec.benchmark.empty()) {
    return Invalid("benchmark", absl::StrCat("is required (one of ", BenchmarkNames(), ")"));
  }
  const BenchmarkSpec* bench = FindBenchmark(spec.benchmark);
  if (bench == nullptr) {
    return Invalid("benchmark", absl::StrCat("unknown benchmark '", spec.benchmark.substr(0, 64),
                                             "' (known: ", BenchmarkNames(), ")"));
  }
  job.benchmark = bench->name;

  // Duration: whole seconds, so a result has exactly one sample per measured second.
  if (spec.duration.empty()) {
    return Invalid("duration", "is required (e.g. 30s; at most 4h)");
  }
  std::string why;
  auto duration = ParseDuration(spec.duration, &why);
  if (!duration) return Invalid("duration", why);
  if (duration->count() <= 0) {
    return Invalid("duration", absl::StrCat("must be positive, got ", spec.duration));
  }
  if (duration->count() % 1000 != 0) {
    return Invalid("duration", absl::StrCat("must be whole seconds (one sample per second), got ",
                                            spec.duration));
  }
  if (*duration > limits.max_duration) {
    return Invalid("duration", absl::StrCat("must be at most ", FormatDuration(limits.max_duration),
                                            ", got ", spec.duration));
  }
  job.duration = std::chrono::duration_cast<std::chrono::seconds>(*duration);

  // Repetitions.
  if (spec.repetitions < 1 || spec.repetitions > limits.max_repetitions) {
    return Invalid("repetitions", absl::StrCat("must be between 1 and ", limits.max_repetitions,
                                               ", got ", spec.repetitions));
  }
  job.repetitions = spec.repetitions;

  // Placement filters.
  for (size_t i = 0; i < spec.arches.size(); ++i) {
    if (!Contains(KnownArches(), spec.arches[i])) {
      return Invalid(Indexed("arches", i),
                     absl::StrCat("unknown arch '", spec.arches[i].substr(0, 64),
                                  "' (known: ", absl::StrJoin(KnownArches(), ", "), ")"));
    }
  }
  for (size_t i = 0; i < spec.boards.size(); ++i) {
    bool known = std::any_of(boards.begin(), boards.end(),
                             [&](const BoardSummary& b) { return b.name == spec.boards[i]; });
    if (!known) {
      return Invalid(Indexed("boards", i),
                     absl::StrCat("unknown board '", spec.boards[i].substr(0, 64), "'"));
    }
  }
  job.arches = spec.arches;
  job.boards = spec.boards;
  std::vector<const BoardSummary*> eligible;
  for (const auto& b : boards) {
    if (!spec.arches.empty() && !Contains(spec.arches, b.arch)) continue;
    if (!spec.boards.empty() && !Contains(spec.boards, b.name)) continue;
    eligible.push_back(&b);
  }

  // Kernels: labels that an eligible board can boot.
  if (spec.kernels.empty()) {
    return Invalid("kernels", "at least one kernel label is required (e.g. [vanilla])");
  }
  std::set<std::string> known_labels;
  for (const auto* b : eligible)
    known_labels.insert(b->kernel_labels.begin(), b->kernel_labels.end());
  for (size_t i = 0; i < spec.kernels.size(); ++i) {
    const std::string& label = spec.kernels[i];
    if (std::count(spec.kernels.begin(), spec.kernels.end(), label) > 1) {
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
  job.kernels = spec.kernels;

  // each_board: the boards that run the whole matrix, each on its own.
  std::vector<std::string> replica_boards;
  if (spec.each_board) {
    for (const auto* b : eligible) {
      bool boots_all = std::all_of(spec.kernels.begin(), spec.kernels.end(),
                                   [&](const auto& k) { return Contains(b->kernel_labels, k); });
      if (boots_all) replica_boards.push_back(b->name);
    }
    if (replica_boards.empty()) {
      return Invalid("each_board", absl::StrCat("no eligible board serves every kernel (",
                                                absl::StrJoin(spec.kernels, ", "), ")"));
    }
    job.each_board = true;
  }

  // Perf events: the syntax and the known sw:/hw: names here; whether a tracepoint exists
  // only the board's kernel knows (the agent fails the run naming it).
  size_t bad_event = 0;
  if (!CheckPerfEventList(spec.events, &bad_event, &why)) {
    return Invalid(bad_event < spec.events.size() ? Indexed("events", bad_event) : "events", why);
  }
  job.events = spec.events;

  // A/B settings.
  job.baseline = spec.baseline.empty() ? spec.kernels.front() : spec.baseline;
  if (!Contains(spec.kernels, job.baseline)) {
    return Invalid("baseline", absl::StrCat("must be one of the job's kernels (",
                                            absl::StrJoin(spec.kernels, ", "), "), got '",
                                            spec.baseline.substr(0, 64), "'"));
  }
  // The baseline's block comes first in every block of repetitions.
  job.kernels.erase(std::find(job.kernels.begin(), job.kernels.end(), job.baseline));
  job.kernels.insert(job.kernels.begin(), job.baseline);
  job.block_size = spec.block_size == 0 ? 1 : spec.block_size;
  if (job.block_size > job.repetitions) {
    return Invalid("block_size", absl::StrCat("must be between 1 and repetitions (",
                                              job.repetitions, "), got ", spec.block_size));
  }
  job.alpha = spec.alpha == 0 ? 0.01 : spec.alpha;
  if (!(job.alpha > 0 && job.alpha <= 0.5)) {
    return Invalid("alpha", absl::StrCat("must be in (0, 0.5], got ", spec.alpha));
  }
  job.min_effect = spec.min_effect == 0 ? 0.03 : spec.min_effect;
  if (!(job.min_effect > 0 && job.min_effect < 1)) {
    return Invalid("min_effect", absl::StrCat("must be in (0, 1), got ", spec.min_effect));
  }
  job.shuffle_seed = spec.shuffle_seed;
  if (spec.max_repetitions != 0) {
    if (job.kernels.size() < 2) {
      return Invalid("max_repetitions",
                     "adaptive repetitions need at least two kernels to compare");
    }
    if (spec.max_repetitions < job.repetitions || spec.max_repetitions > limits.max_repetitions) {
      return Invalid("max_repetitions",
                     absl::StrCat("must be between repetitions (", job.repetitions, ") and ",
                                  limits.max_repetitions, ", got ", spec.max_repetitions));
    }
    job.max_repetitions = spec.max_repetitions;
    job.target_ci_half_width =
        spec.target_ci_half_width == 0 ? job.min_effect : spec.target_ci_half_width;
    if (!(job.target_ci_half_width > 0 && job.target_ci_half_width < 1)) {
      return Invalid("target_ci_half_width",
                     absl::StrCat("must be in (0, 1), got ", spec.target_ci_half_width));
    }
  } else if (spec.target_ci_half_width != 0) {
    return Invalid("target_ci_half_width", "needs max_repetitions (adaptive repetitions)");
  }

  // Memory cgroup limits.
  if (spec.memory_max.empty()) {
    return Invalid("memcg.memory_max",
                   absl::StrCat("is required (at least ", FormatSize(limits.min_memory_max), ")"));
  }
  auto memory_max = ParseSize(spec.memory_max, &why);
  if (!memory_max) return Invalid("memcg.memory_max", why);
  if (*memory_max < limits.min_memory_max) {
    return Invalid("memcg.memory_max",
                   absl::StrCat("must be at least ", FormatSize(limits.min_memory_max), ", got ",
                                spec.memory_max));
  }
  uint64_t largest_board = 0;
  for (const auto* b : eligible) {
    bool serves = std::any_of(spec.kernels.begin(), spec.kernels.end(),
                              [&](const std::string& k) { return Contains(b->kernel_labels, k); });
    if (serves) largest_board = std::max(largest_board, b->memory_bytes);
  }
  if (*memory_max > largest_board) {
    return Invalid("memcg.memory_max",
                   absl::StrCat("must not exceed the board's RAM (", FormatSize(largest_board),
                                " on the largest eligible board), got ", spec.memory_max));
  }
  job.memcg.memory_max = *memory_max;
  if (!spec.memory_high.empty() && spec.memory_high != "max") {
    auto high = ParseSize(spec.memory_high, &why);
    if (!high) return Invalid("memcg.memory_high", why);
    if (*high == 0 || *high > *memory_max) {
      return Invalid("memcg.memory_high",
                     absl::StrCat("must be between 1 and memory_max (", spec.memory_max, "), got ",
                                  spec.memory_high));
    }
    job.memcg.memory_high = *high;
  }
  if (!spec.swap_max.empty() && spec.swap_max != "max") {
    auto swap = ParseSize(spec.swap_max, &why);
    if (!swap) return Invalid("memcg.swap_max", why);
    job.memcg.swap_max = *swap;
  }

  // Knobs: fixed params and matrix axes, all checked against the catalogue.
  std::map<std::string, std::string> fixed;
  for (const auto& [knob, value] : spec.params) {
    if (value.size() > limits.max_string_length) {
      return Invalid(absl::StrCat("params.", knob.substr(0, 64)), "value too long");
    }
    fixed[knob] = value;
  }
  std::set<std::string> matrix_keys;
  for (const auto& [knob, values] : spec.matrix) {
    std::string field = absl::StrCat("matrix.", knob.substr(0, 64));
    const KnobSpec* knob_spec = bench->FindKnob(knob);
    if (knob_spec == nullptr) {
      std::vector<std::string> names;
      for (const auto& k : bench->knobs) names.push_back(k.name);
      return Invalid(field, absl::StrCat("unknown knob for ", bench->name,
                                         " (knobs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (!matrix_keys.insert(knob).second) return Invalid(field, "listed twice");
    if (knob == "preset") {
      return Invalid(field, "a preset sets several knobs; choose it in params, not the matrix");
    }
    if (fixed.count(knob)) {
      return Invalid(field, absl::StrCat("is also set in params; set it in one place"));
    }
    if (values.empty()) {
      return Invalid(field, "needs at least one value (an empty matrix axis runs nothing)");
    }
    if (values.size() > limits.max_matrix_values) {
      return Invalid(field, absl::StrCat("at most ", limits.max_matrix_values, " values, got ",
                                         values.size()));
    }
    std::vector<std::string> canonical;
    for (size_t i = 0; i < values.size(); ++i) {
      auto v = ParseKnob(*knob_spec, values[i], &why);
      if (!v) return Invalid(Indexed(field, i), why);
      if (Contains(canonical, v->text)) {
        return Invalid(Indexed(field, i), absl::StrCat("value ", v->text, " is listed twice"));
      }
      canonical.push_back(v->text);
    }
    job.matrix.emplace_back(knob, std::move(canonical));
  }
  std::string bad_knob;
  auto resolved = ResolveKnobs(*bench, fixed, &bad_knob, &why);
  if (!resolved) return Invalid(absl::StrCat("params.", bad_knob.substr(0, 64)), why);
  for (const auto& [knob, value] : *resolved) {
    if (!matrix_keys.count(knob)) job.fixed_params[knob] = value.text;
  }
  job.warmup = std::chrono::milliseconds(resolved->at("warmup").number);
  if (matrix_keys.count("warmup")) {
    // The lease must cover the longest warm-up of any cell.
    for (const auto& [knob, values] : job.matrix) {
      if (knob != "warmup") continue;
      for (const auto& v : values) {
        auto ms = ParseDuration(v);
        if (ms && *ms > job.warmup) job.warmup = *ms;
      }
    }
  }

  // Expansion: cell x kernel x repetition.
  std::vector<Cell> cells = ExpandMatrix(job.matrix);
  // Adaptive jobs may grow to max_repetitions: the limit holds for the largest they can get.
  const uint64_t copies = std::max<uint64_t>(1, replica_boards.size());
  uint64_t total = static_cast<uint64_t>(cells.size()) * job.kernels.size() *
                   std::max(job.repetitions, job.max_repetitions) * copies;
  if (total > limits.max_runs) {
    return Invalid("matrix",
                   absl::StrCat("the job expands to ", total, " runs (", cells.size(), " cells x ",
                                job.kernels.size(), " kernels x ", job.repetitions, " repetitions",
                                copies > 1 ? absl::StrCat(" x ", copies, " boards") : "",
                                "); at most ", limits.max_runs, " are allowed"));
  }
  // Per-label overrides of fixed knobs (never of swept ones: the cell would lie).
  std::map<std::string, std::map<std::string, std::string>> overrides;
  for (const auto& [label, knobs] : spec.kernel_overrides) {
    std::string field = absl::StrCat("kernel_overrides.", label.substr(0, 64));
    if (!Contains(spec.kernels, label)) {
      return Invalid(field, absl::StrCat("is not one of the job's kernels (",
                                         absl::StrJoin(spec.kernels, ", "), ")"));
    }
    for (const auto& [knob, value] : knobs) {
      std::string knob_field = absl::StrCat(field, ".params.", knob.substr(0, 64));
      const KnobSpec* knob_spec = bench->FindKnob(knob);
      if (knob_spec == nullptr) return Invalid(knob_field, "unknown knob for " + bench->name);
      if (matrix_keys.count(knob)) {
        return Invalid(knob_field, "is swept by the matrix; override only fixed knobs");
      }
      auto v = ParseKnob(*knob_spec, value, &why);
      if (!v) return Invalid(knob_field, why);
      overrides[label][knob] = v->text;
    }
  }

  job.runs = PlanRunOrder(cells, job.kernels, job.repetitions, job.block_size, job.shuffle_seed);
  for (auto& run : job.runs) {
    run.params = job.fixed_params;
    for (const auto& [k, v] : run.cell) run.params[k] = v;
    if (auto it = overrides.find(run.kernel); it != overrides.end()) {
      for (const auto& [k, v] : it->second) run.params[k] = v;
    }
  }
  if (!replica_boards.empty()) job.runs = ReplicatePerBoard(job.runs, replica_boards);
  return job;
}

}  // namespace faultline::controller
