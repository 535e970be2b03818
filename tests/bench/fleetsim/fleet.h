#pragma once
// faultline-fleetsim (tests/bench/fleetsim.cc): the simulated boards (one state machine each, on
// gRPC's callback API).
#include "tests/bench/fleetsim/support.h"

namespace faultline::fleetsim {

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
    env["memcg.memory.max"] = std::to_string(a.limits().memory_max());
    env["memcg.memory.high"] =
        a.limits().has_memory_high() ? std::to_string(a.limits().memory_high()) : "max";
    env["memcg.memory.swap.max"] =
        a.limits().has_swap_max() ? std::to_string(a.limits().swap_max()) : "max";
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

inline v1::Board MakeFacts(const Options& opt, int index, const std::string& name) {
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

}  // namespace faultline::fleetsim
