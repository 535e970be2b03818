#pragma once
#include <string>

namespace faultline::controller {

struct ControllerOptions {
  std::string grpc_listen = "0.0.0.0:50051";
  std::string http_listen = "0.0.0.0:8080";
  std::string database_url;
  std::string port_file;
  int lease_grace_seconds = 120;     // a run's lease: warm-up + duration + this
  int build_lease_seconds = 120;     // a build's lease, renewed by the builder's heartbeats
  int requeue_backoff_seconds = 30;  // first wait of a run whose lease lapsed (doubles, ≤ 10 min)
  int database_connections = 4;      // the store's pool (plus one for LISTEN, one for /readyz)
  bool auth_required = true;  // bearer tokens on every gRPC call (--auth off for local tests)
  // TLS for gRPC: certificate and key (PEM); with a client CA, clients must present a
  // certificate it signed (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // The HTTP endpoint (/healthz, /readyz, /metrics): a request (header and body) must arrive
  // within this from its first byte; a kept-alive connection may idle this long; at most
  // this many connections (the one that has waited longest is dropped for a newcomer).
  int http_request_timeout_seconds = 10;
  int http_idle_timeout_seconds = 90;
  int http_max_connections = 512;
  // The exporter-toolkit's web config (TLS, basic auth for /metrics); empty: neither.
  std::string http_config;
  // Kernel images in an S3-compatible object store instead of the database (empty
  // endpoint: the database). Credentials: a file of `access_key=...` and `secret_key=...`
  // lines, else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Boards get presigned URLs valid
  // for artifact_url_seconds.
  std::string artifact_s3_endpoint;
  std::string artifact_s3_bucket;
  std::string artifact_s3_region = "us-east-1";
  std::string artifact_s3_prefix = "faultline/kernels/";
  std::string artifact_s3_credentials;
  std::string robot_config;  // robot.yaml: the series robot runs (docs/robot.md); "": it does not
  bool untrusted_users = false;  // users' kernels are strangers' too (docs/kernels.md)
  std::string artifact_s3_ca;
  int artifact_url_seconds = 3600;
};

// Runs until SIGINT/SIGTERM; returns the process exit code.
int RunController(const ControllerOptions& options);

// `faultline-controller tokens ...`: administration on the database directly.
int CreateTokenCommand(const std::string& database_url, const std::string& name,
                       const std::string& role, const std::string& board);
int RevokeTokenCommand(const std::string& database_url, const std::string& name);
int ListTokensCommand(const std::string& database_url);
// `faultline-controller http-hash-password`: the bcrypt hash of the password on stdin.
int HashPasswordCommand();

}  // namespace faultline::controller
