#pragma once
// The one way the tree reads a whole file. Dependency-free (the boards' portable agent
// parts use it); common/read_file.h gives the same read as an absl::StatusOr.
#include <cstddef>
#include <optional>
#include <string>

namespace faultline {

inline constexpr size_t kNoReadLimit = static_cast<size_t>(-1);

// Reads the file to EOF: procfs, sysfs and cgroupfs files report bogus sizes (0 or 4096),
// so the size is never taken from stat. With a limit, at most limit + 1 bytes are read, so
// a caller can tell a file that is too large without reading all of it. On failure returns
// nullopt, sets *error (when given) to "<path>: <strerror>" (it cannot be opened) or
// "<path>: read: <strerror>", and leaves errno as the failed call set it.
std::optional<std::string> ReadFileToString(const std::string& path, std::string* error,
                                            size_t limit = kNoReadLimit);

}  // namespace faultline
