#include "services/controller/http/http_server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/controller/http/server_internal.h"
#include "services/controller/http/server_session.h"

namespace faultline::controller {

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
