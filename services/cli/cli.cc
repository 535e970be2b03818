#include "services/cli/cli.h"

#include <set>

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
#include "common/files.h"
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
      "json: include every run and its per-second samples, and each comparison's call "
      "stacks where the job was profiled (what mmtests, lkp and html use)");
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
    std::optional<std::string> text = ReadFileToString(in.token_file, nullptr);
    env.token = text.has_value() ? text->substr(0, text->find('\n')) : "";
    if (env.token.empty()) {
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
bool ReportViewOf(const Invocation& in, const CliEnv& env, report::ReportView* view) {
  view->all_counters = in.counters_view == "all";
  view->utf8 = in.report_utf8;
  if (in.columns_text.empty()) return true;
  std::string error;
  auto columns = report::ParseColumns(in.columns_text, &error);
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
  report::ReportView view;
  if (!ReportViewOf(in, env, &view)) return kExitUsage;
  std::string error;
  std::optional<std::string> text = ReadFileToString(in.report_from, &error);
  if (!text.has_value()) {
    PrintError(env, "--from: cannot read " + error);
    return kExitUsage;
  }
  v1::GetReportResponse report;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // saved by a newer faultline
  if (auto status = google::protobuf::util::JsonStringToMessage(*text, &report, options);
      !status.ok()) {
    PrintError(env, "--from " + in.report_from + ": not a saved report (faultline report JOB " +
                        "--format json): " + std::string(status.message()));
    return kExitUsage;
  }
  *env.out << report::RenderReport(report, *report::ParseReportFormat(in.format_name), view)
           << std::flush;
  return kExitOk;
}

// The parsed command against the controller.
int RunCommand(const Invocation& in, JobStub& client, const CliEnv& env) {
  if (in.submit->parsed()) return SubmitCommand(client, env, in.spec_path, in.wait);
  if (in.jobs->parsed()) return JobsCommand(client, env, in.limit);
  if (in.watch->parsed()) return WatchCommand(client, env, in.job_id);
  if (in.report->parsed()) {
    report::ReportView view;
    if (!ReportViewOf(in, env, &view)) return kExitUsage;
    return ReportCommand(client, env, in.job_id, *report::ParseReportFormat(in.format_name), view,
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
                          *report::ParseReportFormat(in.format_name), in.compare_paired);
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
