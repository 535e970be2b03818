#include "services/controller/api/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace faultline::controller {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

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

struct HttpServer::Impl {
  explicit Impl(Handler h) : handler(std::move(h)), acceptor(io) {}

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted) return;
      } else {
        Serve(std::move(socket));
      }
      Accept();
    });
  }

  void Serve(tcp::socket socket) {
    beast::error_code ec;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::read(socket, buffer, req, ec);
    if (ec) return;
    std::string target(req.target());
    HttpResponse r = handler(std::string(req.method_string()), target, req.body());
    http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
    res.set(http::field::server, "faultline-controller");
    res.set(http::field::content_type, r.content_type);
    res.keep_alive(false);
    res.body() = std::move(r.body);
    res.prepare_payload();
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_send, ec);
  }

  Handler handler;
  asio::io_context io;
  tcp::acceptor acceptor;
  std::thread thread;
};

HttpServer::HttpServer(Handler handler) : impl_(std::make_unique<Impl>(std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<int> HttpServer::Start(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(listen, &host, &port)) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen: expected HOST:PORT, got '", listen, "'"));
  }
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--http-listen: bad address '", host, "'"));
  tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen, ": ", ec.message()));
  int bound = impl_->acceptor.local_endpoint().port();
  impl_->Accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
  return bound;
}

void HttpServer::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace faultline::controller
