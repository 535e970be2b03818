#pragma once
// Files that must survive a crash or a reboot of the board (kernel switch records, the
// result spool): written to a temporary file, fsync'd, renamed over the target, and the
// directory fsync'd, so the target holds either the old or the new content, never a torn
// one, and exists after power loss once the call returned.
#include <string>

#include "absl/status/status.h"

namespace faultline::agent {

// Creates `dir` (and parents) when missing.
absl::Status WriteFileDurably(const std::string& dir, const std::string& name,
                              const std::string& content);
// Removes dir/name (absent is fine) and fsyncs the directory.
absl::Status RemoveFileDurably(const std::string& dir, const std::string& name);

}  // namespace faultline::agent
