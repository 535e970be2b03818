#pragma once
// The controller's small HTTP/1.1 server (Boost.Beast) for /healthz, /readyz and /metrics.
//
// Built to survive slow and hostile clients: one asynchronous session per connection on a
// small io thread pool, a deadline on every read and write, caps on header and body size
// and on the number of connections (the connection that has waited longest for its client
// is dropped first), keep-alive with an idle timeout. Routes say how their handler runs:
// inline on an io thread (must never block: /healthz), or on a worker pool (may block:
// database queries), optionally coalesced so that a flood of requests becomes one call at a
// time. Only the methods a route lists are served (HEAD wherever GET is); others get 405
// with `Allow`, unknown paths 404, and nothing of the request is ever echoed back.
// Optionally TLS on every connection and an authenticator for protected routes (see
// http_config.h for --http-config, the exporter-toolkit's web config).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace faultline::controller {

struct HttpRequest {
  std::string method;  // as sent, e.g. "GET"
  std::string path;    // the target without its query
  std::string query;   // after '?', may be empty
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra header fields
  // Sent after `body` as they are, never copied: parts a handler keeps between requests
  // (a large /metrics body is mostly text rendered once).
  std::vector<std::shared_ptr<const std::string>> shared_body;
};

struct HttpRoute {
  enum class Mode {
    // Called on an io thread: must answer at once, never block (no database, no I/O).
    kInline,
    // Called on the worker pool, once per request: may block.
    kWorker,
    // Called on the worker pool, at most one call in flight: requests that arrive during a
    // call wait for the next one, which starts after they arrived, and share its answer. A
    // flood of requests costs one call at a time; the handler must not depend on anything
    // of the request but its path.
    kCoalesced,
  };
  std::string path;
  std::vector<std::string> methods = {"GET", "HEAD"};  // HEAD is answered wherever GET is
  Mode mode = Mode::kInline;
  std::function<HttpResponse(const HttpRequest&)> handler;
  bool protect = false;  // needs the authenticator's consent when the server has one
};

struct HttpServerOptions {
  int io_threads = 2;
  // Blocking handlers. Coalesced routes hold at most one thread each.
  int worker_threads = 4;
  // From a request's first byte (a new connection: from the accept) until its header and
  // body are read. A client slower than this is cut off.
  std::chrono::milliseconds request_timeout{10'000};
  // A kept-alive connection waits this long for its next request.
  std::chrono::milliseconds idle_timeout{90'000};
  // A blocking handler (worker or coalesced route) must answer within this, else 503.
  std::chrono::milliseconds handler_timeout{10'000};
  // Each response must be written within this.
  std::chrono::milliseconds write_timeout{10'000};
  uint32_t header_limit = 8 * 1024;  // request line + header fields; larger: 431
  uint64_t body_limit = 64 * 1024;   // declared or sent; larger: 413, not read
  // Open connections at most. At the cap a new connection replaces the one that has waited
  // longest for its client (idle keep-alive first, then a request still being read); when
  // every connection is busy being answered, the new one is closed.
  int max_connections = 512;
  // Set: routes with `protect` need an "Authorization" header it accepts, else 401 with
  // WWW-Authenticate. It may be slow (bcrypt), so it runs on a thread of its own, never on
  // the io threads or the workers of other routes.
  std::function<bool(const std::string& authorization)> authenticator;
  std::string auth_realm = "faultline";
  // Set: TLS on every connection (PEM files, loaded at Start; the handshake counts against
  // request_timeout). With a client CA, clients must present a certificate it signed
  // (tls_require_client_cert) or may present one.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  bool tls_require_client_cert = false;
  bool tls13_only = false;  // else TLS 1.2 and 1.3
};

// What the server has done, for tests and logs.
struct HttpServerStats {
  uint64_t accepted = 0;
  uint64_t dropped_for_newcomer = 0;  // closed at the cap to make room
  uint64_t refused_at_cap = 0;        // new connections closed: every slot busy
  uint64_t timed_out = 0;             // cut off by a read or write deadline
  uint64_t header_too_large = 0;      // 431
  uint64_t body_too_large = 0;        // 413
  uint64_t bad_requests = 0;          // 400
  uint64_t unauthorized = 0;          // 401
  uint64_t tls_handshake_failed = 0;  // not TLS, or a certificate refused
  uint64_t responses = 0;
  int open = 0;      // connections now; of them:
  int idle = 0;      //   waiting for a request (or lingering after the last answer)
  int reading = 0;   //   receiving a request
  int handling = 0;  //   waiting for a handler
  int writing = 0;   //   sending an answer
};

class HttpServer {
 public:
  explicit HttpServer(std::vector<HttpRoute> routes, HttpServerOptions options = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Binds "HOST:PORT" (port 0 picks a free one) and starts serving; returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  // Stops accepting and ends every connection; waits for handlers already running.
  void Stop();
  HttpServerStats Stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "HOST:PORT" ("[::1]:80" too). Returns false on malformed input.
bool SplitHostPort(const std::string& listen, std::string* host, int* port);

// Routing without the network (the server's own decision, exposed for tests): the route for
// a path, or nullptr; and whether a route serves a method. *allow gets the Allow header.
const HttpRoute* FindRoute(const std::vector<HttpRoute>& routes, const std::string& path);
bool RouteAllows(const HttpRoute& route, const std::string& method, std::string* allow);

}  // namespace faultline::controller
