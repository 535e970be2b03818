#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/strings.h"

namespace faultline {
namespace {

void SetError(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
}

// Parses a leading decimal number with an optional fraction; returns chars consumed.
size_t ParseDecimal(std::string_view s, double* value) {
  size_t i = 0;
  double v = 0;
  bool digits = false;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    v = v * 10 + (s[i] - '0');
    ++i;
    digits = true;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    double scale = 0.1;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      v += (s[i] - '0') * scale;
      scale /= 10;
      ++i;
      digits = true;
    }
  }
  if (!digits) return 0;
  *value = v;
  return i;
}

}  // namespace

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  text = TrimSpace(text);
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<uint64_t> ParseSize(std::string_view text, std::string* error) {
  std::string_view s = TrimSpace(text);
  double value = 0;
  size_t n = ParseDecimal(s, &value);
  if (n == 0) {
    SetError(error, "'" + std::string(text) + "' is not a size (examples: 4096, 64K, 16M, 1.2G)");
    return std::nullopt;
  }
  std::string_view unit = TrimSpace(s.substr(n));
  double mult = 1;
  if (!unit.empty()) {
    switch (std::toupper(static_cast<unsigned char>(unit.front()))) {
      case 'B':
        mult = 1;
        break;
      case 'K':
        mult = 1024.0;
        break;
      case 'M':
        mult = 1024.0 * 1024;
        break;
      case 'G':
        mult = 1024.0 * 1024 * 1024;
        break;
      case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        SetError(error, "'" + std::string(text) + "' has an unknown size unit (use K, M, G or T)");
        return std::nullopt;
    }
    std::string_view rest = unit.substr(1);
    if (!(rest.empty() || rest == "B" || rest == "b" || rest == "iB" || rest == "ib") ||
        ((unit.front() == 'B' || unit.front() == 'b') && !rest.empty())) {
      SetError(error, "'" + std::string(text) + "' has an unknown size unit (use K, M, G or T)");
      return std::nullopt;
    }
  }
  double bytes = std::floor(value * mult);
  if (bytes >= 1.8e19) {
    SetError(error, "'" + std::string(text) + "' is too large");
    return std::nullopt;
  }
  return static_cast<uint64_t>(bytes);
}

std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text, std::string* error) {
  std::string_view s = TrimSpace(text);
  if (s.empty()) {
    SetError(error, "empty duration (examples: 30s, 500ms, 2m, 1h30m)");
    return std::nullopt;
  }
  if (auto plain = ParseUnsigned(s)) {
    if (*plain > 100ull * 365 * 24 * 3600) {
      SetError(error, "'" + std::string(text) + "' is too long");
      return std::nullopt;
    }
    return std::chrono::milliseconds(*plain * 1000);
  }
  double total_ms = 0;
  while (!s.empty()) {
    double value = 0;
    size_t n = ParseDecimal(s, &value);
    if (n == 0) {
      SetError(error,
               "'" + std::string(text) + "' is not a duration (examples: 30s, 500ms, 2m, 1h30m)");
      return std::nullopt;
    }
    s.remove_prefix(n);
    size_t u = 0;
    while (u < s.size() && std::isalpha(static_cast<unsigned char>(s[u]))) ++u;
    std::string_view unit = s.substr(0, u);
    s.remove_prefix(u);
    double scale;
    if (unit == "ms")
      scale = 1;
    else if (unit == "s")
      scale = 1000;
    else if (unit == "m" || unit == "min")
      scale = 60'000;
    else if (unit == "h")
      scale = 3'600'000;
    else if (unit == "d")
      scale = 86'400'000;
    else {
      SetError(error, "'" + std::string(text) + "' has an unknown duration unit (use ms, s, m, h)");
      return std::nullopt;
    }
    total_ms += value * scale;
  }
  if (total_ms > 100.0 * 365 * 86'400'000) {
    SetError(error, "'" + std::string(text) + "' is too long");
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"", "K", "M", "G", "T"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (std::fabs(v - std::round(v)) < 1e-9) {
    std::snprintf(buf, sizeof buf, "%.0f%s", v, kUnits[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g%s", v, kUnits[u]);
  }
  return buf;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  char buf[32];
  if (ms % 1000 != 0) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(ms));
  } else if (ms % 3'600'000 == 0 && ms > 0) {
    std::snprintf(buf, sizeof buf, "%lldh", static_cast<long long>(ms / 3'600'000));
  } else if (ms % 60'000 == 0 && ms > 0) {
    std::snprintf(buf, sizeof buf, "%lldm", static_cast<long long>(ms / 60'000));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
  }
  return buf;
}

}  // namespace faultline
