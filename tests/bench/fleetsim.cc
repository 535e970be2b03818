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
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "faultline/v1/agent.grpc.pb.h"
#include "faultline/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "services/common/tls.h"
#include "services/controller/api/auth.h"
#include "services/controller/storage/pg_store.h"

namespace {

namespace v1 = faultline::v1;
using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using nlohmann::json;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// ---- options ----

struct Options {
  std::string controller;
  std::string user_controller;  // where the users submit and watch (default: controller)
  std::string token_file;       // "BOARD TOKEN" lines; without: no credentials (--auth off)
  std::string user_token_file;  // one line
  int boards = 10;
  int boards_per_channel = 50;
  int connect_parallel = 64;  // Hellos in flight at once while connecting
  int runs = 0;               // total runs over all users' jobs; 0: idle only
  int runs_per_job = 10'000;  // a user's runs go in jobs of at most this many, one after another
  int run_seconds = 1;        // the jobs' duration; a simulated run lasts this long
  double time_scale = 1.0;    // a run lasts duration x time_scale (results still say duration)
  int users = 1;
  int readers = 0;  // users that list jobs and read the latest report every second meanwhile
  std::vector<std::string> kernels = {"vanilla", "patched"};
  std::string kernel_mix = "both";  // both: every board runs both labels; split: half each
  double settle_seconds = 2.0;      // after every board parked, before the first submit
  double idle_seconds = 0;          // boards stay parked this long (controller idle figures)
  std::string ready_file;           // created once every board parked and settled
  std::string go_file;              // if set: the users submit once it exists (after the idle)
  int heartbeat_seconds = 0;        // 0: the interval the controller's Hello answers
  int acquire_wait_seconds = 30;
  double deadline_seconds = 300;
  std::string json_file;
  bool verify = true;  // every run completed exactly once, none assigned twice
  // A controller may die mid-study (--controller lists several): a run may be assigned more
  // than once and take more than one attempt, but must still complete exactly once.
  bool allow_retries = false;
  bool quiet = false;
};

// The controller must be on this machine: 127.0.0.0/8, ::1 or localhost.
std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Channel `c`'s target over a list of controllers: the list rotated by c, so channels spread
// over the controllers and each fails over to the next (ControllerTarget: pick_first).
std::string ChannelTarget(const std::string& controllers, size_t c) {
  std::vector<std::string> list = SplitList(controllers);
  if (list.size() < 2) return controllers;
  std::rotate(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(c % list.size()),
              list.end());
  std::string joined;
  for (const auto& a : list) joined += (joined.empty() ? "" : ",") + a;
  auto target = faultline::ControllerTarget(joined);
  return target.ok() ? *target : controllers;
}

bool IsLoopback(const std::string& target, std::string* why) {
  std::string t = target;
  for (const char* scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (t.rfind(scheme, 0) == 0) t = t.substr(std::string(scheme).size());
  }
  std::string host;
  if (!t.empty() && t[0] == '[') {
    auto end = t.find(']');
    if (end == std::string::npos) {
      *why = "unbalanced [";
      return false;
    }
    host = t.substr(1, end - 1);
  } else {
    auto colon = t.rfind(':');
    if (colon == std::string::npos) {
      *why = "expected HOST:PORT";
      return false;
    }
    host = t.substr(0, colon);
  }
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if ((ntohl(v4.s_addr) >> 24) == 127) return true;
    *why = host + " is not a loopback address";
    return false;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    *why = host + " is not a loopback address";
    return false;
  }
  *why = "'" + host + "' is not a loopback address (names other than localhost are refused)";
  return false;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// ---- statistics ----

json Distribution(std::vector<double> v) {
  json out = {{"count", v.size()}};
  if (v.empty()) return out;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) {
    // nearest rank
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  double sum = 0;
  for (double x : v) sum += x;
  out["p50"] = pct(50);
  out["p90"] = pct(90);
  out["p99"] = pct(99);
  out["max"] = v.back();
  out["mean"] = sum / static_cast<double>(v.size());
  return out;
}

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "CODE_" + std::to_string(static_cast<int>(code));
  }
}

struct AssignmentSeen {
  int64_t job_id;
  int64_t run_id;
  int board;
  TimePoint received;
  TimePoint acquire_sent;  // when the AcquireWork call that got it started
};

struct JobSeen {
  TimePoint submit_started;
  TimePoint submit_returned;
  uint32_t runs = 0;
};

