#include "agent/rpc/agent_client.h"

#include "common/log.h"

namespace faultline::agent {
namespace {

std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

}  // namespace

AgentClient::AgentClient(AgentClientOptions options, std::shared_ptr<grpc::Channel> channel,
                         Clock& clock)
    : options_(std::move(options)), stub_(v1::AgentService::NewStub(channel)), clock_(clock) {}

void AgentClient::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (inflight_ != nullptr) inflight_->TryCancel();
  }
  clock_.Wake();
}

bool AgentClient::WaitFor(std::chrono::milliseconds d) {
  return !clock_.WaitFor(d, [&] { return stopping_.load(); });
}

void AgentClient::Backoff(int failures) {
  WaitFor(BackoffDelay(failures, options_.min_backoff, options_.max_backoff));
}

std::chrono::seconds AgentClient::heartbeat_interval() const {
  return std::chrono::seconds(heartbeat_seconds_.load());
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
            options_.board.running_kernel_label(),
            options_.board.health() == v1::BOARD_HEALTH_NEEDS_CHECK ? "needs-check" : "ok");
  return true;
}

void AgentClient::RefreshHealth(const WorkHandlers& handlers) {
  std::string reason = handlers.health ? handlers.health() : "";
  options_.board.set_health(reason.empty() ? v1::BOARD_HEALTH_OK : v1::BOARD_HEALTH_NEEDS_CHECK);
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

int AgentClient::Serve(const WorkHandlers& handlers) {
  int failures = 0;
  while (true) {
    if (stopping_) return 0;
    // Results of a previous life (or connection) first: a hello releases the board's runs,
    // after which their attempts' results would be refused.
    if (!FlushSpool()) {
      Backoff(++failures);
      continue;
    }
    RefreshHealth(handlers);
    if (!Hello()) {
      Backoff(++failures);
      continue;
    }
    failures = 0;
    if (options_.board.health() == v1::BOARD_HEALTH_NEEDS_CHECK) {
      // No work until an operator clears the check on the board; stay visible meanwhile.
      log::warn("event=needs_check board={} reason=\"{}\"", options_.board.name(),
                options_.board.health_reason());
      WaitFor(heartbeat_interval());
      continue;
    }
    // Poll for work until the connection fails; then say hello again.
    while (true) {
      v1::AcquireWorkResponse resp;
      if (!AcquireOnce(&resp)) break;
      if (resp.has_assignment()) handlers.run(resp.assignment(), stopping_);
      if (resp.has_switch_kernel()) {
        log::info("event=kernel_switch_ordered board={} label={} reason=\"{}\"",
                  options_.board.name(), resp.switch_kernel().label(),
                  resp.switch_kernel().reason());
        std::string reason = handlers.kernel_switch
                                 ? handlers.kernel_switch(resp.switch_kernel(), stopping_)
                                 : "this agent cannot switch kernels";
        if (!reason.empty()) log::error("event=kernel_switch_failed reason=\"{}\"", reason);
        break;  // stopping (the reboot), or hello again with needs-check
      }
    }
    RefreshHealth(handlers);
    if (options_.board.health() == v1::BOARD_HEALTH_NEEDS_CHECK)
      continue;  // tell the controller at once
    Backoff(++failures);
  }
}

LeaseStatus AgentClient::Heartbeat(const v1::HeartbeatRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(10)));
  Authorize(&ctx);
  v1::HeartbeatResponse resp;
  grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
  if (!s.ok()) {
    log::warn("event=heartbeat_failed run={} error=\"{}\"", req.run_id(), s.error_message());
    return LeaseStatus::kUnreachable;
  }
  return resp.cancel() ? LeaseStatus::kLost : LeaseStatus::kRenewed;
}

bool AgentClient::FlushSpool() {
  ResultSpool* spool = options_.spool;
  if (spool == nullptr) return true;
  auto names = spool->List();
  if (!names.ok()) {
    log::error("event=spool_unreadable error=\"{}\"", std::string(names.status().message()));
    return true;  // nothing we can send; do not stop serving
  }
  for (const auto& name : *names) {
    auto req = spool->Load(name);
    if (!req.ok()) {
      log::error("event=spool_entry_unreadable file={} error=\"{}\"", name,
                 std::string(req.status().message()));
      continue;
    }
    if (Report(*req) == Delivery::kFailed) return false;
    log::info("event=spooled_result_sent run={} attempt_id={}", req->run_id(), req->attempt_id());
    if (absl::Status s = spool->Remove(name); !s.ok()) {
      log::warn("event=spool_remove_failed file={} error=\"{}\"", name, std::string(s.message()));
    }
  }
  return true;
}

Delivery AgentClient::Report(const v1::ReportResultRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(30)));
  Authorize(&ctx);
  v1::ReportResultResponse resp;
  grpc::Status s = stub_->ReportResult(&ctx, req, &resp);
  if (s.ok()) return Delivery::kAccepted;
  switch (s.error_code()) {
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
      log::warn("event=result_refused run={} error=\"{}\"", req.run_id(), s.error_message());
      return Delivery::kRefused;  // final: the controller will never take it
    default:
      log::warn("event=report_failed run={} error=\"{}\"", req.run_id(), s.error_message());
      return Delivery::kFailed;
  }
}

}  // namespace faultline::agent
