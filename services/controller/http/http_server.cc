#include "services/controller/http/http_server.h"

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

namespace faultline::controller {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

bool SplitHostPort(const std::string& listen, std::string* host, int* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &p) || p < 0 || p > 65535) return false;
  *host = h.empty() ? "0.0.0.0" : h;
  *port = p;
  return true;
}

const HttpRoute* FindRoute(const std::vector<HttpRoute>& routes, const std::string& path) {
  for (const auto& route : routes) {
    if (route.path == path) return &route;
  }
  return nullptr;
}

bool RouteAllows(const HttpRoute& route, const std::string& method, std::string* allow) {
  std::vector<std::string> allowed = route.methods;
  auto has = [&](const std::string& m) {
    return std::find(allowed.begin(), allowed.end(), m) != allowed.end();
  };
  if (has("GET") && !has("HEAD")) allowed.push_back("HEAD");
  if (allow != nullptr) *allow = absl::StrJoin(allowed, ", ");
  return has(method);  // methods are case-sensitive (RFC 9110 9.1)
}

namespace {

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

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

HttpResponse Text(int status, std::string body) {
  return {status, "text/plain; charset=utf-8", std::move(body), {}};
}

HttpResponse CallHandler(const HttpRoute& route, const HttpRequest& request) {
  try {
    return route.handler(request);
  } catch (const std::exception&) {
    return Text(500, "internal error\n");  // never the exception text: it may quote the request
  }
}

}  // namespace

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
// Every handler runs on the connection's strand.
template <class Stream>
class HttpServer::Impl::Session : public HttpServer::Impl::SessionBase {
 public:
  Session(Impl* server, Stream stream)
      : server_(server), stream_(std::move(stream)), handler_timer_(stream_.get_executor()) {}
  ~Session() override { server_->Unregister(this); }

  void Run() {
    // A new connection's first request must be complete within request_timeout of the accept
    // (with TLS: the handshake too).
    deadline_ = Clock::now() + opt().request_timeout;
    asio::dispatch(stream_.get_executor(), [self = Self()] {
      if constexpr (kTls) {
        self->lowest().expires_at(self->deadline_);
        self->stream_.async_handshake(asio::ssl::stream_base::server,
                                      [self](beast::error_code ec) { self->OnHandshake(ec); });
      } else {
        self->WaitRequest(true);
      }
    });
  }

  void Drop() override {
    asio::post(stream_.get_executor(), [self = Self()] { self->Close(); });
  }

 private:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  void OnHandshake(beast::error_code ec) {
    if (ec) {
      if (ec == beast::error::timeout) {
        ++server_->timed_out;
      } else {
        ++server_->tls_handshake_failed;
      }
      Close();
      return;
    }
    WaitRequest(true);
  }

  std::shared_ptr<Session> Self() {
    return std::static_pointer_cast<Session>(this->shared_from_this());
  }
  const HttpServerOptions& opt() const { return server_->options; }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Idle: wait for the first byte of the next request (fresh connection: of the first).
  void WaitRequest(bool fresh) {
    if (closed_) return;
    SetPhase(Phase::kIdle);
    if (buffer_.size() > 0) {  // pipelined: the next request is already here
      deadline_ = Clock::now() + opt().request_timeout;
      StartRequest();
      return;
    }
    if (fresh) {
      lowest().expires_at(deadline_);
    } else {
      lowest().expires_after(opt().idle_timeout);
    }
    stream_.async_read_some(buffer_.prepare(1024),
                            [self = Self(), fresh](beast::error_code ec, std::size_t n) {
                              self->OnFirstBytes(ec, n, fresh);
                            });
  }

  void OnFirstBytes(beast::error_code ec, std::size_t n, bool fresh) {
    if (ec) {
      // A fresh connection that sent nothing in time was a slow client; an idle kept-alive
      // one simply ended.
      if (ec == beast::error::timeout && fresh) ++server_->timed_out;
      Close();
      return;
    }
    buffer_.commit(n);
    if (!fresh) deadline_ = Clock::now() + opt().request_timeout;
    StartRequest();
  }

