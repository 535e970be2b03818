// faultline-fleetsim: a load generator for the controller (#14). N simulated boards, each a
// real AgentService client with its own agent token, take assignments, heartbeat and report
// results shaped like real ones (one sample per second, ~60 counters, ~30 environment
// entries) after the run's duration; simulated users submit jobs, watch them and read their
// reports. Loopback only, bounded by --deadline, stops by itself; prints a table and writes
// its figures as JSON.
//
// Boards are driven by gRPC's callback API (no thread per board): every board is a small
// state machine (Hello -> AcquireWork -> [run: heartbeats, timer] -> ReportResult ->
// AcquireWork ...) advanced from the RPC callbacks and from one timer thread. Boards share
// channels (--boards-per-channel, default 50), each channel with a distinct channel
// argument and a local subchannel pool, so they are separate TCP connections. Users and
// readers are a few threads on the synchronous API.
//
// All times come from one std::chrono::steady_clock in this process. Dispatch latency is
// from the moment the SubmitJob RPC returned to the moment a board received the
// assignment, counted for boards that were parked in AcquireWork since before the submit
// started (idle parked boards); every assignment's wait from submit is reported as the
// queue wait.
//
//   faultline-fleetsim mint --database-url URL --boards N --out tokens.tsv --user-out user.token
//   faultline-fleetsim --controller 127.0.0.1:PORT --token-file tokens.tsv
//       --user-token-file user.token --boards 100 --runs 200 --run-seconds 1 --json out.json
#include "tests/bench/fleetsim/fleet.h"
#include "tests/bench/fleetsim/support.h"
#include "tests/bench/fleetsim/users.h"

namespace faultline::fleetsim {
namespace {

// ---- the run ----

std::string Fmt(const json& d, const char* key) {
  if (!d.contains(key)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", d[key].get<double>());
  return buf;
}

int Simulate(const Options& opt) {
  const TimePoint t0 = Clock::now();
  const TimePoint hard_deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opt.deadline_seconds));
  auto log = [&](const std::string& line) {
    if (!opt.quiet) {
      std::fprintf(stderr, "[fleetsim %7.2fs] %s\n", Seconds(Clock::now() - t0), line.c_str());
    }
  };

  // Boards: names and tokens from the token file, or sim-00000... without credentials.
  std::vector<std::pair<std::string, std::string>> identities;
  if (!opt.token_file.empty()) {
    std::ifstream in(opt.token_file);
    std::string name, token;
    while (in >> name >> token && static_cast<int>(identities.size()) < opt.boards) {
      identities.emplace_back(name, token);
    }
    if (static_cast<int>(identities.size()) < opt.boards) {
      std::cerr << "faultline-fleetsim: " << opt.token_file << " has " << identities.size()
                << " boards, --boards asks for " << opt.boards << "\n";
      return 2;
    }
  } else {
    for (int i = 0; i < opt.boards; ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "sim-%05d", i);
      identities.emplace_back(name, "");
    }
  }
  std::string user_token;
  if (!opt.user_token_file.empty()) {
    std::ifstream in(opt.user_token_file);
    std::stringstream ss;
    ss << in.rdbuf();
    user_token = std::string(faultline::TrimSpace(ss.str()));
  }

