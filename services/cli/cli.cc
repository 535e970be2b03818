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
#include "services/cli/bisect.h"
#include "services/cli/comparison.h"
#include "services/cli/format.h"
#include "services/cli/html.h"
#include "services/cli/run_table.h"
#include "services/cli/samples.h"
#include "services/cli/spec_file.h"

namespace faultline::cli {
namespace {

void PrintError(const CliEnv& env, std::string_view message) {
  *env.err << "faultline: " << message << "\n" << std::flush;
}

void Authorize(grpc::ClientContext* context, const CliEnv& env) {
  if (!env.token.empty()) context->AddMetadata("authorization", "Bearer " + env.token);
}

absl::StatusOr<v1::JobSpec> LoadSpec(const std::string& path) {
  if (path != "-") return LoadJobSpecFile(path);
  std::string text(std::istreambuf_iterator<char>(std::cin), {});
  return LoadJobSpecFromString(text, "<stdin>");
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
  *env.out << RenderPlainTable(JobsTable(response)) << std::flush;
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
      progress.Update(FormatProgressBar(event.runs()));
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
                          JobStateName(state));
      return kExitFailure;
    }
  }
  *env.err << FormatJobOutcome(job_id, state, runs) << "\n" << std::flush;
  return state == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailure;
}

int ReportCommand(JobStub& client, const CliEnv& env, int64_t job_id, ReportFormat format,
                  const ReportView& view, bool runs) {
  v1::GetReportRequest request;
  request.set_job_id(job_id);
  for (const std::string& name : CountersOf(view.columns)) request.add_run_counters(name);
  // mmtests and lkp compute their statistics over the runs.
  request.set_runs(runs || format == ReportFormat::kMmtests || format == ReportFormat::kLkp ||
                   format == ReportFormat::kHtml);
  request.set_samples(runs || format == ReportFormat::kHtml);  // the page plots some runs' seconds
  v1::GetReportResponse response;
  if (int rc = Unary(client, env, &JobStub::GetReport, request, &response); rc != kExitOk) {
    return rc;
  }
  if (format == ReportFormat::kLkp && request.run_counters().empty()) {
    // lkp: each side's stddev of the counters that changed needs them per run.
    std::set<std::string> changed;
    for (const auto& c : response.comparisons()) {
      for (const auto& k : c.counters()) {
        if (k.significant()) changed.insert(k.name());
      }
    }
    if (!changed.empty()) {
      for (const auto& name : changed) {
        if (request.run_counters_size() < 64) request.add_run_counters(name);
      }
      if (int rc = Unary(client, env, &JobStub::GetReport, request, &response); rc != kExitOk) {
        return rc;
      }
    }
  }
  *env.out << RenderReport(response, format, view) << std::flush;
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
  *env.out << "job " << job_id << " " << JobStateName(job.state()) << " ("
           << FinishedRuns(job.runs()) << "/" << job.runs().total() << " runs finished)\n"
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
    *env.out << c.id() << "\t" << ChangePointStateName(c.state()) << "\t" << c.study() << "\t"
             << c.benchmark() << "\t" << c.config() << "\t" << c.board() << "\t" << c.kernel()
             << "\t" << c.job_id() << "\t" << before << "\t" << after << "\t" << change << "\t" << p
             << "\n";
  }
  *env.out << std::flush;
  return kExitOk;
}

int MarkChangeCommand(JobStub& client, const CliEnv& env, int64_t id, const std::string& state) {
  v1::SetChangePointStateRequest request;
  request.set_id(id);
  const auto parsed = ParseChangePointState(state);
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
  *env.out << "change point " << id << " is " << ChangePointStateName(response.state()) << "\n"
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
  *env.out << RenderPlainTable(AgentsTable(response, std::chrono::system_clock::now()))
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
  *env.out << FormatBuilds(response) << std::flush;
  return kExitOk;
}

