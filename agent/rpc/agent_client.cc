#include "agent/rpc/agent_client.h"

#include <random>
#include <thread>

#include "services/common/log.h"

namespace faultline::agent {
namespace {

std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

}  // namespace

AgentClient::AgentClient(AgentClientOptions options, std::shared_ptr<grpc::Channel> channel,
                         RunFunction run, SwitchFunction kernel_switch, HealthFunction health)
    : options_(std::move(options)),
      stub_(v1::AgentService::NewStub(channel)),
      run_(std::move(run)),
      switch_(std::move(kernel_switch)),
      health_(std::move(health)) {
  if (!options_.spool_dir.empty()) spool_ = std::make_unique<ResultSpool>(options_.spool_dir);
}

void AgentClient::Stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  stopping_flag_ = true;
  if (inflight_ != nullptr) inflight_->TryCancel();
  if (run_cancel_ != nullptr) run_cancel_->store(true);
  cv_.notify_all();
}

bool AgentClient::WaitFor(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [&] { return stopping_; });
  return !stopping_;
}

void AgentClient::Backoff(int failures) {
  // Exponential with full jitter, so a fleet does not reconnect in lock-step.
  static thread_local std::mt19937 rng{std::random_device{}()};
  auto cap = std::min<int64_t>(options_.max_backoff.count(),
                               options_.min_backoff.count() << std::min(failures, 10));
  std::uniform_int_distribution<int64_t> dist(options_.min_backoff.count() / 2, cap);
  WaitFor(std::chrono::milliseconds(dist(rng)));
}

void AgentClient::Authorize(grpc::ClientContext* ctx) const {
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
}

bool AgentClient::Hello() {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(10)));
  Authorize(&ctx);
  v1::HelloRequest req;
  *req.mutable_board() = options_.board;
  v1::HelloResponse resp;
  grpc::Status s = stub_->Hello(&ctx, req, &resp);
  if (!s.ok()) {
    log::warn("event=hello_failed code={} error=\"{}\"", static_cast<int>(s.error_code()),
              s.error_message());
    return false;
  }
  if (resp.heartbeat_interval_seconds() > 0) heartbeat_seconds_ = resp.heartbeat_interval_seconds();
  log::info("event=hello_ok board={} running_kernel={} health={}", options_.board.name(),
            options_.board.running_kernel_label(), options_.board.health());
  return true;
}

void AgentClient::RefreshHealth() {
  std::string reason = health_ ? health_() : "";
  options_.board.set_health(reason.empty() ? "ok" : "needs-check");
  options_.board.set_health_reason(reason);
}

bool AgentClient::AcquireOnce(v1::AcquireWorkResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(options_.acquire_wait_seconds + 15)));
  Authorize(&ctx);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    inflight_ = &ctx;
  }
  v1::AcquireWorkRequest req;
  req.set_board(options_.board.name());
  req.set_wait_seconds(options_.acquire_wait_seconds);
  grpc::Status s = stub_->AcquireWork(&ctx, req, resp);
  {
    std::lock_guard lock(mu_);
    inflight_ = nullptr;
  }
  if (!s.ok()) {
    log::warn("event=acquire_failed code={} error=\"{}\"", static_cast<int>(s.error_code()),
              s.error_message());
    return false;
  }
  return true;
}

int AgentClient::Serve() {
  int failures = 0;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return 0;
    }
    // Results of a previous life (or connection) first: a hello releases the board's runs,
    // after which their attempts' results would be refused.
    if (!FlushSpool()) {
      Backoff(++failures);
      continue;
    }
    RefreshHealth();
    if (!Hello()) {
      Backoff(++failures);
      continue;
    }
    failures = 0;
    if (options_.board.health() == "needs-check") {
      // No work until an operator clears the check on the board; stay visible meanwhile.
      log::warn("event=needs_check board={} reason=\"{}\"", options_.board.name(),
                options_.board.health_reason());
      WaitFor(std::chrono::seconds(heartbeat_seconds_));
      continue;
    }
    // Poll for work until the connection fails; then say hello again.
    while (true) {
      v1::AcquireWorkResponse resp;
      if (!AcquireOnce(&resp)) break;
      if (resp.has_assignment()) Execute(resp.assignment());
      if (resp.has_switch_kernel()) {
        log::info("event=kernel_switch_ordered board={} label={} reason=\"{}\"",
                  options_.board.name(), resp.switch_kernel().label(),
                  resp.switch_kernel().reason());
        std::string reason = switch_ ? switch_(resp.switch_kernel(), &stopping_flag_)
                                     : "this agent cannot switch kernels";
        if (!reason.empty()) log::error("event=kernel_switch_failed reason=\"{}\"", reason);
        break;  // stopping (the reboot), or hello again with needs-check
      }
    }
    RefreshHealth();
    if (options_.board.health() == "needs-check") continue;  // tell the controller at once
    Backoff(++failures);
  }
}

