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
std::string BenchmarkNames();  // "filemap-thrash, swap-in, mmap-writer-pressure"

// A knob's value after parsing: integers, sizes (bytes) and durations (ms) as numbers.
struct KnobValue {
  std::string text;    // canonical text ("16M", "5s", "8", "nonzero")
  uint64_t number = 0; // integer / bytes / milliseconds; 0 for choices
};

// Parses and bounds-checks one knob value. On failure returns nullopt and sets *error to
// a message naming the limit, e.g. "must be between 1 and 4096, got 0".
std::optional<KnobValue> ParseKnob(const KnobSpec& knob, std::string_view text, std::string* error);

// Fills in defaults for every knob the benchmark has and parses the given ones.
// Unknown knob names and bad values fail with *error_knob set to the knob's name.
std::optional<std::map<std::string, KnobValue>> ResolveKnobs(
    const BenchmarkSpec& benchmark, const std::map<std::string, std::string>& given,
    std::string* error_knob, std::string* error);

}  // namespace faultline