int CompareCommand(const CliEnv& env, const std::string& a_path, const std::string& b_path,
                   const stats::CompareOptions& options, ReportFormat format, bool paired) {
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
  const v1::Comparison comparison = ToComparison(cell, a_path, b_path);
  if (format == ReportFormat::kHtml) {
    *env.out << RenderComparisonHtml(
                    comparison, *a, *b,
                    RenderOfflineComparison(comparison, options, ReportFormat::kTable))
             << std::flush;
    return kExitOk;
  }
  *env.out << RenderOfflineComparison(comparison, options, format) << std::flush;
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

namespace {

// What the command line asked for: the command (the subcommand CLI11 parsed) and its
// arguments.
struct Invocation {
  std::string token_file;
  std::string spec_path;
  bool wait = false;
  uint32_t limit = 0;
  int64_t job_id = 0;
  int64_t builds_job_id = 0;  // kernels --job: 0 for every job's
  std::string format_name = "table";
  std::string counters_view = "significant";
  bool report_utf8 = false;
  bool report_runs = false;
  std::string columns_text;
  std::string schedule_name, cron;
  int64_t schedule_id = 0;
  bool all_changes = false;
  int64_t change_id = 0;
  std::string change_state;
  std::string a_path, b_path;
  stats::CompareOptions compare_options;
  bool compare_paired = false;
  CLI::App *submit = nullptr, *jobs = nullptr, *watch = nullptr, *report = nullptr,
           *cancel = nullptr, *agents = nullptr, *schedule = nullptr, *schedules = nullptr,
           *unschedule = nullptr, *changes = nullptr, *mark = nullptr, *compare = nullptr,
           *kernels = nullptr;
  std::string report_from;  // report --from FILE: a saved JSON report
  BisectArgs bisect_args;
  bool bisect_watch = false;
  int64_t bisect_id = 0;
  CLI::App *bisect = nullptr, *bisect_status = nullptr, *bisect_log = nullptr,
           *bisect_watch_cmd = nullptr, *bisect_cancel = nullptr, *bisect_list = nullptr;
};

// The controller connection's options, and the version flag.
void AddGlobalOptions(CLI::App& app, CliEnv& env, Invocation& in) {
  app.add_option("--controller", env.controller,
                 "controller address HOST:PORT, or several IP:PORT separated by commas "
                 "(the first that answers; default: $" +
                     std::string(kControllerEnv) + " or " + std::string(kDefaultController) + ")");
  app.set_version_flag("--version", "faultline " FAULTLINE_VERSION);
  app.add_option("--token-file", in.token_file,
                 "file holding the bearer token (default: $FAULTLINE_TOKEN)");
  app.add_option("--tls-ca", env.tls_ca, "PEM CA certificate: connect with TLS");
  app.add_option("--tls-cert", env.tls_cert, "PEM client certificate (mutual TLS)");
  app.add_option("--tls-key", env.tls_key, "PEM key of --tls-cert");
  app.add_option("--tls-server-name", env.tls_server_name,
                 "name the controllers' certificates carry (default: the address's host; for a "
                 "list of addresses the first one's)");
}

// submit, jobs, watch, report, cancel, agents, kernels.
void AddJobCommands(CLI::App& app, Invocation& in) {
  in.submit = app.add_subcommand("submit", "submit a job spec file; prints the job id");
  in.submit->add_option("SPEC", in.spec_path, "YAML job spec file ('-' for stdin)")->required();
  in.submit->add_flag("--wait", in.wait,
                      "watch the job to completion; exit 0 only if it succeeded");

  in.jobs = app.add_subcommand("jobs", "list recent jobs");
  in.jobs->add_option("--limit", in.limit, "at most N jobs (default: the controller's, 50)")
      ->check(CLI::Range(1u, 100000u));

  const CLI::Validator job_id_check(
      [](std::string& text) -> std::string {
        const std::optional<uint64_t> id = ParseUnsigned(text);
        if (!id || *id == 0 || *id > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return "'" + text + "' is not a job id";
        }
        return "";
      },
      "ID");
  auto add_job_arg = [&in, &job_id_check](CLI::App* sub) {
    sub->add_option("JOB", in.job_id, "job id (as printed by submit)")
        ->required()
        ->check(job_id_check);
  };
  in.watch = app.add_subcommand("watch", "follow a job's progress; exit 0 only if it succeeded");
  add_job_arg(in.watch);

  in.report = app.add_subcommand("report", "per matrix cell and kernel throughput of a job");
  in.report->add_option("JOB", in.job_id, "job id (as printed by submit)")->check(job_id_check);
  in.report->add_option("--from", in.report_from,
                        "render a report saved with --format json instead (no controller)");
  in.report
      ->add_option("--format", in.format_name,
                   "table, markdown, csv, json; mail (80 columns, ASCII), mmtests or lkp "
                   "(their layouts) for a mailing list; html (one page with plots)")
      ->check(
          CLI::IsMember({"table", "markdown", "csv", "json", "mail", "mmtests", "lkp", "html"}));
  in.report->add_flag("--utf8", in.report_utf8,
                      "mail, mmtests, lkp: keep non-ASCII characters (default: ASCII only)");
  in.report->add_flag(
      "--runs", in.report_runs,
      "json: include every run and its per-second samples (what mmtests, lkp and html use)");
  in.report
      ->add_option("--counters", in.counters_view,
                   "significant: under each comparison, the counters that changed (q <= alpha); "
                   "all: every counter compared (with csv: the counters' table)")
      ->check(CLI::IsMember({"significant", "all"}));
  in.report->add_option(
      "--columns", in.columns_text,
      "a per-run table like the seeds', with these counter columns beside the "
      "throughput: LABEL=COUNTER or LABEL=COUNTER/COUNTER[*N], comma-separated, "
      "e.g. 'Miss/Drop(%)=vmstat.retry_io_miss/vmstat.retry_mmap_drop*100'; "
      "'rounds' is the run's completed rounds (Faults/Round=perf.sw:page-faults/rounds)");

  in.cancel = app.add_subcommand("cancel", "cancel a job's unfinished runs");
  add_job_arg(in.cancel);

  in.agents = app.add_subcommand("agents", "list the boards and their agents");

  in.kernels = app.add_subcommand("kernels", "list the kernels built for jobs (ListBuilds)");
  in.kernels->add_option("--job", in.builds_job_id, "only the builds of this job")
      ->check(job_id_check);
}

// schedule, schedules, unschedule, changes, mark.
void AddHistoryCommands(CLI::App& app, Invocation& in) {
  in.schedule = app.add_subcommand(
      "schedule", "submit a spec at every cron slot (UTC), e.g. --cron '0 2 * * *' for nightly");
  in.schedule->add_option("SPEC", in.spec_path, "YAML job spec file ('-' for stdin)")->required();
  in.schedule->add_option("--cron", in.cron, "five-field cron expression or @daily/@hourly/@weekly")
      ->required();
  in.schedule->add_option("--name", in.schedule_name, "unique schedule name")->required();
  in.schedules = app.add_subcommand("schedules", "list recurring jobs");
  in.unschedule = app.add_subcommand("unschedule", "delete a recurring job");
  in.unschedule->add_option("ID", in.schedule_id, "schedule id")
      ->required()
      ->check(CLI::PositiveNumber);

  in.changes = app.add_subcommand(
      "changes", "change points found in series histories (open and acknowledged)");
  in.changes->add_flag("--all", in.all_changes, "also fixed and invalid ones");
  in.mark = app.add_subcommand("mark", "set a change point's state");
  in.mark->add_option("ID", in.change_id, "change point id")
      ->required()
      ->check(CLI::PositiveNumber);
  in.mark->add_option("STATE", in.change_state, "open, acknowledged, fixed or invalid")
      ->required()
      ->check(CLI::IsMember({"open", "acknowledged", "fixed", "invalid"}));
}

// bisect (start), and its status, log, watch, cancel, list.
void AddBisectCommands(CLI::App& app, Invocation& in) {
  BisectArgs& a = in.bisect_args;
  in.bisect = app.add_subcommand(
      "bisect", "find the first bad commit between a good and a bad ref (docs/bisect.md)");
  in.bisect->require_subcommand(0, 1);
  in.bisect->add_option("--tree", a.tree, "kernel git tree (here and on the builders)");
  in.bisect->add_option("--good", a.good, "a ref that is good");
  in.bisect->add_option("--bad", a.bad, "a ref that is bad (good must be its ancestor)");
  in.bisect->add_option("--spec", a.spec_path, "the study (YAML job spec) each step runs");
  in.bisect->add_option("--from", a.from_job, "start from a job that compared two refs of one tree")
      ->check(CLI::PositiveNumber);
  in.bisect
      ->add_option("--from-change", a.from_change,
                   "start from a change point of a schedule that follows a branch")
      ->check(CLI::PositiveNumber);
  in.bisect->add_option("--metric", a.metric, "throughput, or counter:NAME (per round)");
  in.bisect->add_option("--cell", a.cells, "KNOB=VALUE: the matrix cell to measure (repeat)");
  in.bisect->add_option("--board", a.board, "the board every step runs on");
  in.bisect->add_option("--arch", a.arch, "choose the board among this arch's");
  in.bisect->add_option("--config", a.config_base,
                        "config make target (default: the spec's kernels', else tinyconfig)");
  in.bisect->add_option("--fragment", a.fragments, "config fragment file (repeat)");
  in.bisect->add_option("--block", a.block, "repetitions per job [4]")->check(CLI::Range(1u, 64u));
  in.bisect->add_option("--max-pairs", a.max_pairs, "repetitions per step before skipping [512]")
      ->check(CLI::Range(1u, 4096u));
  in.bisect->add_option("--error", a.error, "each step's error rate, alpha = beta [0.002]")
      ->check(CLI::Range(1e-9, 0.1));
  in.bisect->add_flag("--no-confirm", a.no_confirm, "do not re-measure the culprit vs its parent");
  in.bisect->add_flag("--no-revert", a.no_revert, "do not measure the bad end with it reverted");
  in.bisect->add_flag("--watch", in.bisect_watch, "follow it to the end (exit 0: culprit named)");
  auto add_id = [&in](CLI::App* sub) {
    sub->add_option("ID", in.bisect_id, "bisection id")->required()->check(CLI::PositiveNumber);
  };
  in.bisect_status = in.bisect->add_subcommand("status", "where a bisection stands");
  add_id(in.bisect_status);
  in.bisect_log = in.bisect->add_subcommand("log", "a bisection's result and step table");
  add_id(in.bisect_log);
  in.bisect_watch_cmd = in.bisect->add_subcommand("watch", "follow a bisection to its end");
  add_id(in.bisect_watch_cmd);
  in.bisect_cancel = in.bisect->add_subcommand("cancel", "stop a bisection and its job");
  add_id(in.bisect_cancel);
  in.bisect_list = in.bisect->add_subcommand("list", "recent bisections");
}

// The command line as typed, quoted for a POSIX shell (bisect's "Reproduce:").
std::string QuotedCommandLine(int argc, const char* const* argv) {
  std::string out = "faultline";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--watch") continue;
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyz"
                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_./:=@,+") == std::string::npos;
    if (plain) {
      out += " " + arg;
      continue;
    }
    std::string q = "'";
    for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += " " + q + "'";
  }
  return out;
}

// compare: offline, no controller.
void AddCompareCommand(CLI::App& app, Invocation& in) {
  in.compare = app.add_subcommand(
      "compare", "offline A/B statistics of two files of throughput samples (one number per line)");
  in.compare->add_option("A", in.a_path, "baseline samples")->required();
  in.compare->add_option("B", in.b_path, "candidate samples")->required();
  in.compare
      ->add_option("--alpha", in.compare_options.alpha, "significance level after BH adjustment")
      ->check(CLI::Range(1e-9, 0.5));
  in.compare
      ->add_option("--min-effect", in.compare_options.min_effect,
                   "smallest relative change that counts")
      ->check(CLI::Range(0.0, 0.99));
  in.compare->add_flag("--paired", in.compare_paired,
                       "line i of A and line i of B ran side by side (e.g. alternating blocks): "
                       "Wilcoxon signed-rank statistics on the per-pair log ratios");
  in.compare->add_option("--format", in.format_name, "table, markdown, csv, json or html")
      ->check(CLI::IsMember({"table", "markdown", "csv", "json", "html"}));
}

// The token file and the controller's address read, the connection made (lazily); null
// after printing what is wrong with the options (a usage error).
std::unique_ptr<JobStub> PrepareConnection(const Invocation& in, CliEnv& env,
                                           const StubFactory& connect) {
  if (!in.token_file.empty()) {
    std::ifstream file(in.token_file);
    if (!file || !std::getline(file, env.token) || env.token.empty()) {
      PrintError(env, "--token-file: cannot read a token from " + in.token_file);
      return nullptr;
    }
  }
  if (auto target = ControllerTarget(env.controller); !target.ok()) {
    PrintError(env, std::string(target.status().message()));
    return nullptr;
  }
  std::unique_ptr<JobStub> client = connect(env);  // channels connect lazily
  if (!client) PrintError(env, "--tls-ca/--tls-cert/--tls-key: cannot read the PEM files");
  return client;
}

// report's --counters and --columns; false (after saying why) on a bad --columns.
bool ReportViewOf(const Invocation& in, const CliEnv& env, ReportView* view) {
  view->all_counters = in.counters_view == "all";
  view->utf8 = in.report_utf8;
  if (in.columns_text.empty()) return true;
  std::string error;
  auto columns = ParseColumns(in.columns_text, &error);
  if (!columns) {
    *env.err << "faultline: " << error << "\n";
    return false;
  }
  view->columns = std::move(*columns);
  return true;
}

// report --from FILE: a report saved with --format json, rendered again (e.g. as markdown)
// without a controller.
int ReportFromFile(const Invocation& in, const CliEnv& env) {
  ReportView view;
  if (!ReportViewOf(in, env, &view)) return kExitUsage;
  std::ifstream file(in.report_from);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    PrintError(env, "--from: cannot read " + in.report_from);
    return kExitUsage;
  }
  v1::GetReportResponse report;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // saved by a newer faultline
  if (auto status = google::protobuf::util::JsonStringToMessage(text.str(), &report, options);
      !status.ok()) {
    PrintError(env, "--from " + in.report_from + ": not a saved report (faultline report JOB " +
                        "--format json): " + std::string(status.message()));
    return kExitUsage;
  }
  *env.out << RenderReport(report, *ParseReportFormat(in.format_name), view) << std::flush;
  return kExitOk;
}

