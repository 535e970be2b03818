#include "services/controller/app.h"

#include <csignal>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/log.h"
#include "common/s3.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "services/controller/api/auth.h"
#include "services/controller/api/services.h"
#include "services/controller/http/http_config.h"
#include "services/controller/http/http_server.h"
#include "services/controller/http/metrics.h"
#include "services/controller/orchestration/dispatcher.h"
#include "services/controller/orchestration/duties.h"
#include "services/controller/orchestration/periodic_duty.h"
#include "services/controller/orchestration/summaries.h"
#include "services/controller/robot/change_points.h"
#include "services/controller/robot/robot.h"
#include "services/controller/storage/pg_listener.h"
#include "services/controller/storage/pg_store.h"

#include "common/tls.h"

namespace faultline::controller {
namespace {

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const ControllerOptions& options,
                                                           std::string* error) {
  auto credentials =
      faultline::ServerCredentials({options.tls_cert, options.tls_key, options.tls_client_ca});
  if (!credentials.ok()) {
    *error = "--tls-cert/--tls-key/--tls-client-ca: " + std::string(credentials.status().message());
    return nullptr;
  }
  return *credentials;
}

std::unique_ptr<PgStore> OpenMigrated(const std::string& database_url) {
  StoreOptions store_options;
  store_options.database_url = database_url;
  auto store = std::make_unique<PgStore>(store_options);
  if (absl::Status s = store->Migrate(); !s.ok()) {
    std::cerr << "faultline-controller: " << s.message() << "\n";
    return nullptr;
  }
  return store;
}

}  // namespace

int CreateTokenCommand(const std::string& database_url, const std::string& name,
                       const std::string& role, const std::string& board) {
  const auto parsed_role = ParseTokenRole(role);
  if (!parsed_role) {
    std::cerr << "faultline-controller: --role must be user or agent\n";
    return 2;
  }
  if ((*parsed_role == TokenRole::kAgent) != !board.empty()) {
    std::cerr << "faultline-controller: an agent token needs --board (and only an agent token)\n";
    return 2;
  }
  auto store = OpenMigrated(database_url);
  if (!store) return 1;
  std::string token = NewToken();
  if (token.empty()) {
    std::cerr << "faultline-controller: cannot read /dev/urandom\n";
    return 1;
  }
  if (absl::Status s = store->tokens().CreateToken(name, *parsed_role, board, Sha256Hex(token));
      !s.ok()) {
    std::cerr << "faultline-controller: " << s.message() << "\n";
    return 1;
  }
  std::cout << token << "\n";  // shown once: only its hash is kept
  return 0;
}

int RevokeTokenCommand(const std::string& database_url, const std::string& name) {
  auto store = OpenMigrated(database_url);
  if (!store) return 1;
  auto revoked = store->tokens().RevokeToken(name);
  if (!revoked.ok()) {
    std::cerr << "faultline-controller: " << revoked.status().message() << "\n";
    return 1;
  }
  if (!*revoked) {
    std::cerr << "faultline-controller: no live token named '" << name << "'\n";
    return 1;
  }
  return 0;
}

int ListTokensCommand(const std::string& database_url) {
  auto store = OpenMigrated(database_url);
  if (!store) return 1;
  auto tokens = store->tokens().ListTokens();
  if (!tokens.ok()) {
    std::cerr << "faultline-controller: " << tokens.status().message() << "\n";
    return 1;
  }
  for (const auto& t : *tokens) {
    std::cout << t.name << "\t" << ToString(t.role) << "\t" << (t.board.empty() ? "-" : t.board)
              << "\t" << (t.revoked ? "revoked" : "live") << "\n";
  }
  return 0;
}

int HashPasswordCommand() {
  std::string password;
  std::getline(std::cin, password);
  if (password.empty()) {
    std::cerr << "faultline-controller: give the password on stdin (one line)\n";
    return 2;
  }
  auto hash = BcryptHash(password);
  if (!hash.ok()) {
    std::cerr << "faultline-controller: " << hash.status().message() << "\n";
    return 1;
  }
  std::cout << *hash << "\n";
  return 0;
}

