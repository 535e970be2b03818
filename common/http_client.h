#pragma once
// A small HTTP/1.1 client (one request per connection, http:// and https:// through
// OpenSSL with the peer's certificate and name verified): what the controller needs to put
// kernel images into an object store and the agent to fetch them by URL.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace faultline::http_client {

struct Url {
  std::string scheme;  // http | https
  std::string host;
  int port = 0;
  std::string target;  // path and query, "/" at least
  // host, or host:port when the port is not the scheme's default (the Host header).
  std::string Authority() const;
};
// INVALID_ARGUMENT naming what is wrong (only http:// and https://, no user info).
absl::StatusOr<Url> ParseUrl(absl::string_view url);

struct Request {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // Host and Content-Length added
  std::string body;
  int timeout_seconds = 60;  // connect, and each read or write
  std::string ca_file;       // https: trust these CAs instead of the system's
};

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lowercase
  std::string body;                            // unless streamed to a sink
};

// Sends `request` and reads the whole response. With `sink`, a 2xx response's body goes to
// it in pieces (not into Response::body). Errors: UNAVAILABLE for connection and transfer
// failures (with the host and the reason), INVALID_ARGUMENT for a bad URL, DATA_LOSS for a
// body shorter than its Content-Length; a non-2xx status is not an error (see `status`).
// `on_head` (optional) sees the status and headers before any of the body; an error from
// it ends the request with that error.
absl::StatusOr<Response> Send(const Request& request,
                              const std::function<absl::Status(absl::string_view)>& sink = {},
                              const std::function<absl::Status(const Response&)>& on_head = {});

// RFC 3986 percent-encoding of everything but unreserved characters (and '/' if kept).
std::string UriEncode(absl::string_view text, bool keep_slash);

}  // namespace faultline::http_client
