#pragma once
// The benchmark catalogue: names, knobs, their types, defaults and bounds.
// One source of truth for the controller's spec validation and faultline-workload's
// argument parsing. Dependency-free (the workload cross-builds with it).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

enum class KnobType { kInteger, kSize, kDuration, kChoice };

struct KnobSpec {
  std::string name;
  KnobType type;
  std::string default_value;  // as text, parsed like user input
  uint64_t min = 0;           // integer: value; size: bytes; duration: milliseconds
  uint64_t max = 0;
  std::vector<std::string> choices;  // kChoice only
  std::string help;
};

struct BenchmarkSpec {
  std::string name;
  std::string help;
  bool requires_swap = false;
  std::vector<KnobSpec> knobs;

  const KnobSpec* FindKnob(std::string_view knob) const;
};

const std::vector<BenchmarkSpec>& Benchmarks();
const BenchmarkSpec* FindBenchmark(std::string_view name);
std::string BenchmarkNames();  // "filemap-thrash, swap-in, mmap-writer-pressure, ..."

// Every benchmark has this knob: a preset's fixed knobs (and the first value of each of its
// matrix axes) become the defaults; knobs given explicitly still win. "none" = no preset.
inline constexpr std::string_view kPresetKnob = "preset";
inline constexpr std::string_view kNoPreset = "none";

// Memcg limits a preset runs under, as job-spec text ("1.2G", "0", "max"); "" = not set.
struct PresetMemcg {
  std::string memory_max;
  std::string memory_high;
  std::string swap_max;
};

// One seed study as data: what the controller needs to expand it into a job (fixed knobs,
// matrix, memcg, duration), and what faultline-workload --preset NAME runs by hand.
struct PresetSpec {
  std::string name;       // "v2-file-thrash", "v2-file-thrash-small"
  std::string benchmark;  // catalogue name
  std::string seed;       // the mail it reproduces, e.g. "[PATCH v2 0/5] (file thrash)"
  std::string help;       // one line: what it runs and, for -small, how it was scaled
  std::vector<std::pair<std::string, std::string>> params;               // fixed knobs
  std::vector<std::pair<std::string, std::vector<std::string>>> matrix;  // swept knobs
  PresetMemcg memcg;
  uint32_t duration_seconds = 0;
  bool small = false;  // fits a 2-core, 24 GiB machine (run in CI)
};

const std::vector<PresetSpec>& Presets();
const PresetSpec* FindPreset(std::string_view name);
std::string PresetNames();  // "v2-file-thrash, v2-file-thrash-small, ..."

// A knob's value after parsing: integers, sizes (bytes) and durations (ms) as numbers.
struct KnobValue {
  std::string text;     // canonical text ("16M", "5s", "8", "nonzero")
  uint64_t number = 0;  // integer / bytes / milliseconds; 0 for choices
};

// Parses and bounds-checks one knob value. On failure returns nullopt and sets *error to
// a message naming the limit, e.g. "must be between 1 and 4096, got 0".
std::optional<KnobValue> ParseKnob(const KnobSpec& knob, std::string_view text, std::string* error);

// Fills in defaults for every knob the benchmark has and parses the given ones.
// Unknown knob names and bad values fail with *error_knob set to the knob's name.
// With given["preset"] naming a preset of this benchmark, the preset's fixed knobs and the
// first value of each of its matrix axes replace the catalogue defaults.
std::optional<std::map<std::string, KnobValue>> ResolveKnobs(
    const BenchmarkSpec& benchmark, const std::map<std::string, std::string>& given,
    std::string* error_knob, std::string* error);

}  // namespace faultline
