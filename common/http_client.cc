#include "common/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace faultline::http_client {
namespace {

std::string SslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// One connection: a socket, and TLS over it for https.
class Connection {
 public:
  ~Connection() {
    if (ssl_ != nullptr) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Open(const Url& url, int timeout_seconds, const std::string& ca_file) {
    where_ = absl::StrCat(url.host, ":", url.port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(url.port);
    if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot resolve ", url.host, ": ", ::gai_strerror(rc)));
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(found, ::freeaddrinfo);
    std::string last = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd =
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) continue;
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        rc = ::poll(&p, 1, timeout_seconds * 1000);
        int err = 0;
        socklen_t len = sizeof(err);
        if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
          rc = 0;
        } else {
          errno = rc == 0 ? ETIMEDOUT : (err != 0 ? err : errno);
          rc = -1;
        }
      }
      if (rc != 0) {
        last = std::strerror(errno);
        ::close(fd);
        continue;
      }
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      timeval tv{timeout_seconds, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      fd_ = fd;
      break;
    }
    if (fd_ < 0)
      return absl::UnavailableError(absl::StrCat("cannot connect to ", where_, ": ", last));
    if (url.scheme != "https") return absl::OkStatus();
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (ctx_ == nullptr) return absl::InternalError(SslError());
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    const int loaded = ca_file.empty()
                           ? SSL_CTX_set_default_verify_paths(ctx_)
                           : SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
    if (loaded != 1) {
      return absl::FailedPreconditionError(absl::StrCat("cannot load CA certificates",
                                                        ca_file.empty() ? "" : " from " + ca_file,
                                                        ": ", SslError()));
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, url.host.c_str());
    SSL_set1_host(ssl_, url.host.c_str());
    if (SSL_connect(ssl_) != 1) {
      const long verify = SSL_get_verify_result(ssl_);
      return absl::UnavailableError(absl::StrCat(
          "TLS with ", where_,
          " failed: ", verify != X509_V_OK ? X509_verify_cert_error_string(verify) : SslError()));
    }
    return absl::OkStatus();
  }

  absl::Status Write(absl::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ssl_ != nullptr
                            ? SSL_write(ssl_, data.data(),
                                        static_cast<int>(std::min<size_t>(data.size(), 1 << 20)))
                            : ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) {
        if (ssl_ == nullptr && n < 0 && errno == EINTR) continue;
        return absl::UnavailableError(
            absl::StrCat("writing to ", where_,
                         " failed: ", ssl_ != nullptr ? SslError() : std::strerror(errno)));
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  // Appends what arrives to `buffer`; 0 at the end of the stream.
  absl::StatusOr<size_t> ReadSome(std::string& buffer) {
    char chunk[64 << 10];
    for (;;) {
      const ssize_t n = ssl_ != nullptr ? SSL_read(ssl_, chunk, sizeof(chunk))
                                        : ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n > 0) {
        buffer.append(chunk, static_cast<size_t>(n));
        return static_cast<size_t>(n);
      }
      if (n == 0 && ssl_ == nullptr) return 0;
      if (ssl_ != nullptr) {
        const int e = SSL_get_error(ssl_, static_cast<int>(n));
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        // The peer closed without close_notify: the end of the stream, as for plain TCP;
        // a body cut short is then caught by its length (Content-Length or chunking).
        if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno == 0) return 0;
        if (e == SSL_ERROR_SSL &&
            ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
          ERR_clear_error();
          return 0;
        }
      } else if (errno == EINTR) {
        continue;
      }
      return absl::UnavailableError(absl::StrCat("reading from ", where_, " failed: ",
                                                 errno == EAGAIN || errno == EWOULDBLOCK
                                                     ? "timed out"
                                                 : ssl_ != nullptr ? SslError()
                                                                   : std::strerror(errno)));
    }
  }

  const std::string& where() const { return where_; }

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string where_;
};

}  // namespace

std::string Url::Authority() const {
  const bool default_port = (scheme == "http" && port == 80) || (scheme == "https" && port == 443);
  return default_port ? host : absl::StrCat(host, ":", port);
}

absl::StatusOr<Url> ParseUrl(absl::string_view text) {
  Url url;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "http://")) {
    url.scheme = "http";
    url.port = 80;
  } else if (absl::ConsumePrefix(&rest, "https://")) {
    url.scheme = "https";
    url.port = 443;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text.substr(0, 80), "' is not an http:// or https:// URL"));
  }
  const size_t slash = rest.find_first_of("/?");
  absl::string_view authority = rest.substr(0, slash);
  url.target = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (url.target[0] == '?') url.target.insert(0, "/");
  if (authority.find('@') != absl::string_view::npos) {
    return absl::InvalidArgumentError("URLs with user info are not supported");
  }
  absl::string_view host = authority;
  if (!authority.empty() && authority[0] == '[') {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("bad IPv6 host");
    host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority[0] != ':') return absl::InvalidArgumentError("bad host");
  } else {
    const size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    authority = colon == absl::string_view::npos ? absl::string_view() : authority.substr(colon);
  }
  if (!authority.empty()) {
    authority.remove_prefix(1);  // ':'
    if (!absl::SimpleAtoi(authority, &url.port) || url.port <= 0 || url.port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("bad port '", authority, "'"));
    }
  }
  if (host.empty()) return absl::InvalidArgumentError("a URL needs a host");
  url.host = std::string(host);
  return url;
}

