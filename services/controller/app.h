#pragma once
#include <string>

namespace faultline::controller {

struct ControllerOptions {
  std::string grpc_listen = "0.0.0.0:50051";
  std::string http_listen = "0.0.0.0:8080";
  std::string database_url;
  std::string port_file;
};

// Runs until SIGINT/SIGTERM; returns the process exit code.
int RunController(const ControllerOptions& options);

}  // namespace faultline::controller
