#include "robot/smtp.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace faultline::robot {
namespace {

class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Open(const std::string& server, std::chrono::seconds timeout) {
    const size_t colon = server.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("smtp: '", server, "' is not host:port"));
    }
    const std::string host = server.substr(0, colon), port = server.substr(colon + 1);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return absl::UnavailableError(absl::StrCat("smtp ", server, ": ", ::gai_strerror(rc)));
    }
    int last_errno = 0;
    for (addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      timeval tv{.tv_sec = static_cast<time_t>(timeout.count()), .tv_usec = 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last_errno = errno;
        ::close(fd);
      }
    }
    ::freeaddrinfo(found);
    if (fd_ < 0) {
      return absl::UnavailableError(
          absl::StrCat("smtp ", server, ": connect: ", std::strerror(last_errno)));
    }
    return absl::OkStatus();
  }
  absl::Status Write(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return absl::UnavailableError(absl::StrCat("smtp: write: ", std::strerror(errno)));
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }
  // One reply (its last line "NNN text"); its code in *code.
  absl::Status Read(int* code, std::string* text) {
    while (true) {
      const size_t eol = buffer_.find("\r\n");
      if (eol != std::string::npos) {
        std::string line = buffer_.substr(0, eol);
        buffer_.erase(0, eol + 2);
        if (line.size() >= 3 && (line.size() == 3 || line[3] == ' ')) {
          if (!absl::SimpleAtoi(line.substr(0, 3), code)) break;
          *text = line;
          return absl::OkStatus();
        }
        continue;  // "NNN-..." continuation lines
      }
      char chunk[4096];
      ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return absl::UnavailableError(n == 0 ? "smtp: the server closed the connection"
                                             : absl::StrCat("smtp: read: ", std::strerror(errno)));
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    return absl::UnavailableError("smtp: a reply without a code");
  }
  // Sends `command` (unless empty) and expects a reply of class `want` (2 or 3).
  absl::Status Step(const std::string& command, int want) {
    if (!command.empty()) {
      if (absl::Status s = Write(command + "\r\n"); !s.ok()) return s;
    }
    int code = 0;
    std::string text;
    if (absl::Status s = Read(&code, &text); !s.ok()) return s;
    if (code / 100 != want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "smtp: ", command.empty() ? "greeting" : command.substr(0, command.find(':')), ": ",
          text));
    }
    return absl::OkStatus();
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

// CRLF line ends, and a "." starting a line doubled (RFC 5321 4.5.2).
std::string DotStuffed(const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StartsWith(line, ".")) out.push_back('.');
    absl::StrAppend(&out, line, "\r\n");
  }
  if (absl::EndsWith(text, "\n")) out.resize(out.size() - 2);  // no empty last line
  return out;
}

}  // namespace

SmtpResult SendMail(const std::string& server, const std::string& envelope_from,
                    const std::vector<std::string>& recipients, const std::string& text,
                    std::chrono::seconds timeout) {
  SmtpResult result;
  Connection c;
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  if ((result.status = c.Open(server, timeout)).ok() && (result.status = c.Step("", 2)).ok() &&
      (result.status = c.Step(absl::StrCat("EHLO ", host), 2)).ok() &&
      (result.status = c.Step(absl::StrCat("MAIL FROM:<", envelope_from, ">"), 2)).ok()) {
    for (const std::string& to : recipients) {
      if (!(result.status = c.Step(absl::StrCat("RCPT TO:<", to, ">"), 2)).ok()) return result;
    }
    if (!(result.status = c.Step("DATA", 3)).ok()) return result;
    result.status = c.Write(DotStuffed(text) + "\r\n.\r\n");
    result.maybe_delivered = true;
    if (!result.status.ok() || !(result.status = c.Step("", 2)).ok()) return result;
    c.Step("QUIT", 2).IgnoreError();
  }
  return result;
}

}  // namespace faultline::robot
