#include "agent/sys/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/sys/unique_fd.h"
#include "common/units.h"

namespace faultline::sys {

std::string ErrnoMessage(int error_number) {
  return std::strerror(error_number);
}

bool WriteToExistingFile(const std::string& path, std::string_view content, std::string* error) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) {
    if (error != nullptr) *error = path + ": " + ErrnoMessage(errno);
    return false;
  }
  ssize_t n;
  do {
    n = ::write(fd.get(), content.data(), content.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (error != nullptr) {
      *error = "writing '" + std::string(content) + "' to " + path + ": " + ErrnoMessage(errno);
    }
    return false;
  }
  if (static_cast<size_t>(n) != content.size()) {
    if (error != nullptr) *error = "short write to " + path;
    return false;
  }
  return true;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::map<std::string, uint64_t> ParseKeyValueLines(std::string_view text) {
  std::map<std::string, uint64_t> out;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0) continue;
    auto value = ParseUnsigned(line.substr(space + 1));
    if (!value) continue;
    out[std::string(line.substr(0, space))] = *value;
  }
  return out;
}

}  // namespace faultline::sys
