// The HTTP server against real sockets on 127.0.0.1: routing and methods, keep-alive,
// deadlines, size limits, the connection cap and the worker routes. Short timeouts keep it
// fast; every wait is for an event (an answer, a close) with a generous upper bound.
#include "services/controller/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "tests/support/gate.h"

namespace faultline::controller {
namespace {

using testing_support::Gate;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(HttpRouting, GetRoutesServeHeadAndListBothInAllow) {
  std::vector<HttpRoute> routes = {{"/metrics", {"GET"}, HttpRoute::Mode::kInline, nullptr},
                                   {"/alerts", {"POST"}, HttpRoute::Mode::kWorker, nullptr}};
  const HttpRoute* metrics = FindRoute(routes, "/metrics");
  ASSERT_NE(metrics, nullptr);
  EXPECT_EQ(FindRoute(routes, "/metrics/"), nullptr);
  EXPECT_EQ(FindRoute(routes, "/nope"), nullptr);
  std::string allow;
  EXPECT_TRUE(RouteAllows(*metrics, "GET", &allow));
  EXPECT_TRUE(RouteAllows(*metrics, "HEAD", &allow));
  EXPECT_EQ(allow, "GET, HEAD");
  EXPECT_FALSE(RouteAllows(*metrics, "BREW", &allow));
  EXPECT_FALSE(RouteAllows(*metrics, "get", &allow));  // methods are case-sensitive
  EXPECT_FALSE(RouteAllows(*metrics, "POST", &allow));
  const HttpRoute* alerts = FindRoute(routes, "/alerts");
  ASSERT_NE(alerts, nullptr);
  EXPECT_TRUE(RouteAllows(*alerts, "POST", &allow));
  EXPECT_FALSE(RouteAllows(*alerts, "HEAD", &allow));
  EXPECT_EQ(allow, "POST");
}

// ---- a minimal blocking client on POSIX sockets, every wait bounded ----

struct Reply {
  int status = 0;                              // 0: no answer (closed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class Conn {
 public:
  explicit Conn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Conn() { close(fd_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads one response (for HEAD: no body whatever Content-Length says).
  Reply Read(bool head = false, milliseconds timeout = milliseconds(5000)) {
    Reply r;
    const auto deadline = Clock::now() + timeout;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return r;
    }
    std::string head_text = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    size_t line_end = head_text.find("\r\n");
    std::string status_line = head_text.substr(0, line_end);
    if (status_line.size() < 12) return r;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end;
    while (pos != std::string::npos && pos < head_text.size()) {
      size_t next = head_text.find("\r\n", pos + 2);
      std::string field =
          head_text.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
      auto colon = field.find(':');
      if (colon != std::string::npos) {
        std::string name = field.substr(0, colon);
        for (char& c : name) c = static_cast<char>(tolower(c));
        std::string value = field.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers[name] = value;
      }
      pos = next;
    }
    size_t length = r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    if (head) length = 0;
    while (buf_.size() < length) {
      if (!Fill(deadline)) return Reply{};
    }
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  Reply Get(const std::string& method, const std::string& path) {
    if (!Send(method + " " + path + " HTTP/1.1\r\nHost: t\r\n\r\n")) return {};
    return Read(method == "HEAD");
  }

  // Waits (bounded) until the server closes; returns how long that took, or -1 ms.
  milliseconds WaitClosed(milliseconds timeout = milliseconds(5000)) {
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    while (Fill(deadline)) buf_.clear();
    if (!eof_) return milliseconds(-1);
    return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  }
  // True when the server has not closed (nothing pending to read now, no EOF).
  bool OpenNow() {
    char c;
    ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

 private:
  bool Fill(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char tmp[4096];
    ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    std::vector<HttpRoute> routes;
    routes.push_back(
        {"/healthz", {"GET", "HEAD"}, HttpRoute::Mode::kInline, [](const HttpRequest&) {
           return HttpResponse{200, "text/plain", "ok\n", {}};
         }});
    routes.push_back({"/slow", {"GET"}, HttpRoute::Mode::kWorker, [this](const HttpRequest&) {
                        slow_gate_.Wait();
                        return HttpResponse{200, "text/plain", "slow\n", {}};
                      }});
    routes.push_back({"/shared", {"GET"}, HttpRoute::Mode::kCoalesced, [this](const HttpRequest&) {
                        int now = ++shared_running_;
                        int seen = shared_max_running_.load();
                        while (now > seen &&
                               !shared_max_running_.compare_exchange_weak(seen, now)) {
                        }
                        ++shared_calls_;
                        shared_gate_.Wait();
                        --shared_running_;
                        return HttpResponse{200, "text/plain", "shared\n", {}};
                      }});
    routes.push_back({"/parts", {"GET"}, HttpRoute::Mode::kCoalesced, [this](const HttpRequest&) {
                        HttpResponse r{200, "text/plain", "head\n", {}};
                        r.shared_body = {big_part_, std::make_shared<const std::string>(),
                                         std::make_shared<const std::string>("tail\n")};
                        return r;
                      }});
    routes.push_back({"/upload", {"POST"}, HttpRoute::Mode::kWorker, [](const HttpRequest& r) {
                        return HttpResponse{200, "text/plain", std::to_string(r.body.size()), {}};
                      }});
    routes.push_back(
        {"/throws", {"GET"}, HttpRoute::Mode::kInline, [](const HttpRequest& r) -> HttpResponse {
           throw std::runtime_error(r.path);
         }});
    routes.push_back({"/private",
                      {"GET"},
                      HttpRoute::Mode::kInline,
                      [](const HttpRequest&) {
                        return HttpResponse{200, "text/plain", "secret\n", {}};
                      },
                      /*protect=*/true});
    server_ = std::make_unique<HttpServer>(std::move(routes), options);
    auto port = server_->Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }
  void TearDown() override {
    slow_gate_.Open();
    shared_gate_.Open();
    if (server_) server_->Stop();
  }
  // Waits (bounded, polling) until the server holds `open` connections, `reading` of them
  // receiving a request and `idle` waiting for one (-1: any number). A client has its
  // answer before the server's write completion has run, so "idle" must be waited for.
  bool WaitOpen(int open, int reading = -1, int idle = -1) {
    for (int i = 0; i < 1000; ++i) {
      HttpServerStats s = server_->Stats();
      if (s.open == open && (reading < 0 || s.reading == reading) && (idle < 0 || s.idle == idle)) {
        return true;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    return false;
  }
  // A fresh connection's GET /healthz, timed.
  std::pair<Reply, milliseconds> Probe() {
    auto start = Clock::now();
    Conn c(port_);
    Reply r = c.Get("GET", "/healthz");
    return {r, std::chrono::duration_cast<milliseconds>(Clock::now() - start)};
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  Gate slow_gate_, shared_gate_;
  std::atomic<int> shared_running_{0}, shared_max_running_{0}, shared_calls_{0};
  std::shared_ptr<const std::string> big_part_ =
      std::make_shared<const std::string>(std::string(300000, 'x'));  // several socket writes
};

TEST_F(HttpServerTest, SharedBodyPartsFollowTheBodyUncopied) {
  StartServer();
  Conn c(port_);
  const std::string expected = "head\n" + *big_part_ + "tail\n";
  for (int i = 0; i < 2; ++i) {  // the kept part serves every request
    Reply r = c.Get("GET", "/parts");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.headers["content-length"], std::to_string(expected.size()));
    EXPECT_EQ(r.body, expected);
  }
  Reply head = c.Get("HEAD", "/parts");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["content-length"], std::to_string(expected.size()));
  EXPECT_TRUE(head.body.empty());
}

TEST_F(HttpServerTest, MethodsPathsAndNoEcho) {
  StartServer();
  Conn c(port_);
  Reply r = c.Get("GET", "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  r = c.Get("HEAD", "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-length"], "3");  // what GET would send
  r = c.Get("BREW", "/healthz");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, HEAD");
  r = c.Get("GET", "/upload");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  r = c.Get("GET", "/healthz?verbose=1");  // a query does not change the route
  EXPECT_EQ(r.status, 200);
  r = c.Get("GET", "/%3Cscript%3Eecho-me");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body.find("echo-me"), std::string::npos);
  r = c.Get("BREW", "/echo-me");  // unknown path: 404 whatever the method
  EXPECT_EQ(r.status, 404);
  r = c.Get("GET", "/throws");  // the exception's text quotes the path: not sent
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("throws"), std::string::npos);
  ASSERT_TRUE(c.Send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"));
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "5");
  // All of it on one kept-alive connection; a malformed request is 400 and closes.
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n"));
  r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_GE(c.WaitClosed().count(), 0);
}

TEST_F(HttpServerTest, ProtectedRoutesNeedTheAuthenticatorsConsent) {
  HttpServerOptions o;
  std::atomic<int> checks{0};
  o.authenticator = [&](const std::string& authorization) {
    ++checks;
    return authorization == "Basic b2s6b2s=";
  };
  StartServer(o);
  Conn c(port_);
  Reply r = c.Get("GET", "/private");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.headers["www-authenticate"], "Basic realm=\"faultline\"");
  EXPECT_EQ(r.body.find("secret"), std::string::npos);
  ASSERT_TRUE(c.Send("GET /private HTTP/1.1\r\nAuthorization: Basic bm86bm8=\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 401);
  ASSERT_TRUE(c.Send("GET /private HTTP/1.1\r\nAuthorization: Basic b2s6b2s=\r\n\r\n"));
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "secret\n");
  EXPECT_EQ(c.Get("GET", "/healthz").status, 200);  // not protected: no header needed
  EXPECT_EQ(checks.load(), 2);                      // no header: refused without asking
  EXPECT_EQ(server_->Stats().unauthorized, 2u);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  Conn c(port_);
  ASSERT_TRUE(
      c.Send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /nope HTTP/1.1\r\nHost: t\r\n\r\n"
             "HEAD /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 200);
  EXPECT_EQ(c.Read().status, 404);
  Reply last = c.Read(true);
  EXPECT_EQ(last.status, 200);
  EXPECT_EQ(last.headers["connection"], "close");
  EXPECT_GE(c.WaitClosed().count(), 0);
}

TEST_F(HttpServerTest, IdleKeptAliveConnectionIsClosedAfterTheIdleTimeout) {
  HttpServerOptions o;
  o.idle_timeout = milliseconds(300);
  StartServer(o);
  Conn c(port_);
  EXPECT_EQ(c.Get("GET", "/healthz").status, 200);
  milliseconds closed_after = c.WaitClosed();
  EXPECT_GE(closed_after.count(), 250);
  EXPECT_LT(closed_after.count(), 3000);
}

// Whether the others are served meanwhile is asked of the server's own order of events, not
// of a wall-clock bound: a server that waited on the slow clients would answer the first
// probe only after cutting one of them (timed_out > 0). (A 100 ms bound on each probe failed
// on a loaded 2-core machine: 166 ms.)
TEST_F(HttpServerTest, SlowAndSilentClientsAreCutOffAtTheRequestDeadline) {
  HttpServerOptions o;
  o.request_timeout = milliseconds(1000);
  StartServer(o);
  Conn silent(port_), partial(port_), drip(port_);
  ASSERT_TRUE(partial.Send("GET /healthz HTTP/1.1\r\n"));
  const auto start = Clock::now();
  // The drip client sends a byte every 50 ms: progress, but not a request within 1 s.
  std::string request = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Padding: aaaaaaaaaaaaaaaa\r\n\r\n";
  bool drip_cut = false, first = true;
  for (char ch : request) {
    if (!drip.Send(std::string(1, ch))) {
      drip_cut = true;
      break;
    }
    auto [r, took] = Probe();  // meanwhile others are served at once
    EXPECT_EQ(r.status, 200);
    if (first) {
      EXPECT_EQ(server_->Stats().timed_out, 0u)
          << "the first probe (" << took.count() << " ms) waited for a slow client's deadline";
      first = false;
    }
    std::this_thread::sleep_for(milliseconds(50));  // the drip's pace, not a wait for the server
    if (Clock::now() - start > milliseconds(3000)) break;
  }
  Reply late = drip.Read(false, milliseconds(3000));
  EXPECT_TRUE(drip_cut || late.status == 0) << "the drip client was answered: " << late.status;
  EXPECT_GE(silent.WaitClosed().count(), 0);
  EXPECT_GE(partial.WaitClosed().count(), 0);
  auto since = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  EXPECT_GE(since, 900) << "cut before the deadline";
  EXPECT_LT(since, 10000);
  EXPECT_GE(server_->Stats().timed_out, 3u);
}

TEST_F(HttpServerTest, OversizedHeaderIs431AndOversizedBodyIs413WithoutReadingIt) {
  HttpServerOptions o;
  o.header_limit = 8 * 1024;
  o.body_limit = 64 * 1024;
  StartServer(o);
  {
    Conn c(port_);
    ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(16 * 1024, 'a') +
                       "\r\n\r\n"));
    Reply r = c.Read();
    EXPECT_EQ(r.status, 431);
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_GE(c.WaitClosed().count(), 0);
  }
  {
    // A declared 1 TB body: refused on the header; the client never sends a byte of it.
    Conn c(port_);
    ASSERT_TRUE(
        c.Send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000000\r\n\r\n"));
    Reply r = c.Read(false, milliseconds(2000));
    EXPECT_EQ(r.status, 413);
    EXPECT_GE(c.WaitClosed().count(), 0);
  }
  {
    // Chunked: no declared length; refused once the chunks pass the limit.
    Conn c(port_);
    ASSERT_TRUE(c.Send("POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
    std::string chunk = "8000\r\n" + std::string(0x8000, 'x') + "\r\n";
    for (int i = 0; i < 3; ++i) {
      if (!c.Send(chunk)) break;
    }
    Reply r = c.Read(false, milliseconds(2000));
    EXPECT_EQ(r.status, 413);
  }
  auto stats = server_->Stats();
  EXPECT_EQ(stats.header_too_large, 1u);
  EXPECT_EQ(stats.body_too_large, 2u);
}

TEST_F(HttpServerTest, AtTheCapTheLongestIdleConnectionMakesRoom) {
  HttpServerOptions o;
  o.max_connections = 3;
  StartServer(o);
  // `reading` is the oldest but has begun a request; the two silent ones are idle.
  Conn reading(port_);
  ASSERT_TRUE(reading.Send("GET /healthz HTTP/1.1\r\n"));
  Conn idle1(port_);
  Conn idle2(port_);
  ASSERT_TRUE(WaitOpen(3, 1));
  Conn a(port_);  // at the cap: idle1 makes room
  EXPECT_EQ(a.Get("GET", "/healthz").status, 200);
  EXPECT_GE(idle1.WaitClosed().count(), 0);
  ASSERT_TRUE(WaitOpen(3, 1, 2));  // reading; idle2 and a idle
  Conn b(port_);                   // idle2 is the longest idle now (a went idle after its answer)
  EXPECT_EQ(b.Get("GET", "/healthz").status, 200);
  EXPECT_GE(idle2.WaitClosed().count(), 0);
  ASSERT_TRUE(WaitOpen(3, 1, 2));  // reading; a and b idle
  Conn c(port_);  // then a, the oldest kept-alive one; `reading` is older but not idle
  EXPECT_EQ(c.Get("GET", "/healthz").status, 200);
  EXPECT_GE(a.WaitClosed().count(), 0);
  EXPECT_TRUE(reading.OpenNow());
  EXPECT_TRUE(b.OpenNow());
  EXPECT_EQ(server_->Stats().dropped_for_newcomer, 3u);
}

TEST_F(HttpServerTest, AtTheCapAPartialRequestGoesBeforeOneWaitingForItsHandler) {
  HttpServerOptions o;
  o.max_connections = 3;
  StartServer(o);
  Conn slow1(port_), slow2(port_);
  ASSERT_TRUE(slow1.Send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"));
  ASSERT_TRUE(slow2.Send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"));
  slow_gate_.WaitForWaiters(2);
  Conn reading(port_);  // the youngest, mid-request
  ASSERT_TRUE(reading.Send("GET /healthz HTTP/1.1\r\n"));
  ASSERT_TRUE(WaitOpen(3, 1));
  auto [r, took] = Probe();
  EXPECT_EQ(r.status, 200);
  EXPECT_GE(reading.WaitClosed().count(), 0);
  EXPECT_TRUE(slow1.OpenNow());
  EXPECT_TRUE(slow2.OpenNow());
  slow_gate_.Open();
  EXPECT_EQ(slow1.Read().status, 200);
  EXPECT_EQ(slow2.Read().status, 200);
}

TEST_F(HttpServerTest, ABlockedHandlerTimesOutWith503AndBlocksNothingElse) {
  HttpServerOptions o;
  o.handler_timeout = milliseconds(1000);
  StartServer(o);
  Conn slow(port_);
  ASSERT_TRUE(slow.Send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"));
  slow_gate_.WaitForWaiters(1);
  for (int i = 0; i < 5; ++i) {
    auto [r, took] = Probe();
    EXPECT_EQ(r.status, 200);
    // Answered before the blocked one's 503, in the server's order (not a wall-clock bound).
    if (i == 0) {
      EXPECT_EQ(server_->Stats().responses, 1u) << "first probe: " << took.count() << " ms";
    }
  }
  Reply r = slow.Read();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["connection"], "close");
}

TEST_F(HttpServerTest, CoalescedRouteRunsOneCallAtATimeForAFlood) {
  StartServer();
  constexpr int kClients = 20;
  std::vector<std::unique_ptr<Conn>> conns;
  for (int i = 0; i < kClients; ++i) {
    conns.push_back(std::make_unique<Conn>(port_));
    ASSERT_TRUE(conns.back()->Send("GET /shared HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  shared_gate_.WaitForWaiters(1);
  {
    // The worker is busy until the gate opens below: an answer now is not behind it.
    auto [r, took] = Probe();
    EXPECT_EQ(r.status, 200) << took.count() << " ms";
  }
  shared_gate_.Open();
  for (auto& c : conns) {
    Reply r = c->Read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "shared\n");
  }
  EXPECT_EQ(shared_max_running_.load(), 1);
  EXPECT_LT(shared_calls_.load(), kClients);
  std::cout << "coalesced: " << kClients << " requests, " << shared_calls_.load() << " calls\n";
}

}  // namespace
}  // namespace faultline::controller