  void StartRequest() {
    SetPhase(Phase::kReading);
    parser_.emplace();
    parser_->header_limit(opt().header_limit);
    parser_->body_limit(opt().body_limit);
    lowest().expires_at(deadline_);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = Self()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      ReadFailed(ec);
      return;
    }
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    lowest().expires_at(deadline_);  // the same deadline: header and body together
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code ec, std::size_t) {
                       if (ec) {
                         self->ReadFailed(ec);
                       } else {
                         self->Dispatch();
                       }
                     });
  }

  void ReadFailed(beast::error_code ec) {
    if (ec == http::error::header_limit) {
      ++server_->header_too_large;
      Refuse(431, "request header fields too large\n");
    } else if (ec == http::error::body_limit) {
      // A declared length over the limit fails at the header: the body is never read.
      ++server_->body_too_large;
      Refuse(413, "payload too large\n");
    } else if (ec == beast::error::timeout) {
      ++server_->timed_out;  // tcp_stream closed the socket: nothing to answer
      Close();
    } else if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
               ec.category() != http::make_error_code(http::error::bad_target).category()) {
      Close();  // the client went away (or the socket failed)
    } else {
      ++server_->bad_requests;  // a malformed request: say so, never what was wrong in it
      Refuse(400, "bad request\n");
    }
  }

  void Dispatch() {
    SetPhase(Phase::kHandling);
    auto req = parser_->release();
    parser_.reset();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    HttpRequest request;
    request.method = std::string(req.method_string());
    std::string target(req.target());
    auto q = target.find('?');
    request.path = target.substr(0, q);
    if (q != std::string::npos) request.query = target.substr(q + 1);
    request.body = std::move(req.body());

    const HttpRoute* route = FindRoute(server_->routes, request.path);
    if (route == nullptr) {
      Respond(Text(404, "not found\n"));
      return;
    }
    std::string allow;
    if (!RouteAllows(*route, request.method, &allow)) {
      HttpResponse r = Text(405, "method not allowed\n");
      r.headers.emplace_back("Allow", allow);
      Respond(std::move(r));
      return;
    }
    if (route->protect && opt().authenticator) {
      auto authorization = req.find(http::field::authorization);
      if (authorization == req.end()) {
        Unauthorized();
        return;
      }
      // bcrypt is slow: on the authenticator's own thread, then back on the strand.
      ArmHandlerTimeout();
      asio::post(*server_->auth_pool, [self = Self(), route, request, seq = seq_,
                                       header = std::string(authorization->value())]() mutable {
        bool ok = false;
        try {
          ok = self->opt().authenticator(header);
        } catch (const std::exception&) {
          ok = false;  // an authenticator that fails refuses
        }
        asio::post(self->stream_.get_executor(),
                   [self, route, ok, seq, request = std::move(request)]() mutable {
                     if (seq != self->seq_ || self->closed_) return;
                     self->CancelHandlerTimeout();
                     if (ok) {
                       self->Serve(route, std::move(request));
                     } else {
                       self->Unauthorized();
                     }
                   });
      });
      return;
    }
    Serve(route, std::move(request));
  }

  void Unauthorized() {
    ++server_->unauthorized;
    HttpResponse r = Text(401, "unauthorized\n");
    r.headers.emplace_back("WWW-Authenticate",
                           absl::StrCat("Basic realm=\"", opt().auth_realm, "\""));
    Respond(std::move(r));
  }

  void Serve(const HttpRoute* route, HttpRequest request) {
    switch (route->mode) {
      case HttpRoute::Mode::kInline:
        Respond(CallHandler(*route, request));
        return;
      case HttpRoute::Mode::kWorker:
        ArmHandlerTimeout();
        asio::post(*server_->workers,
                   [self = Self(), route, request = std::move(request), seq = seq_] {
                     self->ReplyFromWorker(seq, CallHandler(*route, request));
                   });
        return;
      case HttpRoute::Mode::kCoalesced: {
        ArmHandlerTimeout();
        auto index = static_cast<size_t>(route - server_->routes.data());
        server_->coalescers[index]->Submit(*server_->workers, route, request,
                                           [self = Self(), seq = seq_](HttpResponse r) {
                                             self->ReplyFromWorker(seq, std::move(r));
                                           });
        return;
      }
    }
  }

  // A blocking handler (or the authenticator) that has not answered in time: 503, and its
  // late answer is dropped.
  void ArmHandlerTimeout() {
    handler_timer_.expires_after(opt().handler_timeout);
    handler_timer_.async_wait(
        [self = Self(), seq = seq_, gen = ++timer_gen_](beast::error_code ec) {
          if (ec || seq != self->seq_ || gen != self->timer_gen_ || self->closed_) return;
          ++self->server_->timed_out;
          self->close_after_ = true;
          self->Respond(Text(503, "the handler did not answer in time\n"));
        });
  }
  void CancelHandlerTimeout() {
    ++timer_gen_;  // a wait that already fired but has not run yet is stale too
    handler_timer_.cancel();
  }

  // Any thread: hands a worker's answer to the session's strand.
  void ReplyFromWorker(uint64_t seq, HttpResponse response) {
    asio::post(stream_.get_executor(), [self = Self(), seq, r = std::move(response)]() mutable {
      if (seq != self->seq_ || self->closed_) return;  // timed out meanwhile, or dropped
      self->CancelHandlerTimeout();
      self->Respond(std::move(r));
    });
  }

  // A request that cannot be read to its end: answer and close.
  void Refuse(int status, std::string body) {
    SetPhase(Phase::kHandling);
    version_ = 11;
    if (parser_ && parser_->is_header_done()) version_ = parser_->get().version();
    keep_alive_ = false;
    head_ = false;
    close_after_ = true;
    Respond(Text(status, std::move(body)));
  }

  void Respond(HttpResponse r) {
    ++seq_;  // a late worker answer or timer for this request is stale from now on
    SetPhase(Phase::kWriting);
    ++server_->responses;
    bool close = close_after_ || !keep_alive_;
    response_.emplace(static_cast<http::status>(r.status), version_);
    auto& res = *response_;
    res.set(http::field::server, "faultline-controller");
    res.set(http::field::content_type, r.content_type);
    res.set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : r.headers) res.set(name, value);
    res.keep_alive(!close);
    auto& parts = res.body();
    parts.reserve(1 + r.shared_body.size());
    parts.push_back(std::make_shared<const std::string>(std::move(r.body)));
    for (auto& part : r.shared_body) parts.push_back(std::move(part));
    const std::uint64_t length = SharedPartsBody::size(parts);
    if (head_) parts.clear();
    res.content_length(length);  // HEAD: the length GET would have, no body
    lowest().expires_after(opt().write_timeout);
    http::async_write(stream_, res, [self = Self(), close](beast::error_code ec, std::size_t) {
      self->OnWrite(ec, close);
    });
  }

  void OnWrite(beast::error_code ec, bool close) {
    response_.reset();
    if (ec) {
      if (ec == beast::error::timeout) ++server_->timed_out;
      Close();
      return;
    }
    if (close) {
      Linger();
      return;
    }
    WaitRequest(false);
  }

  // After the last answer: stop sending, then read and discard what the client still sends
  // for a short while, so that closing does not reset the connection before the client has
  // read the answer (a refused request was not read to its end).
  void Linger() {
    SetPhase(Phase::kIdle);
    lowest().expires_after(std::chrono::seconds(1));
    if constexpr (kTls) {
      // close_notify, and the client's (or the 1 s deadline), then close.
      stream_.async_shutdown([self = Self()](beast::error_code) { self->Close(); });
    } else {
      beast::error_code ignored;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      DrainSome();
    }
  }
  void DrainSome() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = Self()](beast::error_code ec, std::size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > 256 * 1024) {
                                self->Close();
                              } else {
                                self->DrainSome();
                              }
                            });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ++seq_;
    CancelHandlerTimeout();
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close();
  }

  Impl* server_;
  Stream stream_;
  asio::steady_timer handler_timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<SharedPartsBody>> response_;
  Clock::time_point deadline_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool head_ = false;
  bool close_after_ = false;
  bool closed_ = false;
  uint64_t seq_ = 0;  // requests answered: tells a late answer from the current one
  uint64_t timer_gen_ = 0;
  std::size_t drained_ = 0;
};

