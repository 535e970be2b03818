// A webhook receiver for the observability e2e test: appends every body POSTed to /alerts as
// one line to a file (Alertmanager's webhook JSON), so the test can see which alerts arrived.
//   faultline-test-webhook PORT_FILE OUTPUT_FILE
#include <csignal>
#include <fstream>
#include <iostream>
#include <mutex>

#include "services/controller/http/http_server.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: faultline-test-webhook PORT_FILE OUTPUT_FILE\n";
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::mutex mu;
  std::string output = argv[2];
  faultline::controller::HttpRoute alerts;
  alerts.path = "/alerts";
  alerts.methods = {"POST"};
  alerts.mode = faultline::controller::HttpRoute::Mode::kWorker;
  alerts.handler = [&](const faultline::controller::HttpRequest& request) {
    std::lock_guard lock(mu);
    std::ofstream out(output, std::ios::app);
    std::string line = request.body;
    for (char& c : line) {
      if (c == '\n') c = ' ';
    }
    out << line << "\n";
    return faultline::controller::HttpResponse{200, "text/plain", "ok\n", {}};
  };
  faultline::controller::HttpServerOptions options;
  options.body_limit = 16 << 20;  // Alertmanager's batches of alerts
  faultline::controller::HttpServer server({alerts}, options);
  auto port = server.Start("127.0.0.1:0");
  if (!port.ok()) {
    std::cerr << port.status() << "\n";
    return 1;
  }
  {
    std::string tmp = std::string(argv[1]) + ".tmp";
    std::ofstream(tmp) << *port << "\n";
    std::rename(tmp.c_str(), argv[1]);
  }
  int sig = 0;
  sigwait(&stop, &sig);
  server.Stop();
  return 0;
}
