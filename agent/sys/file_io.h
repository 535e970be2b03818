#pragma once
// Small file helpers for procfs, sysfs and cgroupfs. Cgroup writes must be a single write() call
// because the kernel parses each write on its own.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/files.h"

namespace faultline::sys {

// Whole-file reads: the tree's one (common/files.h), named here for the system layer.
using ::faultline::ReadFileToString;

// Writes `content` with one write() to an existing file (no O_CREAT: cgroup files are
// created by the kernel, and a typo must not silently create a regular file).
bool WriteToExistingFile(const std::string& path, std::string_view content, std::string* error);

bool PathExists(const std::string& path);

// Parses "key value" lines (memory.stat, memory.events, /proc/vmstat, oom_control).
// Lines that are not "<word> <unsigned>" are skipped.
std::map<std::string, uint64_t> ParseKeyValueLines(std::string_view text);

// strerror() text, for error messages.
std::string ErrnoMessage(int error_number);

}  // namespace faultline::sys