// The parsed command against the controller.
int RunCommand(const Invocation& in, JobStub& client, const CliEnv& env) {
  if (in.submit->parsed()) return SubmitCommand(client, env, in.spec_path, in.wait);
  if (in.jobs->parsed()) return JobsCommand(client, env, in.limit);
  if (in.watch->parsed()) return WatchCommand(client, env, in.job_id);
  if (in.report->parsed()) {
    ReportView view;
    if (!ReportViewOf(in, env, &view)) return kExitUsage;
    return ReportCommand(client, env, in.job_id, *ParseReportFormat(in.format_name), view,
                         in.report_runs);
  }
  if (in.cancel->parsed()) return CancelCommand(client, env, in.job_id);
  if (in.agents->parsed()) return AgentsCommand(client, env);
  if (in.kernels->parsed()) return KernelsCommand(client, env, in.builds_job_id);
  if (in.schedule->parsed())
    return ScheduleCommand(client, env, in.spec_path, in.schedule_name, in.cron);
  if (in.schedules->parsed()) return SchedulesCommand(client, env);
  if (in.unschedule->parsed()) return UnscheduleCommand(client, env, in.schedule_id);
  if (in.changes->parsed()) return ChangesCommand(client, env, in.all_changes);
  if (in.mark->parsed()) return MarkChangeCommand(client, env, in.change_id, in.change_state);
  if (in.bisect->parsed()) {
    if (in.bisect_status->parsed()) return BisectShowCommand(client, env, in.bisect_id, false);
    if (in.bisect_log->parsed()) return BisectShowCommand(client, env, in.bisect_id, true);
    if (in.bisect_watch_cmd->parsed()) return BisectWatchCommand(client, env, in.bisect_id);
    if (in.bisect_cancel->parsed()) return BisectCancelCommand(client, env, in.bisect_id);
    if (in.bisect_list->parsed()) return BisectListCommand(client, env);
    return BisectStartCommand(client, env, in.bisect_args, in.bisect_watch);
  }
  PrintError(env, "no command given (see faultline --help)");
  return kExitUsage;
}

}  // namespace

