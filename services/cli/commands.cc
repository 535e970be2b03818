#include "services/cli/cli.h"

#include <fstream>
#include <set>
#include <sstream>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <thread>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "common/strings.h"
#include "common/tls.h"
#include "common/units.h"
#include "report/comparison.h"
#include "report/format.h"
#include "report/html.h"
#include "report/run_table.h"
#include "services/cli/bisect.h"
#include "services/cli/samples.h"
#include "spec/spec_file.h"

namespace faultline::cli {

void PrintError(const CliEnv& env, std::string_view message) {
  *env.err << "faultline: " << message << "\n" << std::flush;
}

namespace {

void Authorize(grpc::ClientContext* context, const CliEnv& env) {
  if (!env.token.empty()) context->AddMetadata("authorization", "Bearer " + env.token);
}

absl::StatusOr<v1::JobSpec> LoadSpec(const std::string& path) {
  if (path != "-") return spec::LoadJobSpecFile(path);
  std::string text(std::istreambuf_iterator<char>(std::cin), {});
  return spec::LoadJobSpecFromString(text, "<stdin>");
}

// Progress on stderr: rewritten in place on a terminal, one line per update otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(const CliEnv& env) : env_(env) {}
  ~ProgressPrinter() { Done(); }

  void Update(const std::string& line) {
    if (env_.err_is_tty) {
      *env_.err << "\r" << line << "\x1b[K" << std::flush;
      open_ = true;
    } else if (line != last_) {
      *env_.err << line << "\n" << std::flush;
    }
    last_ = line;
  }

  void Done() {
    if (open_) *env_.err << "\n" << std::flush;
    open_ = false;
  }

 private:
  const CliEnv& env_;
  std::string last_;
  bool open_ = false;
};

}  // namespace

int RpcFailed(const CliEnv& env, const grpc::Status& status) {
  PrintError(env, FormatRpcError(status, env.controller));
  return kExitFailure;
}

void SetDeadline(grpc::ClientContext* context, const CliEnv& env) {
  context->set_deadline(std::chrono::system_clock::now() + env.rpc_timeout);
  Authorize(context, env);
}

std::string FormatRpcError(const grpc::Status& status, std::string_view controller) {
  std::string out(absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())));
  if (out.empty()) out = "CODE_" + std::to_string(static_cast<int>(status.error_code()));
  std::string message = OneLine(status.error_message(), "; ");
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message = "cannot reach controller at " + std::string(controller) +
              (message.empty() ? "" : ": " + message);
  }
  if (!message.empty()) out += ": " + message;
  return out;
}

int SubmitCommand(JobStub& client, const CliEnv& env, const std::string& spec_path, bool wait) {
  absl::StatusOr<v1::JobSpec> spec = LoadSpec(spec_path);
  if (!spec.ok()) {
    PrintError(env, OneLine(std::string(spec.status().message()), "; "));
    return kExitUsage;
  }
  v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  // An idempotency key makes retrying safe: a submission whose answer was lost is not
  // stored twice.
  {
    std::random_device rd;
    char id[40];
    std::snprintf(id, sizeof id, "cli-%08x%08x%08x", rd(), rd(), rd());
    request.set_request_id(id);
  }
  v1::SubmitJobResponse response;
  grpc::Status status;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    grpc::ClientContext context;
    SetDeadline(&context, env);
    status = client.SubmitJob(&context, request, &response);
    bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                     status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (status.ok() || !transient) break;
  }
  if (!status.ok()) return RpcFailed(env, status);
  *env.out << response.job_id() << "\n" << std::flush;
  *env.err << "job " << response.job_id() << " submitted (" << response.runs() << " runs)\n"
           << std::flush;
  if (!wait) return kExitOk;
  return WatchCommand(client, env, response.job_id());
}

int JobsCommand(JobStub& client, const CliEnv& env, uint32_t limit) {
  v1::ListJobsRequest request;
  request.set_limit(limit);
  v1::ListJobsResponse response;
  if (int rc = Unary(client, env, &JobStub::ListJobs, request, &response); rc != kExitOk) {
    return rc;
  }
  if (response.jobs().empty()) {
    *env.err << "no jobs\n";
    return kExitOk;
  }
  *env.out << report::RenderPlainTable(report::JobsTable(response)) << std::flush;
  return kExitOk;
}