void HttpServer::Impl::Accept() {
  // Each connection on its own strand: its handlers never run concurrently.
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec) {
    // E.g. out of file descriptors: try again shortly instead of spinning.
    accept_retry.expires_after(std::chrono::milliseconds(50));
    accept_retry.async_wait([this](beast::error_code e) {
      if (!e) Accept();
    });
    return;
  }
  ++accepted;
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (ssl) {
    Admit<Session<TlsStream>>(std::move(socket));
  } else {
    Admit<Session<beast::tcp_stream>>(std::move(socket));
  }
  Accept();
}

template <class SessionType>
void HttpServer::Impl::Admit(tcp::socket socket) {
  std::shared_ptr<SessionType> session;
  std::shared_ptr<SessionBase> victim;  // released after mu: its destructor takes mu
  {
    std::lock_guard lock(mu);
    if (static_cast<int>(sessions.size()) - dropping >= options.max_connections) {
      victim = PickVictimLocked();
      if (!victim) {
        ++refused_at_cap;
        beast::error_code ignored;
        socket.close(ignored);
        return;
      }
      victim->dropping = true;
      ++dropping;
      ++dropped_for_newcomer;
      victim->Drop();
    }
    if constexpr (std::is_same_v<SessionType, Session<TlsStream>>) {
      session = std::make_shared<SessionType>(this, TlsStream(std::move(socket), *ssl));
    } else {
      session = std::make_shared<SessionType>(this, beast::tcp_stream(std::move(socket)));
    }
    session->where = sessions.insert(sessions.end(), session.get());
  }
  session->Run();
}