  auto fleet = std::make_unique<Fleet>();
  fleet->opt = opt;
  const int channels = (opt.boards + opt.boards_per_channel - 1) / opt.boards_per_channel;
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("faultline.fleetsim.channel", c);  // distinct args: a connection each
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
    auto ch = grpc::CreateCustomChannel(ChannelTarget(opt.controller, static_cast<size_t>(c)),
                                        grpc::InsecureChannelCredentials(), args);
    fleet->stubs.push_back(v1::AgentService::NewStub(ch));
    fleet->channels.push_back(std::move(ch));
  }
  for (int i = 0; i < opt.boards; ++i) {
    auto b = std::make_unique<Board>();
    b->index = i;
    b->name = identities[static_cast<size_t>(i)].first;
    b->token = identities[static_cast<size_t>(i)].second;
    b->stub = fleet->stubs[static_cast<size_t>(i / opt.boards_per_channel)].get();
    b->facts = MakeFacts(opt, i, b->name);
    b->rng.seed(static_cast<uint64_t>(i) * 7919 + 17);
    b->base_rounds = 200.0 + 50.0 * (i % 7);
    Fleet::PrepareReport(*b);
    fleet->boards.push_back(std::move(b));
    fleet->to_connect.push_back(i);
  }

  bool timed_out = false;
  auto wait_until = [&](const std::function<bool()>& done) {
    std::unique_lock lock(fleet->mu);
    if (!fleet->cv.wait_until(lock, hard_deadline, done)) timed_out = true;
    return !timed_out;
  };

  // Connect: Hellos ramp up (at most --connect-parallel in flight), then each board parks.
  log("connecting " + std::to_string(opt.boards) + " boards over " + std::to_string(channels) +
      " channels");
  const TimePoint connect_start = Clock::now();
  for (int i = 0; i < std::min(opt.connect_parallel, opt.boards); ++i) fleet->ConnectNext();
  wait_until([&] { return fleet->parked_once.load() >= opt.boards; });
  const double connect_seconds = Seconds(Clock::now() - connect_start);
  if (!timed_out) {
    log("all boards parked after " + std::to_string(connect_seconds) + " s");
    std::unique_lock lock(fleet->mu);
    fleet->cv.wait_for(lock, std::chrono::duration<double>(opt.settle_seconds));
  }
  if (!timed_out && !opt.ready_file.empty()) {
    std::ofstream(opt.ready_file) << "boards=" << opt.boards << "\n";
  }
  if (!timed_out && opt.idle_seconds > 0) {
    log("idle for " + std::to_string(opt.idle_seconds) + " s");
    std::unique_lock lock(fleet->mu);
    if (!fleet->cv.wait_until(
            lock,
            std::min(hard_deadline,
                     Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(opt.idle_seconds))),
            [] { return false; })) {
      if (Clock::now() >= hard_deadline) timed_out = true;
    }
  }
  if (!timed_out && !opt.go_file.empty()) {
    // The driver samples the idle controller first: its sampling processes must not share
    // the CPUs with the dispatch being measured.
    log("waiting for " + opt.go_file);
    std::unique_lock lock(fleet->mu);
    while (!std::filesystem::exists(opt.go_file)) {
      if (Clock::now() >= hard_deadline) {
        timed_out = true;
        break;
      }
      fleet->cv.wait_for(lock, std::chrono::milliseconds(20));
    }
  }

  // Users: the runs split over users, in jobs of at most 10,000 runs (the controller's cap),
  // each a multiple of the number of kernels.
  Users users;
  users.opt = opt;
  users.fleet = fleet.get();
  users.token = user_token;
  users.hard_deadline = hard_deadline;
  {
    grpc::ChannelArguments user_args;  // as the CLI: reports of big jobs exceed 4 MB
    user_args.SetMaxReceiveMessageSize(256 << 20);
    users.channel = grpc::CreateCustomChannel(
        ChannelTarget(opt.user_controller.empty() ? opt.controller : opt.user_controller, 0),
        grpc::InsecureChannelCredentials(), user_args);
  }
  users.stub = v1::JobService::NewStub(users.channel);
  std::vector<std::thread> threads;
  int planned_runs = 0;
  int user_threads = 0;
  TimePoint work_start = Clock::now();
  if (!timed_out && opt.runs > 0) {
    const int k = static_cast<int>(opt.kernels.size());
    const int per_user = (opt.runs + opt.users - 1) / opt.users;
    for (int u = 0; u < opt.users; ++u) {
      int left = std::min(per_user, opt.runs - u * per_user);
      std::vector<uint32_t> jobs;
      while (left > 0) {
        int n = std::min(left, std::max(opt.runs_per_job, k) / k * k);
        n = (n + k - 1) / k * k;
        uint32_t planned = 0;
        (void)users.Spec(u, 0, static_cast<uint32_t>(n), &planned);
        jobs.push_back(static_cast<uint32_t>(n));
        planned_runs += static_cast<int>(planned);
        left -= n;
      }
      if (jobs.empty()) continue;
      user_threads++;
      threads.emplace_back([&users, u, jobs] {
        users.User(u, jobs);
        users.finished++;
        users.fleet->Notify();
      });
    }
    for (int r = 0; r < opt.readers; ++r) threads.emplace_back([&users] { users.Reader(); });
    log("submitting " + std::to_string(planned_runs) + " runs of " +
        std::to_string(opt.run_seconds) + " s from " + std::to_string(opt.users) + " users");
    work_start = Clock::now();
    // Done: every user saw its jobs end (so every result is in) and no run is in progress.
    wait_until(
        [&] { return users.finished.load() == user_threads && fleet->running_now.load() == 0; });
  }
  const TimePoint work_end = Clock::now();
  users.work_done = true;

  // Stop: end the parked calls; every chain sees the stop and ends.
  log(timed_out ? "deadline reached: stopping" : "stopping");
  fleet->stopping = true;
  fleet->Notify();
  users.CancelAll();
  fleet->CancelParked();
  fleet->timers.Stop();
  const TimePoint stop_by = Clock::now() + std::chrono::seconds(15);
  while (fleet->inflight.load() != 0 && Clock::now() < stop_by) {
    fleet->CancelParked();  // a call that started as the stop began
    std::unique_lock lock(fleet->mu);
    fleet->cv.wait_for(lock, std::chrono::milliseconds(100),
                       [&] { return fleet->inflight.load() == 0; });
  }
  if (fleet->inflight.load() != 0) {
    std::cerr << "faultline-fleetsim: " << fleet->inflight.load()
              << " RPCs still in flight 15 s after the stop\n";
    std::fflush(nullptr);
    std::_Exit(1);
  }
  for (auto& t : threads) t.join();

  // ---- figures ----
  Stats& st = fleet->stats;
  std::lock_guard lock(st.mu_);
  std::vector<double> dispatch_idle, queue_wait, reassign;
  int before_return = 0;
  for (const auto& a : st.assignments_) {
    auto j = st.jobs_.find(a.job_id);
    if (j == st.jobs_.end()) continue;
    double wait = Ms(a.received - j->second.submit_returned);
    if (wait < 0) {
      before_return++;
      wait = 0;
    }
    queue_wait.push_back(wait);
    if (a.acquire_sent <= j->second.submit_started) {
      dispatch_idle.push_back(wait);
    } else {
      reassign.push_back(Ms(a.received - a.acquire_sent));
    }
  }
  int assigned_twice = 0, completed_twice = 0, never_completed = 0;
  for (const auto& [run, n] : st.assigned_count_) {
    if (n > 1) assigned_twice++;
    auto c = st.completed_count_.find(run);
    if (c == st.completed_count_.end()) {
      never_completed++;
    } else if (c->second > 1) {
      completed_twice++;
    }
  }
  uint32_t submitted_runs = 0;
  std::optional<TimePoint> first_submit;
  for (const auto& [id, j] : st.jobs_) {
    submitted_runs += j.runs;
    if (!first_submit || j.submit_started < *first_submit) first_submit = j.submit_started;
  }
  const uint64_t completed = st.reports_;
  const double e2e_window =
      first_submit && completed > 0 ? Seconds(st.last_report_ - *first_submit) : 0;
  const double report_window =
      st.first_report_ && completed > 1 ? Seconds(st.last_report_ - *st.first_report_) : 0;

  json out;
  out["config"] = {
      {"controller", opt.controller},
      {"user_controller", opt.user_controller.empty() ? opt.controller : opt.user_controller},
      {"boards", opt.boards},
      {"channels", channels},
      {"boards_per_channel", opt.boards_per_channel},
      {"runs", planned_runs},
      {"run_seconds", opt.run_seconds},
      {"time_scale", opt.time_scale},
      {"users", opt.users},
      {"readers", opt.readers},
      {"kernels", opt.kernels},
      {"kernel_mix", opt.kernel_mix},
      {"idle_seconds", opt.idle_seconds},
      {"deadline_seconds", opt.deadline_seconds}};
  out["connect"] = {{"seconds_until_all_parked", connect_seconds},
                    {"hello_ms", Distribution(st.rpcs_["Hello"].latency_ms)}};
  out["dispatch_idle_ms"] = Distribution(dispatch_idle);
  out["dispatch_idle_ms"]["definition"] =
      "SubmitJob returned -> assignment received, boards parked in AcquireWork before the submit";
  out["queue_wait_ms"] = Distribution(queue_wait);
  out["reassign_ms"] = Distribution(reassign);
  out["reassign_ms"]["definition"] =
      "AcquireWork sent after a report -> assignment received (runs already queued)";
  out["assignments_before_submit_returned"] = before_return;
  out["runs"] = {{"planned", planned_runs},
                 {"submitted", submitted_runs},
                 {"assigned", st.assignments_.size()},
                 {"completed", completed},
                 {"assigned_twice", assigned_twice},
                 {"completed_twice", completed_twice},
                 {"assigned_never_completed", never_completed}};
  out["throughput"] = {{"runs_completed_per_second",
                        e2e_window > 0 ? static_cast<double>(completed) / e2e_window : 0},
                       {"window_seconds", e2e_window},
                       {"definition", "results accepted / (last result accepted - first submit)"}};
  out["ingest"] = {{"reports", completed},
                   {"samples", st.samples_},
                   {"samples_per_second",
                    report_window > 0 ? static_cast<double>(st.samples_) / report_window : 0},
                   {"report_window_seconds", report_window},
                   {"report_rpc_ms", Distribution(st.rpcs_["ReportResult"].latency_ms)}};
  out["heartbeats"] = {{"ok", st.heartbeats_}, {"cancel", st.heartbeat_cancels_}};
  json rpcs = json::object();
  json errors_by_code = json::object();
  for (const auto& [name, r] : st.rpcs_) {
    rpcs[name] = {{"ok", r.ok},
                  {"cancelled_at_stop", r.cancelled_at_stop},
                  {"errors", r.errors},
                  {"latency_ms", Distribution(r.latency_ms)}};
    if (!r.first_error.empty()) rpcs[name]["first_error"] = r.first_error;
    for (const auto& [code, n] : r.errors) {
      errors_by_code[code] = errors_by_code.value(code, 0) + n;
    }
  }
  out["rpc"] = rpcs;
  out["errors_by_code"] = errors_by_code;
  json job_states = json::object();
  for (const auto& [id, state] : st.job_states_) job_states[std::to_string(id)] = state;
  out["users"] = {{"jobs", st.jobs_.size()},
                  {"job_states", job_states},
                  {"watch_events", st.watch_events_},
                  {"get_report_ms", Distribution(users.report_ms)}};
  out["elapsed_seconds"] = Seconds(Clock::now() - t0);
  out["work_seconds"] = Seconds(work_end - work_start);
  out["timed_out"] = timed_out;

  std::vector<std::string> problems = st.problems_;
  if (opt.verify && opt.runs > 0 && !timed_out) {
    if (submitted_runs != static_cast<uint32_t>(planned_runs)) {
      problems.push_back("submitted " + std::to_string(submitted_runs) + " of " +
                         std::to_string(planned_runs) + " runs");
    }
    if (completed != submitted_runs) {
      problems.push_back(std::to_string(completed) + " results accepted for " +
                         std::to_string(submitted_runs) + " runs");
    }
    if (assigned_twice > 0 && !opt.allow_retries)
      problems.push_back(std::to_string(assigned_twice) + " runs assigned twice");
    if (completed_twice > 0) {
      problems.push_back(std::to_string(completed_twice) + " runs completed twice");
    }
    for (const auto& [id, state] : st.job_states_) {
      if (state != "JOB_STATE_SUCCEEDED")
        problems.push_back("job " + std::to_string(id) + " ended " + state);
    }
  }
  if (timed_out) problems.push_back("did not finish within --deadline");
  out["problems"] = problems;
  out["ok"] = problems.empty();

  // Table.
  std::printf("faultline-fleetsim: %d boards (%d channels), %u runs of %d s, %d users\n",
              opt.boards, channels, submitted_runs, opt.run_seconds, opt.users);
  std::printf("  %-34s %8s %8s %8s %8s %8s\n", "figure (ms unless noted)", "count", "p50", "p90",
              "p99", "max");
  auto row = [](const char* name, const json& d) {
    std::printf("  %-34s %8zu %8s %8s %8s %8s\n", name, d["count"].get<size_t>(),
                Fmt(d, "p50").c_str(), Fmt(d, "p90").c_str(), Fmt(d, "p99").c_str(),
                Fmt(d, "max").c_str());
  };
  row("dispatch to idle parked board", out["dispatch_idle_ms"]);
  row("queue wait (submit -> assigned)", out["queue_wait_ms"]);
  row("reassign (re-park -> assigned)", out["reassign_ms"]);
  row("Hello RPC", out["connect"]["hello_ms"]);
  row("ReportResult RPC", out["ingest"]["report_rpc_ms"]);
  for (const char* m : {"Heartbeat", "SubmitJob", "GetReport", "GetJob", "ListJobs"}) {
    if (rpcs.contains(m)) row((std::string(m) + " RPC").c_str(), rpcs[m]["latency_ms"]);
  }
  std::printf("  %-34s %.2f s\n", "connect (all boards parked)", connect_seconds);
  std::printf("  %-34s %.2f /s over %.1f s\n", "runs completed end to end",
              out["throughput"]["runs_completed_per_second"].get<double>(), e2e_window);
  std::printf("  %-34s %.0f samples/s (%llu samples, %llu results)\n", "result ingest",
              out["ingest"]["samples_per_second"].get<double>(),
              static_cast<unsigned long long>(st.samples_),
              static_cast<unsigned long long>(completed));
  std::printf("  %-34s assigned %zu, twice %d, completed twice %d, never completed %d\n", "runs",
              st.assignments_.size(), assigned_twice, completed_twice, never_completed);
  std::printf("  %-34s %s\n", "errors by code",
              errors_by_code.empty() ? "none" : errors_by_code.dump().c_str());
  for (const auto& p : problems) std::printf("  PROBLEM: %s\n", p.c_str());
  std::printf("  %s\n", problems.empty() ? "ok" : "FAILED");

  if (!opt.json_file.empty()) {
    std::ofstream(opt.json_file) << out.dump(2) << "\n";
  }
  std::fflush(nullptr);
  return problems.empty() ? 0 : 1;
}

}  // namespace
}  // namespace faultline::fleetsim