int WatchCommand(JobStub& client, const CliEnv& env, int64_t job_id) {
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  v1::JobProgress event;
  std::optional<v1::JobProgress> last;
  ProgressPrinter progress(env);
  // A controller that goes away ends the stream UNAVAILABLE: watch again (the channel
  // reconnects, to the next controller when given several), up to kWatchRetries times in a
  // row; an event received resets the count.
  constexpr int kWatchRetries = 10;
  for (int lost = 0;;) {
    grpc::ClientContext context;  // no deadline: jobs run for as long as they run
    Authorize(&context, env);
    std::unique_ptr<grpc::ClientReaderInterface<v1::JobProgress>> reader =
        client.WatchJob(&context, request);
    while (reader->Read(&event)) {
      progress.Update(report::FormatProgressBar(event.runs()));
      last = event;
      lost = 0;
    }
    grpc::Status status = reader->Finish();
    if (status.ok()) break;
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE || ++lost > kWatchRetries) {
      progress.Done();
      return RpcFailed(env, status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  progress.Done();

  v1::JobState state = last ? last->state() : v1::JOB_STATE_UNSPECIFIED;
  v1::RunCounts runs = last ? last->runs() : v1::RunCounts();
  if (!v1::IsFinal(state)) {
    // The stream ended without a final event (e.g. a controller handing over): ask.
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    v1::GetJobResponse job;
    grpc::ClientContext get_context;
    SetDeadline(&get_context, env);
    if (grpc::Status status = client.GetJob(&get_context, get, &job); !status.ok())
      return RpcFailed(env, status);
    state = job.job().state();
    runs = job.job().runs();
    if (!v1::IsFinal(state)) {
      PrintError(env, "watch of job " + std::to_string(job_id) + " ended while the job is " +
                          report::JobStateName(state));
      return kExitFailure;
    }
  }
  *env.err << report::FormatJobOutcome(job_id, state, runs) << "\n" << std::flush;
  return state == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailure;
}

int ReportCommand(JobStub& client, const CliEnv& env, int64_t job_id, report::ReportFormat format,
                  const report::ReportView& view, bool runs) {
  int rc = kExitOk;
  auto text = report::RenderJobReport(
      job_id, format, view, runs,
      [&](const v1::GetReportRequest& request) -> absl::StatusOr<v1::GetReportResponse> {
        v1::GetReportResponse response;
        rc = Unary(client, env, &JobStub::GetReport, request, &response);
        if (rc != kExitOk) return absl::UnavailableError("printed");  // RpcFailed said why
        return response;
      });
  if (!text.ok()) return rc;
  *env.out << *text << std::flush;
  return kExitOk;
}

int CancelCommand(JobStub& client, const CliEnv& env, int64_t job_id) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::CancelJobResponse response;
  if (int rc = Unary(client, env, &JobStub::CancelJob, request, &response); rc != kExitOk) {
    return rc;
  }
  const v1::Job& job = response.job();
  *env.out << "job " << job_id << " " << report::JobStateName(job.state()) << " ("
           << report::FinishedRuns(job.runs()) << "/" << job.runs().total() << " runs finished)\n"
           << std::flush;
  return kExitOk;
}

int ScheduleCommand(JobStub& client, const CliEnv& env, const std::string& spec_path,
                    const std::string& name, const std::string& cron) {
  absl::StatusOr<v1::JobSpec> spec = LoadSpec(spec_path);
  if (!spec.ok()) {
    PrintError(env, OneLine(std::string(spec.status().message()), "; "));
    return kExitUsage;
  }
  v1::CreateScheduleRequest request;
  request.set_name(name);
  request.set_cron(cron);
  *request.mutable_spec() = *std::move(spec);
  v1::Schedule response;
  if (int rc = Unary(client, env, &JobStub::CreateSchedule, request, &response); rc != kExitOk) {
    return rc;
  }
  *env.out << response.id() << "\n" << std::flush;
  *env.err << "schedule " << response.id() << " '" << response.name() << "' (" << response.cron()
           << ") next run " << google::protobuf::util::TimeUtil::ToString(response.next_run())
           << "\n"
           << std::flush;
  return kExitOk;
}

int SchedulesCommand(JobStub& client, const CliEnv& env) {
  v1::ListSchedulesResponse response;
  if (int rc = Unary(client, env, &JobStub::ListSchedules, v1::ListSchedulesRequest(), &response);
      rc != kExitOk) {
    return rc;
  }
  *env.out << "id\tname\tcron\tbenchmark\tnext run\tlast job\tlast error\n";
  for (const auto& s : response.schedules()) {
    *env.out << s.id() << "\t" << s.name() << "\t" << s.cron() << "\t" << s.spec().benchmark()
             << "\t" << google::protobuf::util::TimeUtil::ToString(s.next_run()) << "\t"
             << (s.last_job_id() == 0 ? std::string("-") : std::to_string(s.last_job_id())) << "\t"
             << (s.last_error().empty() ? "-" : s.last_error()) << "\n";
  }
  *env.out << std::flush;
  return kExitOk;
}

int UnscheduleCommand(JobStub& client, const CliEnv& env, int64_t id) {
  v1::DeleteScheduleRequest request;
  request.set_id(id);
  v1::DeleteScheduleResponse response;
  if (int rc = Unary(client, env, &JobStub::DeleteSchedule, request, &response); rc != kExitOk) {
    return rc;
  }
  *env.out << "schedule " << id << " deleted\n" << std::flush;
  return kExitOk;
}

int ChangesCommand(JobStub& client, const CliEnv& env, bool all) {
  v1::ListChangePointsRequest request;
  request.set_include_closed(all);
  v1::ListChangePointsResponse response;
  if (int rc = Unary(client, env, &JobStub::ListChangePoints, request, &response); rc != kExitOk) {
    return rc;
  }
  *env.out
      << "id\tstate\tstudy\tbenchmark\tconfig\tboard\tkernel\tfrom job\tbefore\tafter\tchange\tp\n";
  for (const auto& c : response.change_points()) {
    char change[32], p[32], before[32], after[32];
    std::snprintf(change, sizeof change, "%+.1f%%", c.relative_change() * 100);
    std::snprintf(p, sizeof p, "%.2g", c.p_value());
    std::snprintf(before, sizeof before, "%.2f", c.mean_before());
    std::snprintf(after, sizeof after, "%.2f", c.mean_after());
    *env.out << c.id() << "\t" << report::ChangePointStateName(c.state()) << "\t" << c.study()
             << "\t" << c.benchmark() << "\t" << c.config() << "\t" << c.board() << "\t"
             << c.kernel() << "\t" << c.job_id() << "\t" << before << "\t" << after << "\t"
             << change << "\t" << p << "\n";
  }
  *env.out << std::flush;
  return kExitOk;
}

int MarkChangeCommand(JobStub& client, const CliEnv& env, int64_t id, const std::string& state) {
  v1::SetChangePointStateRequest request;
  request.set_id(id);
  const auto parsed = report::ParseChangePointState(state);
  if (!parsed) {
    *env.err << "faultline: STATE: must be open, acknowledged, fixed or invalid, got '" << state
             << "'\n";
    return kExitUsage;
  }
  request.set_state(*parsed);
  v1::ChangePoint response;
  if (int rc = Unary(client, env, &JobStub::SetChangePointState, request, &response);
      rc != kExitOk) {
    return rc;
  }
  *env.out << "change point " << id << " is " << report::ChangePointStateName(response.state())
           << "\n"
           << std::flush;
  return kExitOk;
}

int AgentsCommand(JobStub& client, const CliEnv& env) {
  v1::ListAgentsResponse response;
  if (int rc = Unary(client, env, &JobStub::ListAgents, v1::ListAgentsRequest(), &response);
      rc != kExitOk) {
    return rc;
  }
  if (response.boards().empty()) {
    *env.err << "no agents\n";
    return kExitOk;
  }
  *env.out << report::RenderPlainTable(
                  report::AgentsTable(response, std::chrono::system_clock::now()))
           << std::flush;
  return kExitOk;
}

int KernelsCommand(JobStub& client, const CliEnv& env, int64_t job_id) {
  v1::ListBuildsRequest request;
  request.set_job_id(job_id);
  v1::ListBuildsResponse response;
  if (int rc = Unary(client, env, &JobStub::ListBuilds, request, &response); rc != kExitOk) {
    return rc;
  }
  if (response.builds().empty()) {
    *env.err << (job_id == 0 ? std::string("no kernel builds\n")
                             : "no kernel builds for job " + std::to_string(job_id) + "\n");
    return kExitOk;
  }
  *env.out << report::FormatBuilds(response) << std::flush;
  return kExitOk;
}

int CompareCommand(const CliEnv& env, const std::string& a_path, const std::string& b_path,
                   const stats::CompareOptions& options, report::ReportFormat format, bool paired) {
  absl::StatusOr<std::vector<double>> a = LoadSamplesFile(a_path);
  if (!a.ok()) {
    PrintError(env, OneLine(std::string(a.status().message()), "; "));
    return kExitUsage;
  }
  absl::StatusOr<std::vector<double>> b = LoadSamplesFile(b_path);
  if (!b.ok()) {
    PrintError(env, OneLine(std::string(b.status().message()), "; "));
    return kExitUsage;
  }
  if (paired && a->size() != b->size()) {
    PrintError(env, "--paired: line i of A is paired with line i of B, but " + a_path + " has " +
                        std::to_string(a->size()) + " samples and " + b_path + " has " +
                        std::to_string(b->size()));
    return kExitUsage;
  }
  const stats::CellComparison cell =
      paired ? stats::ComparePaired(*a, *b, options) : stats::Compare(*a, *b, options);
  const v1::Comparison comparison = report::ToComparison(cell, a_path, b_path);
  if (format == report::ReportFormat::kHtml) {
    *env.out << report::RenderComparisonHtml(comparison, *a, *b,
                                             report::RenderOfflineComparison(
                                                 comparison, options, report::ReportFormat::kTable))
             << std::flush;
    return kExitOk;
  }
  *env.out << report::RenderOfflineComparison(comparison, options, format) << std::flush;
  return kExitOk;
}

constexpr int kMaxResponseBytes = 256 << 20;

std::unique_ptr<JobStub> Connect(const CliEnv& env) {
  auto credentials = ClientCredentials({env.tls_ca, env.tls_cert, env.tls_key});
  if (!credentials.ok()) return nullptr;  // the caller names the --tls-* options
  // A report of a job of thousands of runs with run counters is larger than gRPC's default
  // 4 MB (RESOURCE_EXHAUSTED); the controller sends whatever it builds.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxResponseBytes);
  auto target = ControllerTarget(env.controller);
  if (!target.ok()) return nullptr;  // the caller names --controller
  SetTlsServerName(env.controller, env.tls_server_name, &args);
  return v1::JobService::NewStub(grpc::CreateCustomChannel(*target, *credentials, args));
}

}  // namespace faultline::cli
