#include "agent/workloads/command_line.h"

#include <algorithm>
#include <map>
#include <set>

#include "CLI/CLI.hpp"
#include "agent/workloads/run_options.h"
#include "common/benchmarks.h"
#include "common/perf_events.h"
#include "common/strings.h"
#include "common/units.h"

namespace faultline::workloads {
namespace {

// A flag's name as the catalogue spells knobs: with underscores ("file_size").
std::string Canonical(std::string_view flag) {
  std::string name(flag);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// "--memory-max" for memory_max: how errors name the fixed flags.
std::string Dashed(std::string_view name) {
  std::string flag = "--" + std::string(name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

// CLI11 names for both spellings of a flag: "--file-size,--file_size" (or just "--threads").
std::string BothSpellings(std::string_view name) {
  const std::string dashed = Dashed(name);
  const std::string underscored = "--" + Canonical(name);
  return dashed == underscored ? dashed : dashed + "," + underscored;
}

std::string KnobTypeHint(const KnobSpec& knob) {
  switch (knob.type) {
    case KnobType::kInteger:
      return std::to_string(knob.min) + ".." + std::to_string(knob.max);
    case KnobType::kSize:
      return FormatSize(knob.min) + ".." + FormatSize(knob.max);
    case KnobType::kDuration:
      return FormatDuration(std::chrono::milliseconds(knob.min)) + ".." +
             FormatDuration(std::chrono::milliseconds(knob.max));
    case KnobType::kChoice: {
      std::string list;
      for (const auto& c : knob.choices) list += (list.empty() ? "" : "|") + c;
      return list;
    }
  }
  return "";
}

// The command line as CLI11 matched it, before any value is checked: the BENCHMARK
// positional and each flag's value (knobs included) by canonical name.
struct MatchedFlags {
  bool help = false;
  bool list_presets = false;
  bool inherit_cgroup = false;
  bool mmap_lock_waits = false;
  bool profile_pmu = false;
  std::string benchmark;
  std::map<std::string, std::string> values;
};

// The flags that take a value besides the knobs.
constexpr const char* kValueFlags[] = {"duration",    "dir",       "memory_max",  "memory_high",
                                       "swap_max",    "zram_swap", "cgroup_root", "cgroup_parent",
                                       "progress_fd", "events",    "profile_hz",  "run_options"};

// "--events a,b": the list, each entry trimmed; false with *error naming --events and the
// event.
bool ParseEventList(const std::string& text, std::vector<std::string>* events, std::string* error) {
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = TrimSpace(std::string_view(text).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) {
      *error = "--events: empty entry in '" + text.substr(0, 64) +
               "' (a comma-separated list, e.g. --events "
               "mmap_lock:mmap_lock_start_locking,sw:page-faults)";
      return false;
    }
    events->emplace_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  size_t index = 0;
  std::string why;
  if (!CheckPerfEventList(*events, &index, &why)) {
    *error = "--events: " + why;
    return false;
  }
  return true;
}

// CLI11 matches flags and collects values; the catalogue and units.h check the values (so
// that an error names the limit), so CLI11 converts none of them.
std::optional<MatchedFlags> MatchFlags(const std::vector<std::string>& args, std::string* error) {
  MatchedFlags matched;
  CLI::App app{"faultline-workload"};
  app.set_help_flag();  // ours stops at once: --help wins over anything after it, as before
  app.allow_extras();   // unknown flags are reported below, with the benchmark's knobs
  app.add_flag_callback("-h,--help", [] { throw CLI::CallForHelp(); })->trigger_on_parse();
  app.add_flag_callback(BothSpellings("list_presets"), [] { throw CLI::Success(); })
      ->trigger_on_parse();
  app.add_flag(BothSpellings("inherit_cgroup"), matched.inherit_cgroup);
  app.add_flag(BothSpellings("mmap_lock_waits"), matched.mmap_lock_waits);
  app.add_flag(BothSpellings("profile_pmu"), matched.profile_pmu);
  app.add_option("BENCHMARK", matched.benchmark);
  // The fixed flags, then every knob of the catalogue: the benchmark is not known yet, and
  // ResolveKnobs rejects another benchmark's knob naming this one's.
  std::map<std::string, CLI::Option*> options;
  auto add_value = [&](const std::string& name) {
    // Every occurrence is kept: a repeated flag is reported below.
    options[name] =
        app.add_option(BothSpellings(name))->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  for (const char* name : kValueFlags) add_value(name);
  std::set<std::string> knob_names;  // benchmarks share knobs (threads, warmup, preset)
  for (const auto& benchmark : Benchmarks()) {
    for (const auto& knob : benchmark.knobs) {
      // A knob named like a fixed flag throws CLI::OptionAlreadyAdded (a catalogue bug).
      if (knob_names.insert(knob.name).second) add_value(knob.name);
    }
  }

  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 pops from the back
  } catch (const CLI::CallForHelp&) {
    matched.help = true;
    return matched;
  } catch (const CLI::Success&) {
    matched.list_presets = true;
    return matched;
  } catch (const CLI::ArgumentMismatch& e) {
    // With every value kept (TakeAll), CLI11 has one mismatch left: the arguments ran out
    // after a flag that takes a value (it takes the next argument whatever it looks like).
    *error =
        !args.empty() && args.back().rfind('-', 0) == 0 ? args.back() + " needs a value" : e.what();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {  // e.g. --inherit-cgroup=maybe
    *error = e.what();
    return std::nullopt;
  }

  // What CLI11 did not match: an unknown flag, or a second BENCHMARK.
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;  // CLI11 keeps the end-of-flags mark
    if (extra.rfind('-', 0) == 0) {
      std::string knobs;
      if (const BenchmarkSpec* spec = FindBenchmark(matched.benchmark)) {
        for (const auto& knob : spec->knobs) knobs += (knobs.empty() ? "" : ", ") + knob.name;
        knobs = "; " + spec->name + " knobs: " + knobs;
      }
      *error = extra.substr(0, extra.find('=')) + ": unknown flag (see --help" + knobs + ")";
    } else {
      *error = "unexpected argument '" + extra +
               "' (benchmark already given: " + matched.benchmark + ")";
    }
    return std::nullopt;
  }
  for (const auto& [name, option] : options) {
    if (option->count() > 1) {
      *error = Dashed(name) + " given " + std::to_string(option->count()) +
               " times (give each flag once)";
      return std::nullopt;
    }
    if (option->count() == 1) matched.values[name] = option->results().front();
  }
  return matched;
}

// A flag's value taken out of `values` (nullopt: not given).
std::optional<std::string> TakeValue(std::map<std::string, std::string>& values, const char* name) {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  std::string value = std::move(it->second);
  values.erase(it);
  return value;
}

// The run options, by hand (--events, --mmap-lock-waits, --profile-hz, --profile-pmu) or
// whole (--run-options JSON, the agent's way: run_options.h), not both; their values are
// taken out of `values`.
bool TakeRunOptions(std::map<std::string, std::string>& values, const MatchedFlags& matched,
                    WorkloadCommand& command, std::string* error) {
  command.mmap_lock_waits = matched.mmap_lock_waits;
  command.profile_pmu = matched.profile_pmu;
  auto take = [&](const char* name) { return TakeValue(values, name); };
  if (auto value = take("events")) {
    if (!ParseEventList(*value, &command.events, error)) return false;
  }
  if (auto value = take("profile_hz")) {
    auto hz = ParseUnsigned(*value);
    if (!hz || *hz == 0 || *hz > kMaxProfileHz) {
      *error = "--profile-hz: samples per second per thread, 1 to " +
               std::to_string(kMaxProfileHz) + ", got '" + *value + "'";
      return false;
    }
    command.profile_hz = static_cast<uint32_t>(*hz);
  }
  auto whole = take("run_options");
  if (!whole) return true;
  if (!command.events.empty() || command.mmap_lock_waits || command.profile_hz > 0 ||
      command.profile_pmu) {
    *error =
        "--run-options: give the run options either whole or as --events, "
        "--mmap-lock-waits, --profile-hz, --profile-pmu, not both";
    return false;
  }
  return ParseRunOptions(*whole, &command, error);
}

}  // namespace

std::string WorkloadUsage() {
  std::string out =
      "usage: faultline-workload BENCHMARK [--KNOB VALUE ...] --duration 5s [--dir DIR]\n"
      "         [--memory-max SIZE] [--memory-high SIZE] [--swap-max SIZE]\n"
      "         [--cgroup-root DIR] [--cgroup-parent DIR] [--progress-fd N] [--inherit-cgroup]\n"
      "         [--zram-swap SIZE] [--events EV1,EV2,...] [--mmap-lock-waits]\n"
      "         [--profile-hz N [--profile-pmu]] [--run-options JSON]\n"
      "       faultline-workload --preset NAME [--KNOB VALUE ...] [--duration ...]\n"
      "Prints one JSON result object on stdout. With --memory-*/--swap-max (or a preset's\n"
      "memcg limits) it runs in a memory cgroup of its own; --inherit-cgroup stays where it\n"
      "is. A preset's matrix axes default to their first value. --zram-swap sets up a zram\n"
      "swap device of SIZE for a benchmark that needs swap and removes it afterwards (root).\n"
      "--events counts perf events over the measured interval, summed over the workload's\n"
      "threads (counters perf.EVENT; at most 16): tracepoints SYSTEM:NAME, e.g.\n"
      "mmap_lock:mmap_lock_start_locking (tracefs is mounted for the look-up if it is not),\n"
      "sw:NAME and hw:NAME (a board without a PMU reports hw events as unsupported),\n"
      "calls:FUNCTION, the calls of a kernel function (a kprobe: a kernel without\n"
      "CONFIG_KPROBE_EVENTS or without the function reports it as unsupported).\n"
      "--mmap-lock-waits traces every mmap_lock acquisition of the workload's threads and\n"
      "its wait (counters mmap_lock_wait.*: read/write count, total_us and decades of us;\n"
      "a kernel without the mmap_lock tracepoints says so in mmap_lock_wait.unsupported).\n"
      "--profile-hz N samples the threads' call stacks N times a second (--profile-pmu: on\n"
      "the PMU's cycles). --run-options JSON gives these whole, as a job's run_options:\n"
      "{\"events\": [...], \"mmap_lock_waits\": true, \"profile\": {\"frequency_hz\": 99}}.\n";
  auto names = [](const std::vector<std::string>& list) {
    std::string joined;
    for (const auto& n : list) joined += (joined.empty() ? "" : ", ") + n;
    return joined;
  };
  out += "  sw: " + names(SoftwarePerfEventNames()) + "\n  hw: " + names(HardwarePerfEventNames()) +
         "\nExit codes: 0 ok, 1 failed, 2 usage, 3 no swap, 4 interrupted.\n";
  for (const auto& benchmark : Benchmarks()) {
    out += "\n" + benchmark.name + (benchmark.requires_swap ? " (needs swap)" : "") + ": " +
           benchmark.help + "\n";
    for (const auto& knob : benchmark.knobs) {
      out += "  --" + knob.name + " (" + KnobTypeHint(knob) + ", default " + knob.default_value +
             "): " + knob.help + "\n";
    }
  }
  out += "\npresets (--preset NAME):\n";
  for (const auto& preset : Presets()) {
    out += "  " + preset.name + " (" + preset.benchmark + "; " + preset.seed + "): " + preset.help +
           "\n";
  }
  return out;
}

std::string PresetListing() {
  std::string out;
  for (const auto& preset : Presets()) {
    out += preset.name + " " + preset.benchmark + " " + std::to_string(preset.duration_seconds) +
           (preset.small ? " small" : " full");
    for (const auto& [knob, values] : preset.matrix) {
      out += " " + knob + "=";
      for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + values[i];
    }
    out += "\n";
  }
  return out;
}

std::optional<WorkloadCommand> ParseWorkloadCommand(const std::vector<std::string>& args,
                                                    std::string* error) {
  auto matched = MatchFlags(args, error);
  if (!matched) return std::nullopt;
  WorkloadCommand command;
  command.help = matched->help;
  command.list_presets = matched->list_presets;
  if (command.help || command.list_presets) return command;
  command.benchmark = matched->benchmark;
  const bool inherit_cgroup = matched->inherit_cgroup;
  // Takes the fixed flags out of the values; what is left are knobs (--preset among them).
  std::map<std::string, std::string>& given_knobs = matched->values;
  auto take = [&](const char* name) { return TakeValue(given_knobs, name); };

  auto parse_limit = [&](const char* name, std::optional<uint64_t>* out) {
    auto value = take(name);
    if (!value) return true;
    std::string why;
    auto bytes = ParseSize(*value, &why);
    if (!bytes) {
      *error = Dashed(name) + ": " + why;
      return false;
    }
    *out = *bytes;
    command.own_cgroup = true;
    return true;
  };
  if (!parse_limit("memory_max", &command.limits.memory_max) ||
      !parse_limit("memory_high", &command.limits.memory_high) ||
      !parse_limit("swap_max", &command.limits.swap_max)) {
    return std::nullopt;
  }
  if (auto value = take("zram_swap")) {
    std::string why;
    auto bytes = ParseSize(*value, &why);
    if (!bytes || *bytes < (16ull << 20)) {
      *error = "--zram-swap: " + (bytes ? "must be at least 16M, got " + *value : why);
      return std::nullopt;
    }
    command.zram_swap_bytes = *bytes;
  }
  if (auto value = take("progress_fd")) {
    auto fd = ParseUnsigned(*value);
    if (!fd || *fd > 65535) {
      *error = "--progress-fd must be a file descriptor number, got '" + *value + "'";
      return std::nullopt;
    }
    command.progress_fd = static_cast<int>(*fd);
  }
  if (!TakeRunOptions(given_knobs, *matched, command, error)) return std::nullopt;
  if (auto value = take("dir")) command.work_dir = *value;
  if (auto value = take("cgroup_root")) command.cgroup.cgroup_root = *value;
  if (auto value = take("cgroup_parent")) command.cgroup.v2_parent = *value;
  std::optional<std::string> duration_text = take("duration");

  const PresetSpec* preset = nullptr;
  if (auto it = given_knobs.find(std::string(kPresetKnob));
      it != given_knobs.end() && it->second != kNoPreset) {
    preset = FindPreset(it->second);
    if (preset == nullptr) {
      *error = "--preset: unknown preset '" + it->second + "' (one of: " + PresetNames() + ")";
      return std::nullopt;
    }
    if (command.benchmark.empty()) command.benchmark = preset->benchmark;
    command.preset = preset->name;
  }
  if (command.benchmark.empty()) {
    *error = "missing BENCHMARK (one of: " + BenchmarkNames() + ") or --preset NAME";
    return std::nullopt;
  }
  const BenchmarkSpec* spec = FindBenchmark(command.benchmark);
  if (spec == nullptr) {
    *error = "unknown benchmark '" + command.benchmark + "' (one of: " + BenchmarkNames() + ")";
    return std::nullopt;
  }
  std::string knob_name, why;
  auto knobs = ResolveKnobs(*spec, given_knobs, &knob_name, &why);
  if (!knobs) {
    *error = "--" + knob_name + ": " + why;
    return std::nullopt;
  }
  command.knobs = std::move(*knobs);

  if (inherit_cgroup && command.own_cgroup) {
    *error = "--inherit-cgroup cannot be combined with --memory-max/--memory-high/--swap-max";
    return std::nullopt;
  }
  if (preset != nullptr) {
    if (!duration_text) duration_text = std::to_string(preset->duration_seconds) + "s";
    // The preset's limits, unless the caller gave limits of its own or keeps its cgroup.
    if (!inherit_cgroup && !command.own_cgroup) {
      auto limit = [&](const std::string& text, const char* name, std::optional<uint64_t>* out) {
        if (text.empty() || text == "max") return true;
        std::string why;
        auto bytes = ParseSize(text, &why);
        if (!bytes) {
          *error = "preset " + preset->name + ": memcg." + name + ": " + why;
          return false;
        }
        *out = *bytes;
        command.own_cgroup = true;
        return true;
      };
      if (!limit(preset->memcg.memory_max, "memory_max", &command.limits.memory_max) ||
          !limit(preset->memcg.memory_high, "memory_high", &command.limits.memory_high) ||
          !limit(preset->memcg.swap_max, "swap_max", &command.limits.swap_max)) {
        return std::nullopt;
      }
    }
  }
  if (!duration_text) {
    *error = "missing --duration (whole seconds, e.g. --duration 5s)";
    return std::nullopt;
  }
  auto duration = ParseDuration(*duration_text, &why);
  if (!duration) {
    *error = "--duration: " + why;
    return std::nullopt;
  }
  const auto ms = duration->count();
  if (ms % 1000 != 0 || ms < 1000 || ms > int64_t{kMaxDurationSeconds} * 1000) {
    *error = "--duration: must be whole seconds between 1s and " +
             FormatDuration(std::chrono::seconds(kMaxDurationSeconds)) + ", got " + *duration_text;
    return std::nullopt;
  }
  command.duration_seconds = static_cast<uint32_t>(ms / 1000);
  if (command.work_dir.empty()) {
    *error = "--dir must not be empty";
    return std::nullopt;
  }
  return command;
}

}  // namespace faultline::workloads
