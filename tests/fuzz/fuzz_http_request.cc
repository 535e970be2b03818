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

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "services/controller/api/http_server.h"

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

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_http_request: %s\n", what);
  std::abort();
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
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Fail("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Fail("connect");
  // The server may close before taking everything (a refused request): stop sending then.
  size_t off = 0;
  while (off < size) {
    ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);

  // Every deadline of the server is 1 s; the answer (or the close) must come well within
  // the sum of them, even under the sanitizers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::string out;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) Fail("the server kept the connection open past its deadlines");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;  // closed (or reset after a refusal)
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);

  // Each answer starts "HTTP/1.x NNN " with a status the server means to send.
  if (!out.empty()) {
    if (out.size() < 13 || out.compare(0, 7, "HTTP/1.") != 0) Fail("not an HTTP/1.x answer");
    int status = std::atoi(out.substr(9, 3).c_str());
    if (!KnownStatus(status)) Fail("unexpected status");
  }
  // The session is gone before the next input (so inputs do not overlap).
  for (int i = 0; i < 50000 && server.Stats().open > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (server.Stats().open > 0) Fail("a session outlived its connection by 5 s");
  return 0;
}
