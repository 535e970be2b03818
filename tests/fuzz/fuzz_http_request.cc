// libFuzzer: raw bytes from a client into the controller's HTTP server, over a real loopback
// connection to one long-lived server (the routes the controller has: /healthz inline,
// /readyz and /metrics coalesced on the worker pool; a POST route with a body; a route
// behind an authenticator, as /metrics is with --http-config's basic auth). Each
// input is sent, the client stops sending (shutdown), and everything the server answers is
// read until it closes. Checked: no crash or sanitizer report; the server closes within its
// deadlines (a hang traps); every answer is an HTTP/1.x response with one of the statuses
// the server is meant to send. The limits are small (1 KiB of header, 1 KiB of body, 1 s
// per request) so that inputs of libFuzzer's default length reach them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "services/controller/http/http_server.h"

using namespace faultline::controller;

namespace {

HttpServer& Server(int* port) {
  static int bound = 0;
  static HttpServer* server = [] {
    std::vector<HttpRoute> routes;
    routes.push_back(
        {"/healthz", {"GET", "HEAD"}, HttpRoute::Mode::kInline, [](const HttpRequest&) {
           return HttpResponse{200, "text/plain", "ok\n", {}};
         }});
    routes.push_back(
        {"/readyz", {"GET", "HEAD"}, HttpRoute::Mode::kCoalesced, [](const HttpRequest&) {
           return HttpResponse{503, "text/plain", "no\n", {}};
         }});
    routes.push_back(
        {"/metrics", {"GET", "HEAD"}, HttpRoute::Mode::kCoalesced, [](const HttpRequest&) {
           return HttpResponse{200, "text/plain; version=0.0.4", "up 1\n", {}};
         }});
    routes.push_back({"/alerts", {"POST"}, HttpRoute::Mode::kWorker, [](const HttpRequest& r) {
                        return HttpResponse{200, "text/plain", std::to_string(r.body.size()), {}};
                      }});
    routes.push_back({"/private",
                      {"GET", "HEAD"},
                      HttpRoute::Mode::kInline,
                      [](const HttpRequest&) {
                        return HttpResponse{200, "text/plain", "s\n", {}};
                      },
                      /*protect=*/true});
    HttpServerOptions o;
    o.authenticator = [](const std::string& authorization) {
      return authorization == "Basic b2s6b2s=";
    };
    o.request_timeout = std::chrono::milliseconds(1000);
    o.idle_timeout = std::chrono::milliseconds(1000);
    o.handler_timeout = std::chrono::milliseconds(1000);
    o.write_timeout = std::chrono::milliseconds(1000);
    o.header_limit = 1024;
    o.body_limit = 1024;
    auto* s = new HttpServer(std::move(routes), o);  // lives for the process
    auto p = s->Start("127.0.0.1:0");
    if (!p.ok()) std::abort();
    bound = *p;
    return s;
  }();
  *port = bound;
  return *server;
}

// What the input saw, for the report of a failure: when it failed, what came back and
// where the server's connections were (a rare failure must be readable from one log).
struct Trace {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  size_t sent = 0;
  std::string out;
  int recv_errno = 0;
  int connect_errno = 0;
};

[[noreturn]] void Fail(const char* what, const Trace& trace, HttpServer& server) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - trace.start)
                      .count();
  std::string head;
  for (size_t i = 0; i < trace.out.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(trace.out[i]);
    if (c >= 0x20 && c < 0x7f) {
      head += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      head += hex;
    }
  }
  const HttpServerStats st = server.Stats();
  std::fprintf(
      stderr,
      "fuzz_http_request: %s\n  after %lld ms; connect errno %d; sent %zu bytes; received "
      "%zu bytes (recv errno %d): \"%s\"\n  server: accepted %llu responses %llu timed_out %llu "
      "bad %llu open %d (idle %d reading %d handling %d writing %d)\n",
      what, static_cast<long long>(ms), trace.connect_errno, trace.sent, trace.out.size(),
      trace.recv_errno, head.c_str(), static_cast<unsigned long long>(st.accepted),
      static_cast<unsigned long long>(st.responses), static_cast<unsigned long long>(st.timed_out),
      static_cast<unsigned long long>(st.bad_requests), st.open, st.idle, st.reading, st.handling,
      st.writing);
  std::abort();
}

// libFuzzer's -timeout watchdog is a SIGALRM every few seconds, and a blocking connect(2)
// it interrupts fails with EINTR while the connection goes on being made (it cannot be
// restarted): wait for it then. (Once in ~100,000 inputs this failed the smoke test.)
bool Connect(int fd, const sockaddr_in& a, int* error) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) return true;
  if (errno != EINTR) {
    *error = errno;
    return false;
  }
  for (;;) {
    pollfd p{fd, POLLOUT, 0};
    int ready = poll(&p, 1, 5000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      *error = ready == 0 ? ETIMEDOUT : errno;
      return false;
    }
    socklen_t len = sizeof *error;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, error, &len) != 0) *error = errno;
    return *error == 0;
  }
}

bool KnownStatus(int s) {
  for (int k : {200, 400, 401, 404, 405, 413, 431, 500, 503}) {
    if (s == k) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int port = 0;
  HttpServer& server = Server(&port);
  Trace trace;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Fail("socket", trace, server);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!Connect(fd, a, &trace.connect_errno)) Fail("connect", trace, server);
  // The server may close before taking everything (a refused request): stop sending then.
  while (trace.sent < size) {
    ssize_t n = send(fd, data + trace.sent, size - trace.sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    trace.sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);

  // Every deadline of the server is 1 s; the answer (or the close) must come well within
  // the sum of them, even under the sanitizers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) Fail("the server kept the connection open past its deadlines", trace, server);
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) trace.recv_errno = errno;
    if (n <= 0) break;  // closed (or reset after a refusal)
    trace.out.append(buf, static_cast<size_t>(n));
  }
  close(fd);

  // Each answer starts "HTTP/1.x NNN " with a status the server means to send.
  const std::string& out = trace.out;
  if (!out.empty()) {
    if (out.size() < 13 || out.compare(0, 7, "HTTP/1.") != 0) {
      Fail("not an HTTP/1.x answer", trace, server);
    }
    int status = std::atoi(out.substr(9, 3).c_str());
    if (!KnownStatus(status)) Fail("unexpected status", trace, server);
  }
  // The session is gone before the next input (so inputs do not overlap).
  for (int i = 0; i < 50000 && server.Stats().open > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (server.Stats().open > 0) Fail("a session outlived its connection by 5 s", trace, server);
  return 0;
}