std::string UriEncode(absl::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

absl::StatusOr<Response> Send(const Request& request,
                              const std::function<absl::Status(absl::string_view)>& sink,
                              const std::function<absl::Status(const Response&)>& on_head) {
  absl::StatusOr<Url> url = ParseUrl(request.url);
  if (!url.ok()) return url.status();
  Connection conn;
  if (absl::Status s = conn.Open(*url, request.timeout_seconds, request.ca_file); !s.ok()) return s;
  std::string head =
      absl::StrCat(request.method, " ", url->target, " HTTP/1.1\r\nHost: ", url->Authority(),
                   "\r\nConnection: close\r\n");
  for (const auto& [k, v] : request.headers) absl::StrAppend(&head, k, ": ", v, "\r\n");
  if (!request.body.empty() || request.method == "PUT" || request.method == "POST") {
    absl::StrAppend(&head, "Content-Length: ", request.body.size(), "\r\n");
  }
  head += "\r\n";
  if (absl::Status s = conn.Write(head); !s.ok()) return s;
  if (absl::Status s = conn.Write(request.body); !s.ok()) return s;

  // The status line and headers.
  std::string buffer;
  size_t end_of_head;
  while ((end_of_head = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > (64 << 10)) {
      return absl::UnavailableError(absl::StrCat(conn.where(), ": response headers over 64 KiB"));
    }
    absl::StatusOr<size_t> n = conn.ReadSome(buffer);
    if (!n.ok()) return n.status();
    if (*n == 0) {
      return absl::UnavailableError(
          absl::StrCat(conn.where(), " closed the connection before a response"));
    }
  }
  Response response;
  absl::string_view lines(buffer.data(), end_of_head);
  const size_t first_end = lines.find("\r\n");
  const absl::string_view status_line = lines.substr(0, first_end);
  if (!absl::StartsWith(status_line, "HTTP/1.") || status_line.size() < 12 ||
      !absl::SimpleAtoi(status_line.substr(9, 3), &response.status)) {
    return absl::UnavailableError(
        absl::StrCat(conn.where(), ": not an HTTP response: '", status_line.substr(0, 40), "'"));
  }
  lines.remove_prefix(first_end == absl::string_view::npos ? lines.size() : first_end + 2);
  while (!lines.empty()) {
    const size_t e = lines.find("\r\n");
    const absl::string_view line = lines.substr(0, e);
    const size_t colon = line.find(':');
    if (colon != absl::string_view::npos) {
      response.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
    if (e == absl::string_view::npos) break;
    lines.remove_prefix(e + 2);
  }
  buffer.erase(0, end_of_head + 4);
  if (on_head) {
    if (absl::Status s = on_head(response); !s.ok()) return s;
  }

  const bool streamed = sink && response.status / 100 == 2;
  auto deliver = [&](absl::string_view data) -> absl::Status {
    if (streamed) return sink(data);
    response.body.append(data.data(), data.size());
    return absl::OkStatus();
  };
  if (request.method == "HEAD" || response.status == 204 || response.status == 304) return response;
  auto te = response.headers.find("transfer-encoding");
  if (te != response.headers.end() &&
      absl::AsciiStrToLower(te->second).find("chunked") != std::string::npos) {
    for (;;) {
      size_t line_end;
      while ((line_end = buffer.find("\r\n")) == std::string::npos) {
        absl::StatusOr<size_t> n = conn.ReadSome(buffer);
        if (!n.ok()) return n.status();
        if (*n == 0)
          return absl::DataLossError(absl::StrCat(conn.where(), ": chunked body cut short"));
      }
      uint64_t size = 0;
      const std::string size_text = buffer.substr(0, std::min(line_end, buffer.find(';')));
      if (!absl::SimpleHexAtoi(size_text, &size)) {
        return absl::DataLossError(
            absl::StrCat(conn.where(), ": bad chunk size '", size_text, "'"));
      }
      buffer.erase(0, line_end + 2);
      if (size == 0) return response;  // trailers ignored
      while (buffer.size() < size + 2) {
        absl::StatusOr<size_t> n = conn.ReadSome(buffer);
        if (!n.ok()) return n.status();
        if (*n == 0)
          return absl::DataLossError(absl::StrCat(conn.where(), ": chunked body cut short"));
      }
      if (absl::Status s = deliver(absl::string_view(buffer).substr(0, size)); !s.ok()) return s;
      buffer.erase(0, size + 2);
    }
  }
  auto cl = response.headers.find("content-length");
  uint64_t want = 0;
  const bool sized = cl != response.headers.end() && absl::SimpleAtoi(cl->second, &want);
  uint64_t got = 0;
  for (;;) {
    if (!buffer.empty()) {
      absl::string_view piece(buffer);
      if (sized && got + piece.size() > want) piece = piece.substr(0, want - got);
      if (absl::Status s = deliver(piece); !s.ok()) return s;
      got += piece.size();
      buffer.clear();
    }
    if (sized && got >= want) return response;
    absl::StatusOr<size_t> n = conn.ReadSome(buffer);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
  }
  if (sized && got < want) {
    return absl::DataLossError(
        absl::StrCat(conn.where(), ": body cut short at ", got, " of ", want, " bytes"));
  }
  return response;
}

}  // namespace faultline::http_client
