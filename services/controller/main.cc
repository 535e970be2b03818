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
                 "HTTP address for /healthz, /readyz and /metrics (port 0: any free)")
      ->capture_default_str();
  app.add_option("--http-request-timeout", options.http_request_timeout_seconds,
                 "HTTP: seconds a client has to send a whole request (header and body)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--http-idle-timeout", options.http_idle_timeout_seconds,
                 "HTTP: seconds a kept-alive connection may wait for its next request")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--http-max-connections", options.http_max_connections,
                 "HTTP: open connections at most (the longest-waiting is dropped for a newcomer)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--http-config", options.http_config,
                 "HTTP: web config file as Prometheus exporters take it (tls_server_config, "
                 "basic_auth_users with bcrypt hashes for /metrics); see docs/operations.md")
      ->check(CLI::ExistingFile);
  app.add_option("--database-url", options.database_url,
                 "PostgreSQL URL (default: env FAULTLINE_DATABASE_URL)");
  app.add_option("--port-file", options.port_file,
                 "write the bound ports here once serving (grpc=PORT, http=PORT lines)");
  app.add_option("--lease-grace", options.lease_grace_seconds,
                 "seconds a run's lease lasts beyond warm-up + duration (renewed by heartbeats; "
                 "agents end a run before its lease)")
      ->check(CLI::Range(10, 3600))
      ->capture_default_str();
  app.add_flag("--untrusted-users", options.untrusted_users,
               "every kernel a user's job brings is a stranger's: built only inside a builder's "
               "sandbox, on private object directories (without it a spec marks its own: "
               "untrusted: true)");
  app.add_option("--build-lease", options.build_lease_seconds,
                 "seconds a build's lease lasts (builders renew it every third of it; a builder "
                 "that goes quiet loses the build to another)")
      ->check(CLI::Range(5, 3600))
      ->capture_default_str();
  app.add_option("--artifact-s3-endpoint", options.artifact_s3_endpoint,
                 "keep kernel images in this S3-compatible object store (http(s)://host:port, "
                 "path-style) instead of the database; boards fetch them by presigned URL");
  app.add_option("--artifact-s3-bucket", options.artifact_s3_bucket, "the object store's bucket");
  app.add_option("--artifact-s3-region", options.artifact_s3_region, "its region (SigV4)")
      ->capture_default_str();
  app.add_option("--artifact-s3-prefix", options.artifact_s3_prefix,
                 "object keys: this prefix + the image's sha256")
      ->capture_default_str();
  app.add_option("--robot-config", options.robot_config,
                 "robot.yaml: run the series robot, which reads a list archive and A/Bs the "
                 "mm series posted there (docs/robot.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--artifact-s3-credentials", options.artifact_s3_credentials,
                 "file with access_key=... and secret_key=... lines (default: env "
                 "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
      ->check(CLI::ExistingFile);
  app.add_option("--artifact-s3-ca", options.artifact_s3_ca,
                 "https: trust this CA bundle (PEM) for the object store")
      ->check(CLI::ExistingFile);
  app.add_option("--artifact-url-ttl", options.artifact_url_seconds,
                 "seconds a board's presigned URL for an image stays valid")
      ->check(CLI::Range(60, 7 * 24 * 3600))
      ->capture_default_str();
  app.add_option("--database-connections", options.database_connections,
                 "the store's connection pool (gRPC handlers wait for a free connection)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option(
         "--requeue-backoff", options.requeue_backoff_seconds,
         "first wait before a run whose lease lapsed is offered again (doubles per attempt, "
         "at most 10 min, jittered)")
      ->check(CLI::Range(0, 600))
      ->capture_default_str();
  std::string auth = "required";
  app.add_option("--auth", auth,
                 "required: bearer tokens on every gRPC call; off: none (local tests)")
      ->check(CLI::IsMember({"required", "off"}))
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert, "PEM certificate for gRPC over TLS");
  app.add_option("--tls-key", options.tls_key, "PEM private key for --tls-cert");
  app.add_option("--tls-client-ca", options.tls_client_ca,
                 "PEM CA: clients must present a certificate it signed (mutual TLS)");

  // faultline-controller tokens create|revoke|list: administration on the database.
  auto* tokens = app.add_subcommand("tokens", "manage API tokens (stored hashed)");
  tokens->require_subcommand(1);
  std::string name, role, board;
  auto* create = tokens->add_subcommand("create", "create a token and print it (shown once)");
  create->add_option("--name", name, "unique name, e.g. alice or board-arm-01")->required();
  create->add_option("--role", role, "user (JobService) or agent (AgentService)")->required();
  create->add_option("--board", board, "agent tokens: the board it may act for");
  auto* revoke = tokens->add_subcommand("revoke", "revoke a token by name");
  revoke->add_option("--name", name, "the token's name")->required();
  tokens->add_subcommand("list", "list tokens (names, roles, boards; never the tokens)");
  app.add_subcommand("http-hash-password",
                     "print the bcrypt hash of the password read from stdin (for "
                     "basic_auth_users in --http-config)");
  CLI11_PARSE(app, argc, argv);
  options.auth_required = auth == "required";
  if (app.got_subcommand("http-hash-password")) return faultline::controller::HashPasswordCommand();
  if (options.database_url.empty()) {
    if (const char* env = std::getenv("FAULTLINE_DATABASE_URL")) options.database_url = env;
  }
  if (options.database_url.empty()) {
    std::cerr << "faultline-controller: --database-url or FAULTLINE_DATABASE_URL is required\n";
    return 2;
  }
  if (create->parsed()) {
    return faultline::controller::CreateTokenCommand(options.database_url, name, role, board);
  }
  if (revoke->parsed())
    return faultline::controller::RevokeTokenCommand(options.database_url, name);
  if (tokens->parsed()) return faultline::controller::ListTokensCommand(options.database_url);
  return faultline::controller::RunController(options);
}
