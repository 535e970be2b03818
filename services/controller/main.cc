// faultline-controller: wiring only.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "CLI/CLI.hpp"
#include "services/controller/app.h"

int main(int argc, char** argv) {
  faultline::controller::ControllerOptions options;
  CLI::App app{"faultline-controller: schedules page-fault benchmarks onto agents"};
  app.add_option("--grpc-listen", options.grpc_listen, "gRPC address HOST:PORT (port 0: any free)")
      ->capture_default_str();
  app.add_option("--http-listen", options.http_listen,
                 "HTTP address for /healthz and /readyz (port 0: any free)")
      ->capture_default_str();
  app.add_option("--database-url", options.database_url,
                 "PostgreSQL URL (default: env FAULTLINE_DATABASE_URL)");
  app.add_option("--port-file", options.port_file,
                 "write the bound ports here once serving (grpc=PORT, http=PORT lines)");
  CLI11_PARSE(app, argc, argv);
  if (options.database_url.empty()) {
    if (const char* env = std::getenv("FAULTLINE_DATABASE_URL")) options.database_url = env;
  }
  if (options.database_url.empty()) {
    std::cerr << "faultline-controller: --database-url or FAULTLINE_DATABASE_URL is required\n";
    return 2;
  }
  return faultline::controller::RunController(options);
}
