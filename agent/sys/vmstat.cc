#include "agent/sys/vmstat.h"

#include "agent/sys/file_io.h"
#include "common/units.h"

namespace faultline::sys {
namespace {

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

std::string DecodeOctalEscapes(std::string_view text) {
  auto is_octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && is_octal(text[i + 1]) && is_octal(text[i + 2]) &&
        is_octal(text[i + 3])) {
      out += static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 +
                               (text[i + 3] - '0'));
      i += 3;
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace

VmstatCounters ParseVmstat(std::string_view text) {
  return ParseKeyValueLines(text);
}

std::optional<VmstatCounters> ReadVmstat(std::string* error, const std::string& path) {
  auto text = ReadFileToString(path, error);
  if (!text) return std::nullopt;
  return ParseVmstat(*text);
}

std::vector<SwapDevice> ParseProcSwaps(std::string_view text) {
  std::vector<SwapDevice> devices;
  bool header = true;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (header) {  // "Filename Type Size Used Priority"
      header = false;
      continue;
    }
    auto fields = SplitFields(line);
    if (fields.size() < 5) continue;
    auto size_kib = ParseUnsigned(fields[2]);
    auto used_kib = ParseUnsigned(fields[3]);
    if (!size_kib || !used_kib) continue;
    SwapDevice device;
    device.path = DecodeOctalEscapes(fields[0]);
    device.type = std::string(fields[1]);
    device.size_bytes = *size_kib * 1024;
    device.used_bytes = *used_kib * 1024;
    std::string_view priority = fields[4];
    bool negative = !priority.empty() && priority.front() == '-';
    if (negative) priority.remove_prefix(1);
    if (auto p = ParseUnsigned(priority)) {
      device.priority = negative ? -static_cast<int>(*p) : static_cast<int>(*p);
    }
    devices.push_back(std::move(device));
  }
  return devices;
}

std::optional<std::vector<SwapDevice>> ReadSwapDevices(std::string* error,
                                                       const std::string& path) {
  auto text = ReadFileToString(path, error);
  if (!text) return std::nullopt;
  return ParseProcSwaps(*text);
}

bool HasSwap(const std::string& proc_swaps_path) {
  auto devices = ReadSwapDevices(nullptr, proc_swaps_path);
  if (!devices) return false;
  for (const auto& d : *devices) {
    if (d.size_bytes > 0) return true;
  }
  return false;
}

std::optional<MemoryPressure> ParseMemoryPressure(std::string_view text) {
  MemoryPressure pressure;
  bool found = false;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    auto fields = SplitFields(line);
    if (fields.empty()) continue;
    for (auto field : fields) {
      if (field.substr(0, 6) != "total=") continue;
      auto total = ParseUnsigned(field.substr(6));
      if (!total) continue;
      if (fields[0] == "some") {
        pressure.some_total_us = *total;
        found = true;
      } else if (fields[0] == "full") {
        pressure.full_total_us = *total;
      }
    }
  }
  if (!found) return std::nullopt;
  return pressure;
}

std::optional<MemoryPressure> ReadMemoryPressure(const std::string& path) {
  auto text = ReadFileToString(path, nullptr);
  if (!text) return std::nullopt;
  return ParseMemoryPressure(*text);
}

}  // namespace faultline::sys