// Everything measured, under one mutex (contention is small next to the RPCs).
class Stats {
 public:
  void Rpc(const std::string& method, const grpc::Status& s, Clock::duration took, bool stopping) {
    std::lock_guard lock(mu_);
    auto& m = rpcs_[method];
    if (s.ok()) {
      m.ok++;
      m.latency_ms.push_back(Ms(took));
    } else if (stopping && s.error_code() == grpc::StatusCode::CANCELLED) {
      m.cancelled_at_stop++;  // our own cancellation of parked calls: not an error
    } else {
      m.errors[CodeName(s.error_code())]++;
      if (m.first_error.empty()) m.first_error = s.error_message();
    }
  }
  void Assigned(const AssignmentSeen& a) {
    std::lock_guard lock(mu_);
    assignments_.push_back(a);
    assigned_count_[a.run_id]++;
    if (!first_assignment_ || a.received < *first_assignment_) first_assignment_ = a.received;
  }
  void Reported(int64_t run_id, bool accepted, size_t samples, TimePoint at) {
    std::lock_guard lock(mu_);
    if (!accepted) return;
    completed_count_[run_id]++;
    samples_ += samples;
    reports_++;
    if (!first_report_) first_report_ = at;
    last_report_ = at;
  }
  void Heartbeat(bool cancel) {
    std::lock_guard lock(mu_);
    heartbeats_++;
    if (cancel) heartbeat_cancels_++;
  }
  void JobSubmitted(int64_t job_id, const JobSeen& j) {
    std::lock_guard lock(mu_);
    jobs_[job_id] = j;
  }
  void Problem(const std::string& p) {
    std::lock_guard lock(mu_);
    if (problems_.size() < 50) problems_.push_back(p);
    problem_count_++;
  }
  void WatchEvent() {
    std::lock_guard lock(mu_);
    watch_events_++;
  }
  void JobFinal(int64_t job_id, const std::string& state) {
    std::lock_guard lock(mu_);
    job_states_[job_id] = state;
  }

  struct RpcStats {
    uint64_t ok = 0;
    uint64_t cancelled_at_stop = 0;
    std::map<std::string, uint64_t> errors;
    std::string first_error;
    std::vector<double> latency_ms;
  };

  std::mutex mu_;
  std::map<std::string, RpcStats> rpcs_;
  std::vector<AssignmentSeen> assignments_;
  std::map<int64_t, int> assigned_count_;
  std::map<int64_t, int> completed_count_;
  std::map<int64_t, JobSeen> jobs_;
  std::map<int64_t, std::string> job_states_;
  std::optional<TimePoint> first_assignment_, first_report_;
  TimePoint last_report_{};
  uint64_t samples_ = 0, reports_ = 0, heartbeats_ = 0, heartbeat_cancels_ = 0;
  uint64_t watch_events_ = 0;
  std::vector<std::string> problems_;
  uint64_t problem_count_ = 0;
};

// ---- one timer thread for every board's delays ----

class Timers {
 public:
  Timers() : thread_([this] { Loop(); }) {}
  ~Timers() { Stop(); }
  void After(Clock::duration d, std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      if (!stop_) {
        due_.emplace(Clock::now() + d, std::move(fn));
        cv_.notify_one();
        return;
      }
    }
    fn();  // stopping: run it now (it sees the stop and ends its chain)
  }
  // Runs whatever is pending at once, then ends the thread.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (true) {
      if (stop_) {
        auto pending = std::move(due_);
        due_.clear();
        lock.unlock();
        for (auto& [t, fn] : pending) fn();
        return;
      }
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (first->first > Clock::now()) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      auto fn = std::move(first->second);
      due_.erase(first);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<TimePoint, std::function<void()>> due_;
  bool stop_ = false;
  std::thread thread_;
};

// ---- simulated boards ----

struct Fleet;

struct Board {
  int index = 0;
  std::string name;
  std::string token;
  v1::AgentService::Stub* stub = nullptr;
  v1::Board facts;
  double base_rounds = 0;  // this board's rounds per second
  std::mt19937_64 rng;

  std::mutex mu;
  // Contexts of the main chain (Hello/AcquireWork/ReportResult) and of heartbeats. The
  // previous one is kept until the next call: a context is never destroyed in its own
  // callback.
  std::shared_ptr<grpc::ClientContext> ctx, ctx_old;
  std::unique_ptr<grpc::ClientContext> hb_ctx, hb_ctx_old;
  bool acquiring = false;
  v1::HelloRequest hello_req;
  v1::HelloResponse hello_resp;
  v1::AcquireWorkRequest acquire_req;
  v1::AcquireWorkResponse acquire_resp;
  v1::HeartbeatRequest hb_req;
  v1::HeartbeatResponse hb_resp;
  v1::ReportResultRequest report_req;
  v1::ReportResultResponse report_resp;
  TimePoint call_started{};
  TimePoint acquire_sent{};
  int heartbeat_seconds = 10;
  bool hello_answered = false;  // the connect ramp moves on at the first answer
  bool parked_once = false;
  bool running = false;     // a simulated run is in progress (until its report is taken)
  bool cancel_run = false;  // a heartbeat said the attempt is no longer ours
  uint64_t run_serial = 0;  // heartbeats of an earlier run stop by this
  int report_failures = 0;
};

