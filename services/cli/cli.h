#pragma once
// The faultline CLI: a thin gRPC client of the controller's JobService.
//
//   faultline [--controller HOST:PORT] submit SPEC.yaml [--wait]
//                                      jobs [--limit N]
//                                      watch JOB
//                                      report JOB [--format table|markdown|csv|json]
//                                      cancel JOB
//                                      agents
//                                      kernels [--job JOB]
//           faultline compare A.txt B.txt [--alpha 0.01] [--min-effect 0.03]
//                                         [--format table|markdown|csv|json]
//
// `compare` works offline (no controller): the A/B statistics of two files of samples.
//
// Errors are one line on stderr, "faultline: <message>"; exit codes are kExit* below.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "faultline/v1/job.grpc.pb.h"
#include "report/report.h"
#include "stats/statistics.h"

namespace faultline::cli {

using JobStub = v1::JobService::StubInterface;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // an RPC failed, or the watched job did not succeed
inline constexpr int kExitUsage = 2;    // bad command line or spec file

inline constexpr std::string_view kDefaultController = "localhost:50051";
inline constexpr std::string_view kControllerEnv = "FAULTLINE_CONTROLLER";

// Where commands write, and per-call settings.
struct CliEnv {
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  bool err_is_tty = false;  // progress updates in place (\r) instead of one line per event
  std::string controller{kDefaultController};     // named in UNAVAILABLE errors
  std::chrono::milliseconds rpc_timeout{10'000};  // deadline of each unary call (not watch)
  std::string token;                              // bearer token (--token-file, $FAULTLINE_TOKEN)
  std::string tls_ca;             // PEM file: talk TLS to the controller, trusting this CA
  std::string tls_cert, tls_key;  // PEM files: a client certificate (mutual TLS)
  std::string tls_server_name;    // the certificates' name (TlsServerName); "": the default
};

// "faultline: <message>" on env.err.
void PrintError(const CliEnv& env, std::string_view message);
// "INVALID_ARGUMENT: spec.duration: ..." (one line; UNAVAILABLE also names the controller).
std::string FormatRpcError(const grpc::Status& status, std::string_view controller);
// Prints a failed call (FormatRpcError) and returns its exit code.
int RpcFailed(const CliEnv& env, const grpc::Status& status);
// The CLI's deadline and credentials on a call.
void SetDeadline(grpc::ClientContext* context, const CliEnv& env);

// One unary call with the CLI's deadline and credentials: kExitOk, or the failure printed
// and its exit code.
template <typename Request, typename Response>
int Unary(JobStub& client, const CliEnv& env,
          grpc::Status (JobStub::*method)(grpc::ClientContext*, const Request&, Response*),
          const Request& request, Response* response) {
  grpc::ClientContext context;
  SetDeadline(&context, env);
  const grpc::Status status = (client.*method)(&context, request, response);
  return status.ok() ? kExitOk : RpcFailed(env, status);
}

// The subcommands. Each prints its output and errors and returns an exit code.
// spec_path "-" reads the spec from stdin.
int SubmitCommand(JobStub& client, const CliEnv& env, const std::string& spec_path, bool wait);
int JobsCommand(JobStub& client, const CliEnv& env, uint32_t limit);
int WatchCommand(JobStub& client, const CliEnv& env, int64_t job_id);
int ReportCommand(JobStub& client, const CliEnv& env, int64_t job_id, report::ReportFormat format,
                  const report::ReportView& view = {}, bool runs = false);
int CancelCommand(JobStub& client, const CliEnv& env, int64_t job_id);
int AgentsCommand(JobStub& client, const CliEnv& env);
// Schedules (a spec submitted on a cron line) and the change points their history finds.
int ScheduleCommand(JobStub& client, const CliEnv& env, const std::string& spec_path,
                    const std::string& name, const std::string& cron);
int SchedulesCommand(JobStub& client, const CliEnv& env);
int UnscheduleCommand(JobStub& client, const CliEnv& env, int64_t id);
int ChangesCommand(JobStub& client, const CliEnv& env, bool all);
int MarkChangeCommand(JobStub& client, const CliEnv& env, int64_t id, const std::string& state);
// The kernels built for jobs (ListBuilds), all or one job's (job_id 0: all).
int KernelsCommand(JobStub& client, const CliEnv& env, int64_t job_id);
// A = baseline samples, B = candidate samples (samples.h); bad files are usage errors.
// `paired`: line i of A with line i of B (unequal counts are a usage error naming both).
int CompareCommand(const CliEnv& env, const std::string& a_path, const std::string& b_path,
                   const stats::CompareOptions& options, report::ReportFormat format,
                   bool paired = false);

// Makes a client for a controller address.
using StubFactory = std::function<std::unique_ptr<JobStub>(const CliEnv& env)>;
// A channel to env.controller: plaintext, or TLS when env.tls_ca is set (with a client
// certificate when tls_cert/tls_key are). nullptr when a PEM file cannot be read.
std::unique_ptr<JobStub> Connect(const CliEnv& env);

// Parses the command line and runs one subcommand. `env.controller` is the default
// address (overridden by --controller); `connect` is called once, after parsing.
int RunCli(int argc, const char* const* argv, CliEnv env, const StubFactory& connect);

// Everything main() needs: std::cout/std::cerr, FAULTLINE_CONTROLLER, insecure channels.
int Main(int argc, char** argv);

}  // namespace faultline::cli