absl::Status HttpServer::Impl::LoadTls() {
  if (options.tls_cert_file.empty() && options.tls_key_file.empty()) return absl::OkStatus();
  auto fail = [](const std::string& what, const std::string& file, const beast::error_code& ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP TLS: cannot load the ", what, " ", file, ": ", ec.message()));
  };
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_min_proto_version(ctx->native_handle(),
                                options.tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION);
  beast::error_code ec;
  ctx->use_certificate_chain_file(options.tls_cert_file, ec);
  if (ec) return fail("certificate", options.tls_cert_file, ec);
  ctx->use_private_key_file(options.tls_key_file, asio::ssl::context::pem, ec);
  if (ec) return fail("key", options.tls_key_file, ec);
  if (!options.tls_client_ca_file.empty()) {
    ctx->load_verify_file(options.tls_client_ca_file, ec);
    if (ec) return fail("client CA", options.tls_client_ca_file, ec);
    // Tell clients which CA to present a certificate of.
    SSL_CTX_set_client_CA_list(ctx->native_handle(),
                               SSL_load_client_CA_file(options.tls_client_ca_file.c_str()));
    ctx->set_verify_mode(options.tls_require_client_cert
                             ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                             : asio::ssl::verify_peer);
  }
  ssl = std::move(ctx);
  return absl::OkStatus();
}

HttpServer::HttpServer(std::vector<HttpRoute> routes, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(routes), options)) {}

HttpServer::~HttpServer() {
  Stop();
}

absl::StatusOr<int> HttpServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(listen, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen: expected HOST:PORT, got '", listen, "'"));
  }
  if (absl::Status s = impl_->LoadTls(); !s.ok()) return s;
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("--http-listen: bad address '", host, "'"));
  tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", ec.message()));
  int bound = acceptor.local_endpoint().port();
  impl_->workers = std::make_unique<asio::thread_pool>(std::max(1, impl_->options.worker_threads));
  if (impl_->options.authenticator) impl_->auth_pool = std::make_unique<asio::thread_pool>(1);
  impl_->Accept();
  for (int i = 0; i < std::max(1, impl_->options.io_threads); ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->io.run(); });
  }
  return bound;
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopped || impl_->threads.empty()) return;
  impl_->stopped = true;
  impl_->io.stop();
  for (auto& t : impl_->threads) t.join();
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->workers->stop();
  impl_->workers->join();
  if (impl_->auth_pool) {
    impl_->auth_pool->stop();
    impl_->auth_pool->join();
  }
  for (auto& c : impl_->coalescers) {
    if (c) c->Clear();
  }
}

HttpServerStats HttpServer::Stats() const {
  HttpServerStats s;
  s.accepted = impl_->accepted;
  s.dropped_for_newcomer = impl_->dropped_for_newcomer;
  s.refused_at_cap = impl_->refused_at_cap;
  s.timed_out = impl_->timed_out;
  s.header_too_large = impl_->header_too_large;
  s.body_too_large = impl_->body_too_large;
  s.bad_requests = impl_->bad_requests;
  s.unauthorized = impl_->unauthorized;
  s.tls_handshake_failed = impl_->tls_handshake_failed;
  s.responses = impl_->responses;
  std::lock_guard lock(impl_->mu);
  s.open = static_cast<int>(impl_->sessions.size());
  for (const auto* session : impl_->sessions) {
    switch (session->phase.load(std::memory_order_relaxed)) {
      case Phase::kIdle:
        ++s.idle;
        break;
      case Phase::kReading:
        ++s.reading;
        break;
      case Phase::kHandling:
        ++s.handling;
        break;
      case Phase::kWriting:
        ++s.writing;
        break;
    }
  }
  return s;
}

}  // namespace faultline::controller
