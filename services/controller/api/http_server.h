#pragma once
// A small HTTP/1.1 server (Boost.Beast) for /healthz, /readyz and later /metrics.
// Requests are served one at a time on one thread: they are tiny and infrequent.
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace faultline::controller {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const std::string& method, const std::string& target,
                                             const std::string& body)>;

  explicit HttpServer(Handler handler);
  ~HttpServer();
  // Binds "HOST:PORT" (port 0 picks a free one) and starts serving; returns the bound port.
  absl::StatusOr<int> Start(const std::string& listen);
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "HOST:PORT" ("[::1]:80" too). Returns false on malformed input.
bool SplitHostPort(const std::string& listen, std::string* host, int* port);

}  // namespace faultline::controller
