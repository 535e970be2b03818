#include "common/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace faultline {
namespace {

// Sets *error and keeps errno as the failed call left it.
void Fail(std::string* error, const std::string& path, const char* what, int error_number) {
  if (error != nullptr) *error = path + ": " + what + std::strerror(error_number);
  errno = error_number;
}

}  // namespace

std::optional<std::string> ReadFileToString(const std::string& path, std::string* error,
                                            size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    Fail(error, path, "", errno);
    return std::nullopt;
  }
  const size_t want = limit == kNoReadLimit ? kNoReadLimit : limit + 1;
  std::string content;
  char buffer[8192];
  while (content.size() < want) {
    const size_t chunk = std::min(sizeof(buffer), want - content.size());
    const ssize_t n = ::read(fd, buffer, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int read_errno = errno;
      ::close(fd);
      Fail(error, path, "read: ", read_errno);
      return std::nullopt;
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

}  // namespace faultline
