#pragma once
// common/files.h's read as an absl::StatusOr, for the parts that speak absl::Status.
#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/files.h"

namespace faultline {

// NOT_FOUND "<path>: No such file or directory" when it does not exist, PERMISSION_DENIED
// when it may not be read, else INTERNAL; see ReadFileToString for the limit.
inline absl::StatusOr<std::string> ReadFile(const std::string& path, size_t limit = kNoReadLimit) {
  std::string error;
  std::optional<std::string> text = ReadFileToString(path, &error, limit);
  if (text.has_value()) return *std::move(text);
  switch (errno) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(error);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(error);
    default:
      return absl::InternalError(error);
  }
}

}  // namespace faultline
