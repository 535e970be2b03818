#include "agent/workloads/run_options.h"

#include <vector>

#include "common/perf_events.h"
#include "nlohmann/json.hpp"

namespace faultline::workloads {
namespace {

using nlohmann::json;

constexpr size_t kMaxRunOptionsBytes = 64 * 1024;

bool Fail(const std::string& why, std::string* error) {
  *error = "--run-options: " + why;
  return false;
}

bool ReadEvents(const json& value, WorkloadCommand* command, std::string* error) {
  if (!value.is_array()) return Fail("events: a list of event names", error);
  std::vector<std::string> events;
  for (const json& event : value) {
    if (!event.is_string()) return Fail("events: a list of event names", error);
    events.push_back(event.get<std::string>());
  }
  size_t index = 0;
  std::string why;
  if (!CheckPerfEventList(events, &index, &why)) {
    return Fail(
        index < events.size() ? "events[" + std::to_string(index) + "]: " + why : "events: " + why,
        error);
  }
  command->events = std::move(events);
  return true;
}

bool ReadProfile(const json& value, WorkloadCommand* command, std::string* error) {
  if (!value.is_object()) return Fail("profile: an object {frequency_hz, pmu}", error);
  uint64_t hz = 0;
  for (const auto& [key, field] : value.items()) {
    if (key == "frequency_hz") {
      if (!field.is_number_unsigned()) return Fail("profile.frequency_hz: a whole number", error);
      hz = field.get<uint64_t>();
    } else if (key == "pmu") {
      if (!field.is_boolean()) return Fail("profile.pmu: true or false", error);
      command->profile_pmu = field.get<bool>();
    } else {
      return Fail("profile." + key.substr(0, 64) + ": unknown to this workload", error);
    }
  }
  if (hz == 0 || hz > kMaxProfileHz) {
    return Fail("profile.frequency_hz: samples per second per thread, 1 to " +
                    std::to_string(kMaxProfileHz) + ", got " + std::to_string(hz),
                error);
  }
  command->profile_hz = static_cast<uint32_t>(hz);
  return true;
}

}  // namespace

bool ParseRunOptions(const std::string& text, WorkloadCommand* command, std::string* error) {
  if (text.size() > kMaxRunOptionsBytes) {
    return Fail("at most " + std::to_string(kMaxRunOptionsBytes) + " bytes, got " +
                    std::to_string(text.size()),
                error);
  }
  const json options = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!options.is_object()) return Fail("not a JSON object (RunOptions)", error);
  for (const auto& [key, value] : options.items()) {
    if (key == "events") {
      if (!ReadEvents(value, command, error)) return false;
    } else if (key == "mmap_lock_waits") {
      if (!value.is_boolean()) return Fail("mmap_lock_waits: true or false", error);
      command->mmap_lock_waits = value.get<bool>();
    } else if (key == "profile") {
      if (!ReadProfile(value, command, error)) return false;
    } else {
      return Fail(key.substr(0, 64) + ": an option unknown to this workload", error);
    }
  }
  return true;
}

}  // namespace faultline::workloads