namespace {

// The object store of --artifact-s3-*: credentials from the file or the environment, the
// config checked, and the bucket reachable with them.
absl::StatusOr<s3::Client> OpenObjectStore(const ControllerOptions& options) {
  s3::Config c;
  c.endpoint = options.artifact_s3_endpoint;
  c.bucket = options.artifact_s3_bucket;
  c.region = options.artifact_s3_region;
  c.prefix = options.artifact_s3_prefix;
  c.ca_file = options.artifact_s3_ca;
  if (!options.artifact_s3_credentials.empty()) {
    std::string error;
    std::optional<std::string> text = ReadFileToString(options.artifact_s3_credentials, &error);
    if (!text.has_value()) {
      return absl::InvalidArgumentError("--artifact-s3-credentials: cannot read " + error);
    }
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      const size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
      const std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
      if (key == "access_key") c.access_key = value;
      if (key == "secret_key") c.secret_key = value;
    }
    if (c.access_key.empty() || c.secret_key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--artifact-s3-credentials ", options.artifact_s3_credentials,
                       ": needs access_key=... and secret_key=... lines"));
    }
  } else {
    const char* id = std::getenv("AWS_ACCESS_KEY_ID");
    const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
    c.access_key = id != nullptr ? id : "";
    c.secret_key = secret != nullptr ? secret : "";
  }
  if (absl::Status s = s3::Client::Check(c); !s.ok()) return s;
  s3::Client client(c);
  if (absl::Status s = client.CheckBucket(); !s.ok()) return s;
  return client;
}

// --http-config: false (logged) when the file cannot be served as written.
bool LoadWebConfig(const ControllerOptions& options, std::optional<HttpWebConfig>* out) {
  if (options.http_config.empty()) return true;
  auto web = LoadHttpWebConfig(options.http_config);
  if (!web.ok()) {
    log::error("event=http_config_failed error=\"{}\"", std::string(web.status().message()));
    return false;
  }
  *out = *std::move(web);
  log::info("event=http_config tls={} client_auth={} basic_auth_users={}",
            (*out)->cert_file.empty() ? "off" : (*out)->min_version, (*out)->client_auth_type,
            (*out)->basic_auth_users.size());
  return true;
}

// The object store for kernel images, when configured: false (logged) when its bucket
// cannot be reached or written.
bool OpenObjectStoreLogged(const ControllerOptions& options, std::optional<s3::Client>* out) {
  if (options.artifact_s3_endpoint.empty()) return true;
  auto opened = OpenObjectStore(options);
  if (!opened.ok()) {
    log::error("event=artifact_store_failed error=\"{}\"", std::string(opened.status().message()));
    return false;
  }
  out->emplace(*std::move(opened));
  log::info("event=artifact_store endpoint={} bucket={} prefix={} url_ttl_s={}",
            options.artifact_s3_endpoint, options.artifact_s3_bucket, options.artifact_s3_prefix,
            options.artifact_url_seconds);
  return true;
}

// /healthz, /readyz and /metrics. The handlers keep what they use by value or point at
// objects that outlive the server; *http_server is read by /metrics once the server runs.
std::vector<HttpRoute> Routes(PgStore* store, const Stores& stores, ControllerMetrics* metrics,
                              HttpServer* const* http_server) {
  auto text = [](int status, std::string body) {
    return HttpResponse{status, "text/plain; charset=utf-8", std::move(body), {}};
  };
  std::vector<HttpRoute> routes;
  routes.push_back({.path = "/healthz",
                    .mode = HttpRoute::Mode::kInline,
                    .handler = [text](const HttpRequest&) { return text(200, "ok\n"); }});
  routes.push_back({.path = "/readyz",
                    .mode = HttpRoute::Mode::kCoalesced,
                    .handler = [store, text](const HttpRequest&) {
                      absl::Status s = store->Ping(std::chrono::seconds(2));
                      return s.ok() ? text(200, "ready\n")
                                    : text(503, std::string(s.message()) + "\n");
                    }});
  routes.push_back({.path = "/metrics",
                    .mode = HttpRoute::Mode::kCoalesced,
                    .handler =
                        [stores, metrics, http_server](const HttpRequest&) {
                          HttpServerStats stats;
                          if (*http_server != nullptr) stats = (*http_server)->Stats();
                          HttpResponse r;
                          r.shared_body =
                              metrics->RenderParts(stores.metrics, stores.boards, &stats);
                          r.content_type = "text/plain; version=0.0.4; charset=utf-8";
                          return r;
                        },
                    .protect = true});  // basic auth, when --http-config has users
  return routes;
}

HttpServerOptions HttpOptions(const ControllerOptions& options,
                              const std::optional<HttpWebConfig>& web_config) {
  HttpServerOptions http_options;
  if (web_config) ApplyHttpWebConfig(*web_config, &http_options);
  http_options.request_timeout = std::chrono::seconds(options.http_request_timeout_seconds);
  http_options.idle_timeout = std::chrono::seconds(options.http_idle_timeout_seconds);
  http_options.max_connections = options.http_max_connections;
  return http_options;
}