int RunCli(int argc, const char* const* argv, CliEnv env, const StubFactory& connect) {
  CLI::App app("Submit and follow faultline page-fault benchmark jobs.", "faultline");
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();
  Invocation in;
  AddGlobalOptions(app, env, in);
  AddJobCommands(app, in);
  AddHistoryCommands(app, in);
  AddCompareCommand(app, in);
  AddBisectCommands(app, in);
  in.bisect_args.command = QuotedCommandLine(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, *env.out, *env.err);  // --help, --version
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      PrintError(env, "unknown command '" + app.remaining().front() + "' (see faultline --help)");
      return kExitUsage;
    }
    PrintError(env, OneLine(e.what(), "; ") + " (see faultline --help)");
    return kExitUsage;
  }
  if (in.report->parsed() && (in.job_id == 0) == in.report_from.empty()) {
    PrintError(env, "report: give a JOB or --from FILE (one of them)");
    return kExitUsage;
  }
  if (in.report->parsed() && !in.report_from.empty()) return ReportFromFile(in, env);
  if (in.compare->parsed()) {  // offline: no controller
    return CompareCommand(env, in.a_path, in.b_path, in.compare_options,
                          *ParseReportFormat(in.format_name), in.compare_paired);
  }
  std::unique_ptr<JobStub> client = PrepareConnection(in, env, connect);
  if (!client) return kExitUsage;
  return RunCommand(in, *client, env);
}

int Main(int argc, char** argv) {
  CliEnv env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.err_is_tty = isatty(STDERR_FILENO) == 1;
  if (const char* controller = std::getenv(std::string(kControllerEnv).c_str());
      controller && *controller) {
    env.controller = controller;
  }
  if (const char* token = std::getenv("FAULTLINE_TOKEN"); token && *token) env.token = token;
  return RunCli(argc, argv, std::move(env), Connect);
}

}  // namespace faultline::cli