using namespace faultline::fleetsim;  // NOLINT: the tool's own names, in main only

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"faultline-fleetsim: simulated boards and users against a local controller"};
  app.add_option("--controller", opt.controller, "controller gRPC address (loopback only)");
  app.add_option("--user-controller", opt.user_controller,
                 "another controller on the same database for the users (submit, watch, "
                 "report): dispatch then crosses controllers");
  app.add_option("--token-file", opt.token_file,
                 "agent tokens, 'BOARD TOKEN' per line (from `mint`); without: no credentials");
  app.add_option("--user-token-file", opt.user_token_file, "the users' token (one line)");
  app.add_option("--boards", opt.boards, "simulated boards")
      ->check(CLI::Range(1, 20000))
      ->capture_default_str();
  app.add_option("--boards-per-channel", opt.boards_per_channel, "boards sharing one connection")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--connect-parallel", opt.connect_parallel,
                 "Hello calls in flight while connecting")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("--runs", opt.runs, "runs to submit in total (0: boards only idle)")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--runs-per-job", opt.runs_per_job,
                 "a user submits its runs in jobs of at most this many, each after the last ended")
      ->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  app.add_option("--run-seconds", opt.run_seconds, "each run's duration")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--time-scale", opt.time_scale, "a simulated run lasts duration x this")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  app.add_option("--users", opt.users,
                 "users submitting, watching and reading (runs split over them)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--readers", opt.readers, "users listing jobs and reading reports every second")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--kernels", opt.kernels, "kernel labels of the jobs")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--kernel-mix", opt.kernel_mix,
                 "both: every board runs every label; split: board i runs label i mod k")
      ->check(CLI::IsMember({"both", "split"}))
      ->capture_default_str();
  app.add_option("--settle", opt.settle_seconds,
                 "seconds after every board parked before submitting")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--idle-seconds", opt.idle_seconds, "seconds the parked boards stay idle first")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--ready-file", opt.ready_file, "created once every board is parked and settled");
  app.add_option("--go-file", opt.go_file,
                 "the users submit only once this file exists (after --idle-seconds)");
  app.add_option("--heartbeat-seconds", opt.heartbeat_seconds,
                 "heartbeat interval during runs (0: what the controller says)")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  app.add_option("--acquire-wait", opt.acquire_wait_seconds, "AcquireWork wait_seconds")
      ->check(CLI::Range(1, 30))
      ->capture_default_str();
  app.add_option("--deadline", opt.deadline_seconds, "hard limit in seconds; exit 1 if not done")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--json", opt.json_file, "write the figures here as JSON");
  app.add_flag("!--no-verify", opt.verify, "do not fail on runs assigned or completed twice");
  app.add_flag("--allow-retries", opt.allow_retries,
               "a controller dies mid-study: runs may be assigned again and take more than one "
               "attempt, but each must still complete exactly once");
  app.add_flag("--quiet", opt.quiet, "no progress lines on stderr");

  std::string database_url, prefix = "sim", out, user_out;
  int mint_boards = 0;
  auto* mint = app.add_subcommand("mint", "create agent tokens for N boards (and a user token)");
  mint->add_option("--database-url", database_url, "the controller's PostgreSQL URL")->required();
  mint->add_option("--boards", mint_boards, "boards")->required()->check(CLI::Range(1, 20000));
  mint->add_option("--prefix", prefix, "board names PREFIX-00000...")->capture_default_str();
  mint->add_option("--out", out, "write 'BOARD TOKEN' lines here")->required();
  mint->add_option("--user-out", user_out, "also create a user token, written here");
  CLI11_PARSE(app, argc, argv);
  if (mint->parsed()) return Mint(database_url, mint_boards, prefix, out, user_out);

  if (opt.controller.empty()) {
    std::cerr << "faultline-fleetsim: --controller is required\n";
    return 2;
  }
  std::string why;
  std::vector<std::string> addresses = SplitList(opt.controller);
  for (const auto& a : SplitList(opt.user_controller)) addresses.push_back(a);
  for (const std::string& address : addresses) {
    if (IsLoopback(address, &why)) continue;
    std::cerr << "faultline-fleetsim: controller " << address << ": " << why
              << " (the simulator only talks to controllers on this machine)\n";
    return 2;
  }
  if (opt.kernels.empty()) {
    std::cerr << "faultline-fleetsim: --kernels needs at least one label\n";
    return 2;
  }
  return Simulate(opt);
}