void AgentClient::HeartbeatLoop(const v1::Assignment& a, std::atomic<bool>* cancel,
                                std::atomic<bool>* done) {
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(heartbeat_seconds_),
                   [&] { return stopping_ || done->load(); });
      if (stopping_ || done->load()) return;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(In(std::chrono::seconds(10)));
    Authorize(&ctx);
    v1::HeartbeatRequest req;
    req.set_board(options_.board.name());
    req.set_run_id(a.run_id());
    req.set_attempt_id(a.attempt_id());
    v1::HeartbeatResponse resp;
    grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
    if (s.ok() && resp.cancel()) {
      log::info("event=run_cancel_requested run={}", a.run_id());
      cancel->store(true);
    } else if (!s.ok()) {
      log::warn("event=heartbeat_failed run={} error=\"{}\"", a.run_id(), s.error_message());
    }
  }
}

void AgentClient::Execute(const v1::Assignment& a) {
  log::info("event=run_started run={} job={} benchmark={} duration={}s", a.run_id(), a.job_id(),
            a.benchmark(), a.duration_seconds());
  std::atomic<bool> cancel{false};
  std::atomic<bool> done{false};
  {
    std::lock_guard lock(mu_);
    run_cancel_ = &cancel;
    if (stopping_) cancel = true;
  }
  std::thread heartbeat([&] { HeartbeatLoop(a, &cancel, &done); });
  RunReport report = run_(a, &cancel);
  done = true;
  {
    std::lock_guard lock(mu_);
    run_cancel_ = nullptr;
  }
  cv_.notify_all();
  heartbeat.join();

  v1::ReportResultRequest req;
  req.set_board(options_.board.name());
  req.set_run_id(a.run_id());
  req.set_attempt_id(a.attempt_id());
  req.set_succeeded(report.succeeded);
  req.set_failure_reason(report.failure_reason);
  *req.mutable_result() = std::move(report.result);
  std::string spooled;
  if (spool_) {
    auto name = spool_->Put(req);
    if (name.ok()) {
      spooled = *name;
    } else {
      log::error("event=spool_write_failed run={} error=\"{}\"", a.run_id(),
                 std::string(name.status().message()));
    }
  }
  // Logged once the result is on disk: from here on a crash loses nothing.
  log::info("event=run_finished run={} succeeded={} throughput={:.2f} reason=\"{}\"", a.run_id(),
            report.succeeded, req.result().throughput_rounds_per_second(), report.failure_reason);

  // Keep trying until the controller has it or refuses it; the controller's lease decides
  // how long an attempt stays valid.
  int failures = 0;
  while (!Report(req)) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;  // the spool keeps it for the next life
    }
    Backoff(++failures);
  }
  if (!spooled.empty()) {
    if (absl::Status s = spool_->Remove(spooled); !s.ok()) {
      log::warn("event=spool_remove_failed file={} error=\"{}\"", spooled, std::string(s.message()));
    }
  }
}

bool AgentClient::FlushSpool() {
  if (!spool_) return true;
  auto names = spool_->List();
  if (!names.ok()) {
    log::error("event=spool_unreadable error=\"{}\"", std::string(names.status().message()));
    return true;  // nothing we can send; do not stop serving
  }
  for (const auto& name : *names) {
    auto req = spool_->Load(name);
    if (!req.ok()) {
      log::error("event=spool_entry_unreadable file={} error=\"{}\"", name,
                 std::string(req.status().message()));
      continue;
    }
    if (!Report(*req)) return false;
    log::info("event=spooled_result_sent run={} attempt_id={}", req->run_id(), req->attempt_id());
    if (absl::Status s = spool_->Remove(name); !s.ok()) {
      log::warn("event=spool_remove_failed file={} error=\"{}\"", name, std::string(s.message()));
    }
  }
  return true;
}

bool AgentClient::Report(const v1::ReportResultRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(30)));
  Authorize(&ctx);
  v1::ReportResultResponse resp;
  grpc::Status s = stub_->ReportResult(&ctx, req, &resp);
  if (s.ok()) return true;
  switch (s.error_code()) {
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
      log::warn("event=result_refused run={} error=\"{}\"", req.run_id(), s.error_message());
      return true;  // final: the controller will never take it
    default:
      log::warn("event=report_failed run={} error=\"{}\"", req.run_id(), s.error_message());
      return false;
  }
}

}  // namespace faultline::agent