// The counters of a simulated result: vmstat deltas, rusage and memcg events.
const char* const kCounterNames[] = {"vmstat.pgfault",
                                     "vmstat.pgmajfault",
                                     "vmstat.pgpgin",
                                     "vmstat.pgpgout",
                                     "vmstat.pswpin",
                                     "vmstat.pswpout",
                                     "vmstat.pgalloc_normal",
                                     "vmstat.pgfree",
                                     "vmstat.pgactivate",
                                     "vmstat.pgdeactivate",
                                     "vmstat.pglazyfree",
                                     "vmstat.pgrefill",
                                     "vmstat.pgreuse",
                                     "vmstat.pgsteal_kswapd",
                                     "vmstat.pgsteal_direct",
                                     "vmstat.pgscan_kswapd",
                                     "vmstat.pgscan_direct",
                                     "vmstat.pginodesteal",
                                     "vmstat.kswapd_inodesteal",
                                     "vmstat.pageoutrun",
                                     "vmstat.pgrotated",
                                     "vmstat.workingset_refault_anon",
                                     "vmstat.workingset_refault_file",
                                     "vmstat.workingset_activate_anon",
                                     "vmstat.workingset_activate_file",
                                     "vmstat.workingset_restore_anon",
                                     "vmstat.workingset_restore_file",
                                     "vmstat.nr_dirtied",
                                     "vmstat.nr_written",
                                     "vmstat.thp_fault_alloc",
                                     "vmstat.thp_fault_fallback",
                                     "vmstat.compact_stall",
                                     "vmstat.compact_fail",
                                     "vmstat.compact_success",
                                     "vmstat.allocstall_normal",
                                     "vmstat.allocstall_movable",
                                     "vmstat.unevictable_pgs_culled",
                                     "vmstat.drop_pagecache",
                                     "vmstat.retry_mmap_drop",
                                     "vmstat.pgmigrate_success",
                                     "rusage.minflt",
                                     "rusage.majflt",
                                     "rusage.nvcsw",
                                     "rusage.nivcsw",
                                     "rusage.utime_seconds",
                                     "rusage.stime_seconds",
                                     "cpu_seconds",
                                     "helper.munmap_rounds",
                                     "helper.pageout_rounds",
                                     "perf.sw:page-faults",
                                     "memcg.pgscan",
                                     "memcg.pgsteal",
                                     "memcg.pgfault",
                                     "memcg.pgmajfault",
                                     "memcg.workingset_refault_file",
                                     "memcg.thp_fault_alloc",
                                     "memcg_event.low",
                                     "memcg_event.high",
                                     "memcg_event.max",
                                     "memcg_event.oom"};

struct Fleet {
  Options opt;
  Stats stats;
  Timers timers;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs;
  std::vector<std::unique_ptr<Board>> boards;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> inflight{0};  // RPCs started and not yet called back
  std::atomic<int> parked_once{0};   // boards whose first AcquireWork is out
  std::atomic<int> running_now{0};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> to_connect;  // boards waiting for their first Hello (ramp)
  size_t next_connect = 0;

  void Notify() {
    std::lock_guard lock(mu);
    cv.notify_all();
  }
  // A call's callback is over. The main thread waits on `inflight` only at the stop: waking
  // it on every callback would cost each one a lock and a wakeup.
  void CallEnded() {
    if (inflight.fetch_sub(1) == 1 || stopping) Notify();
  }

  void Authorize(Board& b, grpc::ClientContext* ctx) {
    if (!b.token.empty()) ctx->AddMetadata("authorization", "Bearer " + b.token);
  }

