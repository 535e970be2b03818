#pragma once
// Byte sizes and durations as written in job specs and on command lines.
// Dependency-free: the workload binary cross-builds with it.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace faultline {

// "16M", "1.2G", "4096", "64K", "1T" (binary multiples, as systemd and cgroups use);
// an optional trailing "B"/"iB" is accepted ("16MiB"). "max" is not a size.
// Returns std::nullopt with a reason in *error on bad input.
std::optional<uint64_t> ParseSize(std::string_view text, std::string* error = nullptr);

// "5s", "500ms", "2m", "1h30m", "90" (seconds). Negative values are rejected.
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text,
                                                       std::string* error = nullptr);

// 16777216 -> "16M", 1288490188 -> "1.2G" (shortest exact-ish form for messages).
std::string FormatSize(uint64_t bytes);
std::string FormatDuration(std::chrono::milliseconds d);

// Plain non-negative decimal integer; nullopt on anything else (sign, junk, overflow).
std::optional<uint64_t> ParseUnsigned(std::string_view text);

}  // namespace faultline
