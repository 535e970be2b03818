#include "agent/workloads/command_line.h"

#include <algorithm>

#include "services/common/benchmarks.h"
#include "services/common/units.h"

namespace faultline::workloads {
namespace {

std::string Canonical(std::string_view flag) {
  std::string name(flag);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
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

}  // namespace

std::string WorkloadUsage() {
  std::string out =
      "usage: faultline-workload BENCHMARK [--KNOB VALUE ...] --duration 5s [--dir DIR]\n"
      "         [--memory-max SIZE] [--memory-high SIZE] [--swap-max SIZE]\n"
      "         [--cgroup-root DIR] [--cgroup-parent DIR] [--progress-fd N] [--inherit-cgroup]\n"
      "         [--zram-swap SIZE]\n"
      "       faultline-workload --preset NAME [--KNOB VALUE ...] [--duration ...]\n"
      "Prints one JSON result object on stdout. With --memory-*/--swap-max (or a preset's\n"
      "memcg limits) it runs in a memory cgroup of its own; --inherit-cgroup stays where it\n"
      "is. A preset's matrix axes default to their first value. --zram-swap sets up a zram\n"
      "swap device of SIZE for a benchmark that needs swap and removes it afterwards (root).\n"
      "Exit codes: 0 ok, 1 failed, 2 usage, 3 no swap, 4 interrupted.\n";
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
    out += "  " + preset.name + " (" + preset.benchmark + "; " + preset.seed + "): " +
           preset.help + "\n";
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
  WorkloadCommand command;
  std::map<std::string, std::string> given_knobs;
  std::optional<std::string> duration_text;
  bool inherit_cgroup = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      command.help = true;
      return command;
    }
    if (arg == "--list-presets") {
      command.list_presets = true;
      return command;
    }
    if (arg == "--inherit-cgroup") {
      inherit_cgroup = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!command.benchmark.empty()) {
        *error = "unexpected argument '" + arg + "' (benchmark already given: " +
                 command.benchmark + ")";
        return std::nullopt;
      }
      command.benchmark = arg;
      continue;
    }
    std::string flag = arg.substr(2);
    std::string value;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) {
        *error = "--" + flag + " needs a value";
        return std::nullopt;
      }
      value = args[++i];
    }
    const std::string name = Canonical(flag);
    auto parse_limit = [&](std::optional<uint64_t>* out) {
      std::string why;
      auto bytes = ParseSize(value, &why);
      if (!bytes) {
        *error = "--" + flag + ": " + why;
        return false;
      }
      *out = *bytes;
      command.own_cgroup = true;
      return true;
    };
    if (name == "duration") {
      duration_text = value;
    } else if (name == "dir") {
      command.work_dir = value;
    } else if (name == "memory_max") {
      if (!parse_limit(&command.limits.memory_max)) return std::nullopt;
    } else if (name == "memory_high") {
      if (!parse_limit(&command.limits.memory_high)) return std::nullopt;
    } else if (name == "swap_max") {
      if (!parse_limit(&command.limits.swap_max)) return std::nullopt;
    } else if (name == "zram_swap") {
      std::string why;
      auto bytes = ParseSize(value, &why);
      if (!bytes || *bytes < (16ull << 20)) {
        *error = "--zram-swap: " + (bytes ? "must be at least 16M, got " + value : why);
        return std::nullopt;
      }
      command.zram_swap_bytes = *bytes;
    } else if (name == "cgroup_root") {
      command.cgroup.cgroup_root = value;
    } else if (name == "cgroup_parent") {
      command.cgroup.v2_parent = value;
    } else if (name == "progress_fd") {
      auto fd = ParseUnsigned(value);
      if (!fd || *fd > 65535) {
        *error = "--progress-fd must be a file descriptor number, got '" + value + "'";
        return std::nullopt;
      }
      command.progress_fd = static_cast<int>(*fd);
    } else {
      given_knobs[name] = value;  // validated against the catalogue below
    }
  }

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
      auto limit = [&](const std::string& text, const char* name,
                       std::optional<uint64_t>* out) {
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