  std::unique_ptr<grpc::ClientContext> NewContext(Board& b, std::chrono::seconds timeout) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    Authorize(b, ctx.get());
    return ctx;
  }

  // The next board of the connect ramp, if any.
  void ConnectNext() {
    if (stopping) return;
    int index = -1;
    {
      std::lock_guard lock(mu);
      if (next_connect < to_connect.size()) index = to_connect[next_connect++];
    }
    if (index >= 0) Hello(*boards[index]);
  }

  // Starts a call of the main chain. The lock is not held while the call starts: gRPC may
  // run the callback before the starting function returns.
  grpc::ClientContext* SwapContext(Board& b, std::chrono::seconds timeout) {
    std::lock_guard lock(b.mu);
    b.ctx_old = std::move(b.ctx);
    b.ctx = NewContext(b, timeout);
    b.call_started = Clock::now();
    return b.ctx.get();
  }

  void Hello(Board& b) {
    if (stopping) return;
    *b.hello_req.mutable_board() = b.facts;
    b.hello_resp.Clear();
    auto* ctx = SwapContext(b, std::chrono::seconds(30));
    inflight++;
    b.stub->async()->Hello(ctx, &b.hello_req, &b.hello_resp,
                           [this, &b](grpc::Status s) { OnHello(b, s); });
  }

  void OnHello(Board& b, const grpc::Status& s) {
    stats.Rpc("Hello", s, Clock::now() - b.call_started, stopping);
    const bool first = !b.hello_answered;
    b.hello_answered = true;
    if (s.ok()) {
      if (b.hello_resp.heartbeat_interval_seconds() > 0) {
        b.heartbeat_seconds = static_cast<int>(b.hello_resp.heartbeat_interval_seconds());
      }
      if (opt.heartbeat_seconds > 0) b.heartbeat_seconds = opt.heartbeat_seconds;
      Acquire(b);
    } else if (!stopping) {
      // As the agent: back off, then hello again.
      timers.After(std::chrono::seconds(1), [this, &b] { Hello(b); });
    }
    if (first) ConnectNext();  // a failing board does not hold the ramp
    CallEnded();
  }

  void Acquire(Board& b) {
    if (stopping) return;
    b.acquire_req.set_board(b.name);
    b.acquire_req.set_wait_seconds(static_cast<uint32_t>(opt.acquire_wait_seconds));
    b.acquire_resp.Clear();
    grpc::ClientContext* ctx;
    {
      std::lock_guard lock(b.mu);
      b.ctx_old = std::move(b.ctx);
      b.ctx = NewContext(b, std::chrono::seconds(opt.acquire_wait_seconds + 15));
      ctx = b.ctx.get();
      b.acquire_sent = Clock::now();
      b.call_started = b.acquire_sent;
      b.acquiring = true;
    }
    inflight++;
    if (!b.parked_once) {
      b.parked_once = true;
      parked_once++;
      Notify();
    }
    b.stub->async()->AcquireWork(ctx, &b.acquire_req, &b.acquire_resp,
                                 [this, &b](grpc::Status s) { OnAcquire(b, s); });
  }

  void OnAcquire(Board& b, const grpc::Status& s) {
    const TimePoint now = Clock::now();
    TimePoint sent;
    {
      std::lock_guard lock(b.mu);
      b.acquiring = false;
      sent = b.acquire_sent;
    }
    stats.Rpc("AcquireWork", s, now - sent, stopping);
    if (!s.ok()) {
      if (!stopping) {
        timers.After(std::chrono::seconds(1), [this, &b] { Hello(b); });
      }
    } else if (b.acquire_resp.has_assignment()) {
      const v1::Assignment& a = b.acquire_resp.assignment();
      stats.Assigned({a.job_id(), a.run_id(), b.index, now, sent});
      // The run starts on the timer thread: building its result here would hold up the
      // callbacks of the boards answered after this one, and so their figures.
      timers.After(Clock::duration::zero(), [this, &b, a] { StartRun(b, a); });
    } else if (b.acquire_resp.has_switch_kernel()) {
      stats.Problem("board " + b.name + " was ordered to switch to " +
                    b.acquire_resp.switch_kernel().label() + ": simulated boards do not switch");
      if (!stopping) timers.After(std::chrono::seconds(1), [this, &b] { Hello(b); });
    } else {
      Acquire(b);  // nothing yet: ask again
    }
    CallEnded();
  }

  // The run is over for this board (reported, or abandoned at the stop).
  void EndRun(Board& b) {
    bool was_running;
    {
      std::lock_guard lock(b.mu);
      was_running = b.running;
      b.running = false;
    }
    if (was_running) running_now--;
    Notify();
  }

  void StartRun(Board& b, const v1::Assignment& a) {
    uint64_t serial;
    {
      std::lock_guard lock(b.mu);
      b.running = true;
      b.cancel_run = false;
      serial = ++b.run_serial;
      b.hb_req.Clear();
      b.hb_req.set_board(b.name);
      b.hb_req.set_run_id(a.run_id());
      b.hb_req.set_attempt_id(a.attempt_id());
      BuildReport(b, a);
    }
    running_now++;
    const auto run_for = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(a.duration_seconds() * opt.time_scale));
    timers.After(run_for, [this, &b, serial] { FinishRun(b, serial); });
    ScheduleHeartbeat(b, serial);
  }

  void ScheduleHeartbeat(Board& b, uint64_t serial) {
    timers.After(std::chrono::seconds(b.heartbeat_seconds), [this, &b, serial] {
      if (stopping) return;
      grpc::ClientContext* ctx;
      {
        std::lock_guard lock(b.mu);
        if (!b.running || b.run_serial != serial) return;
        b.hb_ctx_old = std::move(b.hb_ctx);
        b.hb_ctx = NewContext(b, std::chrono::seconds(10));
        b.hb_resp.Clear();
        ctx = b.hb_ctx.get();
      }
      const TimePoint started = Clock::now();
      inflight++;
      b.stub->async()->Heartbeat(ctx, &b.hb_req, &b.hb_resp,
                                 [this, &b, serial, started](grpc::Status s) {
                                   stats.Rpc("Heartbeat", s, Clock::now() - started, stopping);
                                   if (s.ok()) {
                                     stats.Heartbeat(b.hb_resp.cancel());
                                     std::lock_guard l(b.mu);
                                     if (b.hb_resp.cancel() && b.run_serial == serial) {
                                       b.cancel_run = true;
                                     }
                                   }
                                   ScheduleHeartbeat(b, serial);
                                   CallEnded();
                                 });
    });
  }

  // A result shaped like a real one: one sample per second of the measured interval, about
  // 60 counters (vmstat deltas, rusage, memcg events) and 30 environment entries. A board's
  // counters and environment keep their names from run to run: after its first result only
  // their values are drawn again, so a run starts in microseconds and the simulator's own
  // work does not crowd the controller it measures.
  void BuildReport(Board& b, const v1::Assignment& a) {
    v1::ReportResultRequest& r = b.report_req;
    const bool reuse = r.has_result() && r.result().counters_size() > 0;
    r.set_board(b.name);
    r.set_run_id(a.run_id());
    r.set_attempt_id(a.attempt_id());
    r.set_succeeded(true);
    r.clear_failure_reason();
    v1::WorkloadResult* w = r.mutable_result();
    w->set_benchmark(a.benchmark());
    w->clear_samples();
    std::normal_distribution<double> noise(1.0, 0.02);
    const double kernel_factor = a.kernel() == "patched" ? 1.05 : 1.0;
    uint64_t rounds = 0, pages = 0;
    for (uint32_t s = 1; s <= a.duration_seconds(); ++s) {
      auto* sample = w->add_samples();
      sample->set_second(s);
      const auto n = static_cast<uint64_t>(b.base_rounds * kernel_factor * noise(b.rng));
      sample->set_rounds(n);
      sample->set_pages(n * 4096);
      rounds += n;
      pages += n * 4096;
    }
    const double duration = a.duration_seconds();
    w->set_rounds(rounds);
    w->set_duration_seconds(duration);
    w->set_warmup_seconds(0);
    w->set_throughput_rounds_per_second(duration > 0 ? static_cast<double>(rounds) / duration : 0);
    w->set_pages(pages);
    w->set_pages_per_second(duration > 0 ? static_cast<double>(pages) / duration : 0);
    w->set_too_coarse(rounds < 5);
    w->mutable_params()->clear();
    for (const auto& [k, v] : a.params()) (*w->mutable_params())[k] = v;
    std::uniform_real_distribution<double> count(1e3, 1e7);
    auto& env = *w->mutable_environment();
    if (reuse) {
      for (auto& [name, value] : *w->mutable_counters()) value = std::floor(count(b.rng));
    } else {
      for (const char* name : kCounterNames) {
        (*w->mutable_counters())[name] = std::floor(count(b.rng));
      }
      SetBoardEnvironment(b, env);
    }
    env["kernel.label"] = a.kernel();
    env["memcg.memory.max"] = a.memcg().memory_max();
    env["memcg.memory.high"] = a.memcg().memory_high().empty() ? "max" : a.memcg().memory_high();
    env["memcg.memory.swap.max"] = a.memcg().swap_max().empty() ? "max" : a.memcg().swap_max();
  }

  // The names of a board's counters and environment, set before its first run.
  static void PrepareReport(Board& b) {
    v1::WorkloadResult* w = b.report_req.mutable_result();
    for (const char* name : kCounterNames) (*w->mutable_counters())[name] = 0;
    SetBoardEnvironment(b, *w->mutable_environment());
  }

  // What a result's environment says about its board (the same for every run).
  static void SetBoardEnvironment(const Board& b,
                                  google::protobuf::Map<std::string, std::string>& env) {
    env["kernel.release"] = "6.1.0-fleetsim";
    env["kernel_release"] = "6.1.0-fleetsim";
    env["cgroup.version"] = "2";
    env["vmstat.keys"] = "180";
    env["board"] = b.name;
    env["arch"] = b.facts.arch();
    env["cpu.model"] = b.facts.cpu_model();
    env["cpu.count"] = std::to_string(b.facts.cpu_count());
    env["page_size"] = std::to_string(b.facts.page_size());
    env["memory.total"] = std::to_string(b.facts.memory_bytes());
    env["thp.enabled"] = "madvise";
    env["thp.defrag"] = "madvise";
    env["swappiness"] = "60";
    env["zswap.enabled"] = "N";
    env["cpufreq.governor"] = "performance";
    env["virt.accel"] = "none";
    env["numa.nodes"] = "1";
    env["smt.active"] = "0";
    env["mitigations"] = "auto";
    env["workload.version"] = "fleetsim";
    env["agent.version"] = b.facts.agent_version();
    env["clocksource"] = "tsc";
    env["filesystem"] = "ext4";
    env["work_dir.free_bytes"] = "10737418240";
    env["swap.devices"] = "0";
    env["counters.one_sided"] = "";
  }

  void FinishRun(Board& b, uint64_t serial) {
    {
      std::lock_guard lock(b.mu);
      if (b.run_serial != serial || !b.running) return;
      if (b.cancel_run) {
        b.report_req.set_succeeded(false);
        b.report_req.set_failure_reason("cancelled");
        b.report_req.clear_result();
      }
    }
    Report(b);
  }

  void Report(Board& b) {
    if (stopping) {
      EndRun(b);
      return;
    }
    b.report_resp.Clear();
    auto* ctx = SwapContext(b, std::chrono::seconds(30));
    inflight++;
    b.stub->async()->ReportResult(ctx, &b.report_req, &b.report_resp,
                                  [this, &b](grpc::Status s) { OnReport(b, s); });
  }

  void OnReport(Board& b, const grpc::Status& s) {
    const TimePoint now = Clock::now();
    stats.Rpc("ReportResult", s, now - b.call_started, stopping);
    const bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
                       s.error_code() == grpc::StatusCode::INTERNAL;
    if (!s.ok() && retry && !stopping) {
      // As the agent does (RunExecutor::Deliver): until it is taken or refused, with
      // backoff (1 s doubling to 10 s) and jitter, so a busy controller ("come back later")
      // is not hit again by every board at once.
      const int failures = std::min(++b.report_failures, 5);
      const double jitter = std::uniform_real_distribution<double>(0.0, 0.5)(b.rng);
      const auto delay = std::chrono::milliseconds(
          static_cast<int64_t>(1000 * (std::min(10.0, std::ldexp(1.0, failures - 1)) + jitter)));
      timers.After(delay, [this, &b] { Report(b); });
    } else {
      b.report_failures = 0;
      if (s.ok() && b.report_req.succeeded()) {
        stats.Reported(b.report_req.run_id(), true,
                       static_cast<size_t>(b.report_req.result().samples_size()), now);
      } else if (!s.ok() && !stopping) {
        stats.Problem("run " + std::to_string(b.report_req.run_id()) + " on " + b.name +
                      ": result " + CodeName(s.error_code()) + ": " + s.error_message());
      }
      EndRun(b);
      Acquire(b);
    }
    CallEnded();
  }

  // Ends every parked call; chains see `stopping` and end. TryCancel runs outside the
  // board's lock: gRPC may call the callback (which takes it) from within.
  void CancelParked() {
    for (auto& b : boards) {
      std::shared_ptr<grpc::ClientContext> ctx;
      {
        std::lock_guard lock(b->mu);
        if (b->acquiring) ctx = b->ctx;
      }
      if (ctx) ctx->TryCancel();
    }
  }
};

