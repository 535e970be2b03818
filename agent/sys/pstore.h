#pragma once
// What the kernel kept of the previous boot (pstore: ramoops, EFI variables): the tail of
// its console or log, for a board that came back from a kernel that did not boot.
#include <cstddef>
#include <string>

namespace faultline::sys {

// The last `max_bytes` of the newest console record in `dir` (console-*), else of the newest
// kernel log record (dmesg-*), as printable ASCII (other bytes become '?', lines kept);
// "" when there is none (no pstore, or nothing kept).
std::string PreviousBootLog(const std::string& dir, size_t max_bytes = 8000);

}  // namespace faultline::sys