// "grpc=PORT\nhttp=PORT\n", replaced whole: readers never see half a file.
void WritePortFile(const std::string& path, int grpc_port, int http_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "grpc=" << grpc_port << "\nhttp=" << http_port << "\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

// One robot pass on its thread (PeriodicDuty): what it did, or why it failed, in the log.
// False: the robot's limits leave the rest to the next pass, `poll_seconds` later.
bool RunRobotPass(SeriesRobot& robot) {
  absl::StatusOr<RobotPass> pass = robot.RunOnce();
  if (!pass.ok()) {
    log::warn("event=robot_pass_failed error=\"{}\"", std::string(pass.status().message()));
    return false;
  }
  if (pass->mails > 0 || pass->submitted > 0 || pass->measured > 0) {
    log::info("event=robot_pass mails={} kept={} decided={} chosen={} submitted={} measured={}",
              pass->mails, pass->kept, pass->decided, pass->chosen, pass->submitted,
              pass->measured);
  }
  return false;
}

// One pass of the change-point bisector on its thread: the bisections it started.
bool RunChangePointPass(ChangePointBisector& bisector) {
  absl::StatusOr<int> started = bisector.RunOnce();
  if (!started.ok()) {
    log::warn("event=change_bisect_pass_failed duty={} error=\"{}\"", ChangePointBisector::kName,
              std::string(started.status().message()));
  } else if (*started > 0) {
    log::info("event=change_bisect_pass duty={} started={}", ChangePointBisector::kName, *started);
  }
  return false;
}

// The series robot (--robot-config) and its change-point bisector, each on a thread of its
// own beside the background duties, running only while this controller holds the duties.
struct RobotThreads {
  std::optional<SeriesRobot> robot;
  std::optional<PeriodicDuty> robot_duty;
  std::optional<ChangePointBisector> bisector;
  std::optional<PeriodicDuty> bisector_duty;

  // False (logged) when robot.yaml cannot be used.
  bool Load(const std::string& config, const Stores& stores, BackgroundDuties& duties) {
    absl::StatusOr<RobotOptions> robot_options = LoadRobotConfig(config);
    if (!robot_options.ok()) {
      log::error("event=robot_config_invalid error=\"{}\"",
                 std::string(robot_options.status().message()));
      return false;
    }
    const auto every = std::chrono::seconds(robot_options->poll_seconds);
    log::info("event=robot_on archive={} studies={} every_s={}", robot_options->archive,
              robot_options->studies.size(), every.count());
    robot.emplace(stores, *std::move(robot_options));
    robot_duty.emplace([this] { return RunRobotPass(*robot); }, every,
                       [&duties] { return duties.runs_duties(); });
    if (robot->options().bisect_changes) {
      bisector.emplace(stores, robot->options());
      bisector_duty.emplace([this] { return RunChangePointPass(*bisector); }, every,
                            [&duties] { return duties.runs_duties(); });
    }
    return true;
  }
  void Start() {
    if (robot_duty) robot_duty->Start();
    if (bisector_duty) bisector_duty->Start();
  }
  void Stop() {
    if (robot_duty) robot_duty->Stop();
    if (bisector_duty) bisector_duty->Stop();
  }
};

}  // namespace