v1::Board MakeFacts(const Options& opt, int index, const std::string& name) {
  static const char* kArches[] = {"x86_64", "aarch64", "riscv64"};
  static const char* kCpus[] = {"Simulated x86_64", "Simulated Cortex-A72", "Simulated U74"};
  v1::Board f;
  f.set_name(name);
  f.set_arch(kArches[index % 3]);
  f.set_cpu_model(kCpus[index % 3]);
  f.set_cpu_count(4);
  f.set_memory_bytes(8ull << 30);
  f.set_page_size(4096);
  f.set_cgroup_version(2);
  f.set_running_kernel_release("6.1.0-fleetsim");
  f.set_boot_id("fleetsim-" + name);
  f.set_agent_version("fleetsim");
  f.set_virt_accel("none");
  f.set_health(v1::BOARD_HEALTH_OK);
  (*f.mutable_labels())["site"] = "fleetsim";
  // both: every board runs every label on one release (as an A/A setup), so any board can
  // take any run; split: board i runs kernels[i % k] only.
  std::vector<std::string> labels;
  if (opt.kernel_mix == "split") {
    labels.push_back(opt.kernels[static_cast<size_t>(index) % opt.kernels.size()]);
  } else {
    labels = opt.kernels;
  }
  f.set_running_kernel_label(labels.front());
  for (const auto& label : labels) {
    auto* k = f.add_kernels();
    k->set_label(label);
    k->set_release("6.1.0-fleetsim");
    k->set_boot_method("none");
    f.add_running_kernel_labels(label);
  }
  (*f.mutable_labels())["flavor"] = labels.size() == 1 ? labels.front() : "vanilla+patched";
  return f;
}

