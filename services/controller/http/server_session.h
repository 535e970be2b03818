#pragma once
// Inside http/: one connection of the server (HttpServer::Impl::Session), for plain TCP and
// TLS. Included by http_server.cc only.
#include "services/controller/http/server_internal.h"

namespace faultline::controller {

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

}  // namespace faultline::controller
