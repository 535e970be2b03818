#include "services/controller/app.h"

#include <csignal>
#include <fstream>
#include <thread>

#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "services/common/log.h"
#include "services/controller/api/dispatcher.h"
#include "services/controller/api/http_server.h"
#include "services/controller/api/metrics.h"
#include "services/controller/api/services.h"
#include "services/controller/storage/store.h"

namespace faultline::controller {

int RunController(const ControllerOptions& options) {
  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  StoreOptions store_options;
  store_options.database_url = options.database_url;
  PgStore store(store_options);
  if (absl::Status s = store.Migrate(); !s.ok()) {
    log::error("event=migration_failed error=\"{}\"", std::string(s.message()));
    return 1;
  }
  log::info("event=migrated");

  Dispatcher dispatcher(&store);
  ControllerMetrics metrics;
  JobServiceImpl job_service(&store, &dispatcher, &metrics);
  AgentServiceImpl agent_service(&store, &dispatcher, &metrics);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(options.grpc_listen, grpc::InsecureServerCredentials(), &grpc_port);
  builder.RegisterService(&job_service);
  builder.RegisterService(&agent_service);
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    log::error("event=listen_failed grpc_listen={}", options.grpc_listen);
    return 1;
  }
  dispatcher.Start();

  HttpServer http([&](const std::string& method, const std::string& target,
                      const std::string&) -> HttpResponse {
    if (target == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
    if (target == "/readyz") {
      absl::Status s = store.Ping();
      if (s.ok()) return {200, "text/plain; charset=utf-8", "ready\n"};
      return {503, "text/plain; charset=utf-8", std::string(s.message()) + "\n"};
    }
    if (target == "/metrics") {
      return {200, "text/plain; version=0.0.4; charset=utf-8", metrics.Render(&store)};
    }
    return {404, "text/plain; charset=utf-8", "not found\n"};
  });
  auto http_port = http.Start(options.http_listen);
  if (!http_port.ok()) {
    log::error("event=listen_failed error=\"{}\"", std::string(http_port.status().message()));
    server->Shutdown();
    dispatcher.Stop();
    return 1;
  }
  log::info("event=serving grpc_port={} http_port={}", grpc_port, *http_port);
  if (!options.port_file.empty()) {
    std::string tmp = options.port_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << "grpc=" << grpc_port << "\nhttp=" << *http_port << "\n";
    }
    std::rename(tmp.c_str(), options.port_file.c_str());  // readers never see half a file
  }

  int signal = 0;
  sigwait(&stop_signals, &signal);
  log::info("event=stopping signal={}", signal);
  http.Stop();
  dispatcher.Stop();  // answers parked calls so Shutdown does not wait for them
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

}  // namespace faultline::controller