int RunController(const ControllerOptions& options) {
  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // gRPC's TLS files and the HTTP endpoint's web config first: files that cannot be served
  // as written stop the start before anything else happens (before the database, which may
  // be unreachable and would hide them behind its retries).
  std::string credentials_error;
  auto credentials = ServerCredentials(options, &credentials_error);
  if (!credentials) {
    log::error("event=tls_failed error=\"{}\"", credentials_error);
    return 2;
  }
  // The web config: a file that cannot be served as written stops the start too.
  std::optional<HttpWebConfig> web_config;
  if (!LoadWebConfig(options, &web_config)) return 2;

  // The object store for kernel images, checked now: a bucket that cannot be reached or
  // written stops the start, naming why.
  std::optional<s3::Client> object_store;
  if (!OpenObjectStoreLogged(options, &object_store)) return 2;

  StoreOptions store_options;
  store_options.database_url = options.database_url;
  store_options.lease_grace_seconds = options.lease_grace_seconds;
  store_options.pool_size = options.database_connections;
  store_options.requeue_backoff_seconds = options.requeue_backoff_seconds;
  PgStore store(store_options);
  if (absl::Status s = store.Migrate(); !s.ok()) {
    log::error("event=migration_failed error=\"{}\"", std::string(s.message()));
    return 1;
  }
  log::info("event=migrated");

  const Stores stores = store.stores();
  BackgroundDuties duties(stores, SystemClock::Get());
  RobotThreads robot;  // the robot and its change-point bisector, beside the duties
  if (!options.robot_config.empty() && !robot.Load(options.robot_config, stores, duties)) return 2;
  Dispatcher dispatcher(stores.work, stores.jobs, SystemClock::Get(), &duties);
  // Work queued through any controller on this database wakes this one's dispatcher.
  PgWorkListener work_listener(options.database_url, [&dispatcher] { dispatcher.WorkAvailable(); });
  ControllerMetrics metrics;
  Authorizer auth(stores.tokens, options.auth_required);
  if (!options.auth_required) {
    log::warn("event=auth_off note=\"every gRPC call is accepted without a token\"");
  }
  JobServiceImpl job_service(stores, &dispatcher, &metrics, &auth);
  job_service.SetUntrustedUsers(options.untrusted_users);
  AgentServiceImpl agent_service(stores, &dispatcher, &metrics, &auth);
  agent_service.SetBuildLeaseSeconds(static_cast<uint32_t>(options.build_lease_seconds));
  if (object_store) {
    agent_service.SetArtifactStore(&*object_store);
    dispatcher.SetArtifactUrls(
        [&object_store, ttl = options.artifact_url_seconds](const std::string& sha256) {
          return object_store->PresignedGet(sha256, ttl);
        });
  }
  // The agents' database work off gRPC's callback threads (api/handler_pool.h). A result's
  // transaction holds a database connection: as many result threads as connections, and at
  // most 256 results waiting per thread before agents are told to come back later. (Keeping
  // one connection from them did not help heartbeats at 5,000 boards, 4.9 -> 3.1 s at p50,
  // and cost a quarter of the result rate, 160 -> 118 runs/s: docs/performance.md, "The agents'
  // calls on bounded pools".)
  const int result_threads = std::max(1, options.database_connections);
  // Board calls (hello, heartbeat, acquire's check) are one short statement each; room for
  // every board of a 5,000-board fleet to have an acquire and a heartbeat waiting at once.
  HandlerPool board_calls(2, 16384);
  // Results that queue up while a thread's transaction runs go into its next one, up to 64
  // (group commit: one commit, one COPY and one recount of the job for them all).
  ResultPool result_calls(
      result_threads, 256 * static_cast<size_t>(result_threads), 64,
      [&agent_service](std::vector<PendingResult>& batch) { agent_service.StoreReported(batch); });
  agent_service.SetHandlerPools(&board_calls, &result_calls);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int grpc_port = 0;
  builder.AddListeningPort(options.grpc_listen, credentials, &grpc_port);
  builder.RegisterService(&job_service);
  builder.RegisterService(&agent_service);
  builder.SetMaxReceiveMessageSize(16 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    log::error("event=listen_failed grpc_listen={}", options.grpc_listen);
    return 1;
  }
  dispatcher.Start();
  work_listener.Start();
  // Finished jobs' comparisons and phases for /metrics, on the controller running the duties.
  ComparisonSummarizer summarizer(
      stores.metrics, stores.jobs, [&duties] { return duties.runs_duties(); },
      [&metrics](const std::vector<ArchPhases>& phases) { metrics.ObservePhases(phases); });
  summarizer.Start();

  // /healthz is answered on the io threads and touches nothing shared: it is slow only if
  // the process is. /readyz and /metrics need PostgreSQL, so they run on the server's worker
  // threads, each coalesced (one call in flight; requests meanwhile share its answer): a
  // scrape flood is one database query at a time, and neither waits for the other.
  // /readyz pings on a connection of its own with a 2 s deadline.
  HttpServer* http_server = nullptr;  // set once built; the handlers run only after Start
  std::vector<HttpRoute> routes = Routes(&store, stores, &metrics, &http_server);
  HttpServer http(std::move(routes), HttpOptions(options, web_config));
  http_server = &http;
  auto http_port = http.Start(options.http_listen);
  if (!http_port.ok()) {
    log::error("event=listen_failed error=\"{}\"", std::string(http_port.status().message()));
    server->Shutdown();
    dispatcher.Stop();
    return 1;
  }
  robot.Start();
  log::info("event=serving grpc_port={} http_port={}", grpc_port, *http_port);
  if (!options.port_file.empty()) WritePortFile(options.port_file, grpc_port, *http_port);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  log::info("event=stopping signal={}", signal);
  http.Stop();
  work_listener.Stop();
  robot.Stop();       // a pass in flight ends first
  dispatcher.Stop();  // answers parked calls so Shutdown does not wait for them
  summarizer.Stop();
  duties.Release();  // another controller takes the duties over on its next pass
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

}  // namespace faultline::controller