// ---- simulated users ----

struct Users {
  Options opt;
  Fleet* fleet;
  std::string token;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::JobService::Stub> stub;
  TimePoint hard_deadline;
  std::atomic<bool> work_done{false};
  std::atomic<int> finished{0};  // user threads done
  std::mutex mu;
  std::set<grpc::ClientContext*> live;  // cancelled at the deadline
  std::vector<double> report_ms;
  std::vector<int64_t> job_ids;

  void Prepare(grpc::ClientContext* ctx) {
    const auto left = hard_deadline - Clock::now();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  }
  void Track(grpc::ClientContext* ctx, bool add) {
    std::lock_guard lock(mu);
    if (add) {
      live.insert(ctx);
    } else {
      live.erase(ctx);
    }
  }
  void CancelAll() {
    std::lock_guard lock(mu);
    for (auto* ctx : live) ctx->TryCancel();
  }

  // `runs` is a multiple of the number of kernels. A job has at most 1,000 repetitions: more
  // runs are spread over matrix cells (threads 1..c), rounded up to a multiple of cells x
  // kernels. Returns the spec; *planned is the number of runs it expands to.
  v1::JobSpec Spec(int user, int job, uint32_t runs, uint32_t* planned = nullptr) const {
    const auto k = static_cast<uint32_t>(opt.kernels.size());
    const uint32_t cells = (runs + k * 1000 - 1) / (k * 1000);
    const uint32_t repetitions = (runs + k * cells - 1) / (k * cells);
    if (planned != nullptr) *planned = cells * k * repetitions;
    v1::JobSpec spec;
    spec.set_name("fleetsim-u" + std::to_string(user) + "-j" + std::to_string(job));
    spec.set_benchmark("filemap-thrash");
    spec.set_duration(std::to_string(opt.run_seconds) + "s");
    spec.set_repetitions(repetitions);
    for (const auto& label : opt.kernels) spec.add_kernels(label);
    spec.mutable_memcg()->set_memory_max("128M");
    spec.mutable_memcg()->set_swap_max("0");
    (*spec.mutable_params())["file_size"] = "2M";
    if (cells > 1) {
      auto& threads = (*spec.mutable_matrix())["threads"];
      for (uint32_t c = 1; c <= cells; ++c) threads.add_values(std::to_string(c));
    } else {
      (*spec.mutable_params())["threads"] = "2";
    }
    spec.set_block_size(1);
    return spec;
  }

