#pragma once
// Inside http/: the server's shared state (HttpServer::Impl) and what its sessions use.
// Included by http_server.cc and server_session.h only.
#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "services/controller/http/http_server.h"

namespace faultline::controller {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// The server's own pieces (a named namespace: an anonymous one in a header gives every
// includer its own types, which Impl's members then use: -Wsubobject-linkage).
namespace http_internal {

// A response body of shared strings, written as one gather write: a handler's kept parts
// (HttpResponse::shared_body) reach the socket without a copy.
struct SharedPartsBody {
  using value_type = std::vector<std::shared_ptr<const std::string>>;
  static std::uint64_t size(const value_type& parts) {
    std::uint64_t n = 0;
    for (const auto& p : parts) n += p->size();
    return n;
  }
  class writer {
   public:
    using const_buffers_type = std::vector<boost::asio::const_buffer>;
    template <bool isRequest, class Fields>
    writer(const boost::beast::http::header<isRequest, Fields>&, const value_type& parts)
        : parts_(parts) {}
    void init(boost::beast::error_code& ec) { ec = {}; }
    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec) {
      ec = {};
      if (done_) return boost::none;
      done_ = true;
      const_buffers_type buffers;
      for (const auto& p : parts_) {
        if (!p->empty()) buffers.emplace_back(p->data(), p->size());
      }
      if (buffers.empty()) return boost::none;
      return std::make_pair(std::move(buffers), false);
    }

   private:
    const value_type& parts_;
    bool done_ = false;
  };
};

// Where a connection is; the cap drops the one that has waited longest in the lowest phase.
enum class Phase { kIdle, kReading, kHandling, kWriting };

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

inline HttpResponse Text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body), {}};
}

inline HttpResponse CallHandler(const HttpRoute& route, const HttpRequest& request) {
  try {
    return route.handler(request);
  } catch (const std::exception&) {
    return Text(500, "internal error\n");  // never the exception text: it may quote the request
  }
}

}  // namespace http_internal
using namespace http_internal;  // NOLINT(google-build-using-namespace): the server's files only

// What every session shares with the server: options, routes, the worker pool, the set of
// open connections for the cap, and the counters.
struct HttpServer::Impl {
  class SessionBase : public std::enable_shared_from_this<SessionBase> {
   public:
    virtual ~SessionBase() = default;
    virtual void Drop() = 0;  // any thread: closes the connection on its own strand
    void SetPhase(Phase p) {
      since_ns.store(NowNs(), std::memory_order_relaxed);
      phase.store(p, std::memory_order_relaxed);
    }
    std::atomic<Phase> phase{Phase::kIdle};
    std::atomic<int64_t> since_ns{NowNs()};
    // Guarded by Impl::mu.
    bool dropping = false;
    std::list<SessionBase*>::iterator where;
  };

  // One call in flight per coalesced route: requests that arrive while a call runs share
  // its answer (so it is at most one call's duration older than they are); the next
  // request after it starts a new call.
  class Coalescer {
   public:
    using Reply = std::function<void(HttpResponse)>;
    void Submit(asio::thread_pool& pool, const HttpRoute* route, const HttpRequest& request,
                Reply reply) {
      std::lock_guard lock(mu_);
      waiting_.push_back(std::move(reply));
      if (running_) return;
      running_ = true;
      asio::post(pool, [this, route, request] {
        HttpResponse response = CallHandler(*route, request);
        std::vector<Reply> batch;
        {
          std::lock_guard lock(mu_);
          batch.swap(waiting_);
          running_ = false;
        }
        // Every waiter but the last gets a copy; the last the answer itself (a /metrics body
        // can be tens of MB).
        for (size_t i = 0; i + 1 < batch.size(); ++i) batch[i](response);
        if (!batch.empty()) batch.back()(std::move(response));
      });
    }
    void Clear() {
      std::vector<Reply> dropped;
      std::lock_guard lock(mu_);
      dropped.swap(waiting_);
    }

   private:
    std::mutex mu_;
    bool running_ = false;
    std::vector<Reply> waiting_;
  };

  template <class Stream>
  class Session;

  Impl(std::vector<HttpRoute> r, const HttpServerOptions& o) : routes(std::move(r)), options(o) {
    for (const auto& route : routes) {
      coalescers.push_back(route.mode == HttpRoute::Mode::kCoalesced ? std::make_unique<Coalescer>()
                                                                     : nullptr);
    }
  }

  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  template <class SessionType>
  void Admit(tcp::socket socket);
  absl::Status LoadTls();
  void Unregister(SessionBase* s) {
    std::lock_guard lock(mu);
    if (s->dropping) --dropping;
    sessions.erase(s->where);
  }
  // At the cap: the connection that has waited longest for its client, idle ones first,
  // then ones still sending their request, then ones waiting on a handler. Never one whose
  // answer is being written (that is bounded by the write timeout anyway).
  std::shared_ptr<SessionBase> PickVictimLocked() {
    std::vector<SessionBase*> skip;
    for (;;) {
      SessionBase* best = nullptr;
      Phase best_phase = Phase::kWriting;
      int64_t best_since = 0;
      for (SessionBase* s : sessions) {
        if (s->dropping || std::find(skip.begin(), skip.end(), s) != skip.end()) continue;
        Phase p = s->phase.load(std::memory_order_relaxed);
        int64_t since = s->since_ns.load(std::memory_order_relaxed);
        if (p == Phase::kWriting) continue;
        if (best != nullptr && (p > best_phase || (p == best_phase && since >= best_since))) {
          continue;
        }
        best = s;
        best_phase = p;
        best_since = since;
      }
      if (best == nullptr) return nullptr;
      // Empty while its destructor waits for mu: that one is going away by itself.
      if (auto locked = best->weak_from_this().lock()) return locked;
      skip.push_back(best);
    }
  }

  const std::vector<HttpRoute> routes;
  const HttpServerOptions options;
  std::mutex mu;
  std::list<SessionBase*> sessions;
  int dropping = 0;  // sessions being dropped, still in the list

  std::atomic<uint64_t> accepted{0}, dropped_for_newcomer{0}, refused_at_cap{0}, timed_out{0},
      header_too_large{0}, body_too_large{0}, bad_requests{0}, unauthorized{0},
      tls_handshake_failed{0}, responses{0};
  std::unique_ptr<asio::ssl::context> ssl;  // set: every connection is TLS

  // Destroyed in reverse order: the worker pool (joined, its queued tasks dropped) and the
  // coalescers' waiting replies release their sessions while the io_context still exists.
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::vector<std::unique_ptr<Coalescer>> coalescers;  // parallel to routes
  std::unique_ptr<asio::thread_pool> workers;
  std::unique_ptr<asio::thread_pool> auth_pool;  // one thread: bcrypt never holds a worker
  std::vector<std::thread> threads;
  bool stopped = false;
};

// One connection: read a request (within its deadline), answer it, repeat while kept alive.

}  // namespace faultline::controller