  // One user: submits its jobs, watches each to its end, reads its report and checks the
  // runs the controller recorded.
  void User(int user, const std::vector<uint32_t>& jobs) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (fleet->stopping) return;
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::SubmitJobRequest req;
      *req.mutable_spec() = Spec(user, static_cast<int>(j), jobs[j]);
      req.set_request_id("fleetsim-" + std::to_string(user) + "-" + std::to_string(j) + "-" +
                         std::to_string(std::random_device{}()));
      v1::SubmitJobResponse resp;
      JobSeen seen;
      seen.submit_started = Clock::now();
      grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
      seen.submit_returned = Clock::now();
      fleet->stats.Rpc("SubmitJob", s, seen.submit_returned - seen.submit_started, false);
      if (!s.ok()) {
        fleet->stats.Problem("SubmitJob: " + CodeName(s.error_code()) + ": " + s.error_message());
        continue;
      }
      seen.runs = resp.runs();
      fleet->stats.JobSubmitted(resp.job_id(), seen);
      {
        std::lock_guard lock(mu);
        job_ids.push_back(resp.job_id());
      }
      Watch(resp.job_id());
    }
  }

  void Watch(int64_t job_id) {
    v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
    grpc::Status s;
    // A stream cut by a controller that went away is opened again (the channel fails over
    // to the next controller when given several).
    for (int attempt = 0; attempt < 10; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      Track(&ctx, true);
      v1::WatchJobRequest req;
      req.set_job_id(job_id);
      const TimePoint started = Clock::now();
      auto reader = stub->WatchJob(&ctx, req);
      v1::JobProgress p;
      while (reader->Read(&p)) {
        fleet->stats.WatchEvent();
        last = p.state();
      }
      s = reader->Finish();
      Track(&ctx, false);
      fleet->stats.Rpc("WatchJob", s, Clock::now() - started, fleet->stopping);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE || fleet->stopping) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // as the CLI's retry
    }
    if (!s.ok()) {
      if (!fleet->stopping) {
        fleet->stats.Problem("WatchJob " + std::to_string(job_id) + ": " +
                             CodeName(s.error_code()) + ": " + s.error_message());
      }
      return;
    }
    fleet->stats.JobFinal(job_id, v1::JobState_Name(last));
    Read(job_id);
    Verify(job_id);
  }

  void Read(int64_t job_id) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GetReportRequest req;
    req.set_job_id(job_id);
    req.add_run_counters("vmstat.pgfault");
    req.add_run_counters("vmstat.pgmajfault");
    v1::GetReportResponse resp;
    const TimePoint started = Clock::now();
    grpc::Status s = stub->GetReport(&ctx, req, &resp);
    const auto took = Clock::now() - started;
    fleet->stats.Rpc("GetReport", s, took, fleet->stopping);
    if (s.ok()) {
      std::lock_guard lock(mu);
      report_ms.push_back(Ms(took));
    }
  }

  // The controller's record of the job: every run succeeded on its first attempt.
  void Verify(int64_t job_id) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    req.set_include_runs(true);
    v1::GetJobResponse resp;
    const TimePoint started = Clock::now();
    grpc::Status s = stub->GetJob(&ctx, req, &resp);
    fleet->stats.Rpc("GetJob", s, Clock::now() - started, fleet->stopping);
    if (!s.ok()) {
      fleet->stats.Problem("GetJob " + std::to_string(job_id) + ": " + s.error_message());
      return;
    }
    for (const auto& r : resp.runs()) {
      if (r.state() != v1::RUN_STATE_SUCCEEDED) {
        fleet->stats.Problem("run " + std::to_string(r.id()) + " ended " +
                             v1::RunState_Name(r.state()) + " " + r.failure_reason());
      } else if (r.attempt() != 1 && !opt.allow_retries) {
        fleet->stats.Problem("run " + std::to_string(r.id()) + " took " +
                             std::to_string(r.attempt()) + " attempts");
      }
    }
  }

  // A reader: lists jobs and reads the newest one's report, once a second, until the work
  // is done.
  void Reader() {
    while (!work_done && !fleet->stopping) {
      int64_t latest = 0;
      {
        std::lock_guard lock(mu);
        if (!job_ids.empty()) latest = job_ids.back();
      }
      {
        grpc::ClientContext ctx;
        Prepare(&ctx);
        v1::ListJobsRequest req;
        req.set_limit(20);
        v1::ListJobsResponse resp;
        const TimePoint started = Clock::now();
        grpc::Status s = stub->ListJobs(&ctx, req, &resp);
        fleet->stats.Rpc("ListJobs", s, Clock::now() - started, fleet->stopping);
      }
      if (latest > 0) Read(latest);
      std::unique_lock lock(fleet->mu);
      fleet->cv.wait_for(lock, std::chrono::seconds(1),
                         [&] { return work_done.load() || fleet->stopping.load(); });
    }
  }
};

// ---- mint: agent tokens for N boards (and one user token), written as the controller's
// `tokens create` writes them, in one go ----

int Mint(const std::string& database_url, int boards, const std::string& prefix,
         const std::string& out, const std::string& user_out) {
  using namespace faultline::controller;
  StoreOptions options;
  options.database_url = database_url;
  options.pool_size = 1;
  PgStore store(options);
  if (absl::Status s = store.Migrate(); !s.ok()) {
    std::cerr << "faultline-fleetsim: " << s.message() << "\n";
    return 1;
  }
  std::ofstream tokens(out);
  for (int i = 0; i < boards; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "%s-%05d", prefix.c_str(), i);
    const std::string token = NewToken();
    if (token.empty()) {
      std::cerr << "faultline-fleetsim: cannot read /dev/urandom\n";
      return 1;
    }
    absl::Status s = store.tokens().CreateToken(std::string("agent-") + name, TokenRole::kAgent,
                                                name, Sha256Hex(token));
    if (!s.ok()) {
      std::cerr << "faultline-fleetsim: " << s.message() << "\n";
      return 1;
    }
    tokens << name << " " << token << "\n";
  }
  if (!user_out.empty()) {
    const std::string token = NewToken();
    absl::Status s = store.tokens().CreateToken(prefix + "-user-" + std::to_string(::getpid()),
                                                TokenRole::kUser, "", Sha256Hex(token));
    if (!s.ok()) {
      std::cerr << "faultline-fleetsim: " << s.message() << "\n";
      return 1;
    }
    std::ofstream(user_out) << token << "\n";
  }
  return tokens.good() ? 0 : 1;
}

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
    user_token = Trimmed(ss.str());
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
