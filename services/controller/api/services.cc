#include "services/controller/api/services.h"

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"
#include "services/controller/convert/convert.h"
#include "services/controller/core/cron.h"
#include "services/controller/core/report.h"
#include "services/controller/core/validation.h"
#include "services/controller/orchestration/report_builder.h"
#include "services/controller/orchestration/report_message.h"
#include "services/controller/orchestration/submission.h"

namespace faultline::controller {
namespace {

grpc::Status Invalid(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

constexpr size_t kMaxNameLength = 128;

}  // namespace

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx, RpcTimer* timer,
                                      const grpc::Status& status) {
  timer->Finish(status.error_code());
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx, RpcTimer* timer,
                                      const absl::Status& status) {
  return FinishUnary(ctx, timer, ToGrpc(status));
}

// ---- JobService ----

v1::JobSpec JobServiceImpl::AsTrusted(const v1::JobSpec& spec) const {
  v1::JobSpec out = spec;
  if (untrusted_users_) {
    for (auto& [label, source] : *out.mutable_kernel_sources()) source.set_untrusted(true);
  }
  return out;
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  RpcTimer timer(metrics_, "SubmitJob");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  if (req->request_id().size() > kMaxNameLength) {
    return FinishUnary(
        ctx, &timer,
        Invalid(absl::StrCat("request_id: must be at most ", kMaxNameLength, " characters")));
  }
  auto submitted =
      SubmitSpec(stores_.boards, stores_.jobs, AsTrusted(req->spec()), req->request_id());
  if (!submitted.ok()) {
    log::info("event=job_refused error=\"{}\"", std::string(submitted.status().message()));
    return FinishUnary(ctx, &timer, submitted.status());
  }
  resp->set_job_id(submitted->created.job_id);
  resp->set_runs(static_cast<uint32_t>(submitted->runs));
  log::info("event=job_submitted job={} benchmark={} runs={} new={}", submitted->created.job_id,
            submitted->benchmark, submitted->runs, submitted->created.created);
  dispatcher_->WorkAvailable();
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* ctx,
                                                 const v1::GetJobRequest* req,
                                                 v1::GetJobResponse* resp) {
  RpcTimer timer(metrics_, "GetJob");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto job = stores_.jobs->GetJob(req->job_id());
  if (!job.ok()) return FinishUnary(ctx, &timer, job.status());
  JobToProto(*job, resp->mutable_job());
  if (req->include_runs()) {
    auto runs = stores_.jobs->ListRuns(req->job_id());
    if (!runs.ok()) return FinishUnary(ctx, &timer, runs.status());
    for (const auto& r : *runs) RunToProto(r, resp->add_runs());
  }
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                   const v1::ListJobsRequest* req,
                                                   v1::ListJobsResponse* resp) {
  RpcTimer timer(metrics_, "ListJobs");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  if (req->limit() > 1000) return FinishUnary(ctx, &timer, Invalid("limit: must be at most 1000"));
  int limit = req->limit() == 0 ? 50 : static_cast<int>(req->limit());
  auto jobs = stores_.jobs->ListJobs(limit);
  if (!jobs.ok()) return FinishUnary(ctx, &timer, jobs.status());
  for (const auto& j : *jobs) JobToProto(j, resp->add_jobs());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                    const v1::CancelJobRequest* req,
                                                    v1::CancelJobResponse* resp) {
  RpcTimer timer(metrics_, "CancelJob");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto job = stores_.jobs->CancelJob(req->job_id());
  if (!job.ok()) return FinishUnary(ctx, &timer, job.status());
  JobToProto(*job, resp->mutable_job());
  log::info("event=job_cancelled job={}", req->job_id());
  dispatcher_->JobChanged(req->job_id());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::JobProgress>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* ctx, const v1::WatchJobRequest* req) {
  auto* reactor = new WatchReactor(dispatcher_, req->job_id());
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) {
    reactor->FinishWith(denied);
    return reactor;
  }
  auto job = stores_.jobs->GetJob(req->job_id());
  if (!job.ok()) {
    // Not registered with the dispatcher: OnDone's RemoveWatcher is a no-op.
    reactor->FinishWith(ToGrpc(job.status()));
    return reactor;
  }
  dispatcher_->AddWatcher(reactor);
  reactor->Push(ProgressFromJob(*job));
  return reactor;
}

grpc::ServerUnaryReactor* JobServiceImpl::GetReport(grpc::CallbackServerContext* ctx,
                                                    const v1::GetReportRequest* req,
                                                    v1::GetReportResponse* resp) {
  RpcTimer timer(metrics_, "GetReport");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto response = ReportResponse(stores_.jobs, stores_.builds, *req);
  if (!response.ok()) return FinishUnary(ctx, &timer, response.status());
  *resp = *std::move(response);
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListAgents(grpc::CallbackServerContext* ctx,
                                                     const v1::ListAgentsRequest*,
                                                     v1::ListAgentsResponse* resp) {
  RpcTimer timer(metrics_, "ListAgents");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto boards = stores_.boards->ListBoards();
  if (!boards.ok()) return FinishUnary(ctx, &timer, boards.status());
  for (const auto& b : *boards) BoardToProto(b, resp->add_boards());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::CreateSchedule(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateScheduleRequest* req,
                                                         v1::Schedule* resp) {
  RpcTimer timer(metrics_, "CreateSchedule");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  if (req->name().empty() || req->name().size() > kMaxNameLength) {
    return FinishUnary(ctx, &timer,
                       Invalid(absl::StrCat("name: must be 1..", kMaxNameLength, " characters")));
  }
  auto cron = CronSchedule::Parse(req->cron());
  if (!cron.ok()) return FinishUnary(ctx, &timer, Invalid(std::string(cron.status().message())));
  // The spec must be valid now, as a job would be (kernels it brings included); a later
  // slot that no longer fits the fleet records why.
  const v1::JobSpec spec = AsTrusted(req->spec());
  if (auto v = PrepareSpec(stores_.boards, spec, ""); !v.ok()) {
    return FinishUnary(ctx, &timer, v.status());
  }
  const int64_t next_ms = NextSlotMs(req->cron(), clock_->Now());
  auto created =
      stores_.schedules->CreateSchedule(req->name(), req->cron(), SpecToJson(spec), next_ms);
  if (!created.ok()) return FinishUnary(ctx, &timer, created.status());
  ScheduleToProto(*created, resp);
  log::info("event=schedule_created id={} name={} cron=\"{}\"", created->id, req->name(),
            req->cron());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListSchedules(grpc::CallbackServerContext* ctx,
                                                        const v1::ListSchedulesRequest*,
                                                        v1::ListSchedulesResponse* resp) {
  RpcTimer timer(metrics_, "ListSchedules");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto schedules = stores_.schedules->ListSchedules();
  if (!schedules.ok()) return FinishUnary(ctx, &timer, schedules.status());
  for (const auto& s : *schedules) ScheduleToProto(s, resp->add_schedules());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::DeleteSchedule(grpc::CallbackServerContext* ctx,
                                                         const v1::DeleteScheduleRequest* req,
                                                         v1::DeleteScheduleResponse*) {
  RpcTimer timer(metrics_, "DeleteSchedule");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  return FinishUnary(ctx, &timer, stores_.schedules->DeleteSchedule(req->id()));
}

grpc::ServerUnaryReactor* JobServiceImpl::ListChangePoints(grpc::CallbackServerContext* ctx,
                                                           const v1::ListChangePointsRequest* req,
                                                           v1::ListChangePointsResponse* resp) {
  RpcTimer timer(metrics_, "ListChangePoints");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto points = stores_.history->ListChangePoints(req->include_closed());
  if (!points.ok()) return FinishUnary(ctx, &timer, points.status());
  for (const auto& c : *points) ChangePointToProto(c, resp->add_change_points());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::SetChangePointState(
    grpc::CallbackServerContext* ctx, const v1::SetChangePointStateRequest* req,
    v1::ChangePoint* resp) {
  RpcTimer timer(metrics_, "SetChangePointState");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  const auto state = FromProto(req->state());
  if (!state) {
    return FinishUnary(
        ctx, &timer,
        Invalid(absl::StrCat("state: must be one of open, acknowledged, fixed, invalid, got ",
                             static_cast<int>(req->state()))));
  }
  auto updated = stores_.history->SetChangePointState(req->id(), *state);
  if (!updated.ok()) return FinishUnary(ctx, &timer, updated.status());
  ChangePointToProto(*updated, resp);
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

// ---- AgentService ----

namespace {

// A handler pool that is full: the agent comes back after its backoff.
grpc::Status BusyStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "controller busy: too many calls wait for the database; retry later");
}

// Runs `task` on `pool` (inline without one). A full pool refuses the call at once: it ends
// UNAVAILABLE, counted in the RPC metrics, and `task` never runs.
void RefuseBusy(RpcTimer& timer, grpc::ServerUnaryReactor* reactor) {
  timer.Finish(BusyStatus().error_code());
  reactor->Finish(BusyStatus());
}

void RunOrRefuse(HandlerPool* pool, std::function<void()> task, RpcTimer& timer,
                 grpc::ServerUnaryReactor* reactor) {
  if (pool == nullptr) {
    task();
  } else if (!pool->Submit(std::move(task))) {
    RefuseBusy(timer, reactor);
  }
}

}  // namespace

grpc::ServerUnaryReactor* AgentServiceImpl::Offload(grpc::CallbackServerContext* ctx,
                                                    HandlerPool* pool, const char* method,
                                                    std::function<grpc::Status()> body) {
  auto* reactor = ctx->DefaultReactor();
  RpcTimer timer(metrics_, method);  // from arrival: time waiting in the pool counts
  auto run = [reactor, timer, body = std::move(body)]() mutable {
    const grpc::Status status = body();
    timer.Finish(status.error_code());
    reactor->Finish(status);
  };
  RunOrRefuse(pool, std::move(run), timer, reactor);
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::Hello(grpc::CallbackServerContext* ctx,
                                                  const v1::HelloRequest* req,
                                                  v1::HelloResponse* resp) {
  return Offload(ctx, board_pool_, "Hello",
                 [this, ctx, req, resp] { return DoHello(ctx, req, resp); });
}

grpc::Status AgentServiceImpl::DoHello(grpc::CallbackServerContext* ctx,
                                       const v1::HelloRequest* req, v1::HelloResponse* resp) {
  if (auto denied = auth_->RequireAgent(ctx, req->board().name()); !denied.ok()) return denied;
  const v1::Board& board = req->board();
  if (board.name().empty() || board.name().size() > kMaxNameLength) {
    return Invalid(absl::StrCat("board.name: must be 1..", kMaxNameLength, " characters"));
  }
  if (board.arch().empty()) return Invalid("board.arch: is required");
  if (board.memory_bytes() == 0) return Invalid("board.memory_bytes: must be positive");
  if (board.kernels_size() == 0) {
    return Invalid("board.kernels: at least one bootable kernel is required");
  }
  if (board.health_reason().size() > 4096) {
    return Invalid("board.health_reason: at most 4096 characters");
  }
  if (board.previous_boot_log().size() > 8192) {
    return Invalid("board.previous_boot_log: at most 8192 bytes");
  }
  auto health = stores_.boards->UpsertBoard(BoardFromProto(board));
  if (!health.ok()) return ToGrpc(health.status());
  if (health->health != BoardHealth::kOk) {
    log::error("event=board_needs_check board={} reason=\"{}\"", board.name(), health->reason);
  }
  if (health->switch_not_begun) {
    log::warn(
        "event=kernel_switch_not_begun board={} boot_id={} note=\"the agent restarted before "
        "the switch's boot commands ran; it will be ordered again\"",
        board.name(), board.boot_id());
  }
  // A hello means the agent (re)started: whatever it was running is gone.
  auto released = stores_.boards->ReleaseBoardRuns(board.name());
  if (!released.ok()) return ToGrpc(released.status());
  log::info("event=agent_hello board={} arch={} kernel={} boot_id={} health={} released_runs={}",
            board.name(), board.arch(), board.running_kernel_label(), board.boot_id(),
            ToString(health->health), *released);
  resp->set_heartbeat_interval_seconds(kHeartbeatIntervalSeconds);
  dispatcher_->WorkAvailable();
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AgentServiceImpl::AcquireWork(grpc::CallbackServerContext* ctx,
                                                        const v1::AcquireWorkRequest* req,
                                                        v1::AcquireWorkResponse* resp) {
  auto wait = std::min<std::chrono::seconds>(std::chrono::seconds(req->wait_seconds()),
                                             Dispatcher::kMaxWait);
  auto* reactor = new AcquireReactor(dispatcher_, req->board(), resp, clock_->Now() + wait);
  // The token check and the board's touch wait for PostgreSQL: on the board pool, like
  // Hello and Heartbeat (a reconnect storm of parked boards must not hold gRPC's threads).
  // A refused call counts in the RPC metrics; a parked one does not (its time is waiting).
  RpcTimer timer(metrics_, "AcquireWork");
  auto check_and_park = [this, ctx, req, reactor, timer]() mutable {
    grpc::Status checked = auth_->RequireAgent(ctx, req->board());
    if (checked.ok() && req->board().empty()) checked = Invalid("board: is required");
    if (checked.ok()) checked = ToGrpc(stores_.boards->TouchBoard(req->board()));
    if (!checked.ok()) timer.Finish(checked.error_code());
    reactor->ParkUnless(checked);
  };
  RunOrRefuse(board_pool_, std::move(check_and_park), timer, reactor);
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                      const v1::HeartbeatRequest* req,
                                                      v1::HeartbeatResponse* resp) {
  return Offload(ctx, board_pool_, "Heartbeat",
                 [this, ctx, req, resp] { return DoHeartbeat(ctx, req, resp); });
}

grpc::Status AgentServiceImpl::DoHeartbeat(grpc::CallbackServerContext* ctx,
                                           const v1::HeartbeatRequest* req,
                                           v1::HeartbeatResponse* resp) {
  if (auto denied = auth_->RequireAgent(ctx, req->board()); !denied.ok()) return denied;
  if (req->run_id() == 0) return ToGrpc(stores_.boards->TouchBoard(req->board()));
  auto current = stores_.work->RenewLease(req->board(), req->run_id(), req->attempt_id());
  if (!current.ok()) return ToGrpc(current.status());
  resp->set_cancel(!*current);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportResult(grpc::CallbackServerContext* ctx,
                                                         const v1::ReportResultRequest* req,
                                                         v1::ReportResultResponse*) {
  auto* reactor = ctx->DefaultReactor();
  PendingResult call{ctx, req, reactor, RpcTimer(metrics_, "ReportResult")};
  if (result_pool_ == nullptr) {
    std::vector<PendingResult> one{std::move(call)};
    StoreReported(one);
  } else if (!result_pool_->Submit(call)) {
    RefuseBusy(call.timer, reactor);
  }
  return reactor;
}

grpc::Status AgentServiceImpl::CheckReport(grpc::CallbackServerContext* ctx,
                                           const v1::ReportResultRequest* req) {
  if (auto denied = auth_->RequireAgent(ctx, req->board()); !denied.ok()) return denied;
  if (req->run_id() <= 0) return Invalid("run_id: must be positive");
  if (req->attempt_id().empty()) return Invalid("attempt_id: is required");
  if (req->result().samples_size() > 4 * 3600 + 60) {
    return Invalid("result.samples: at most one per second of a 4h run");
  }
  return grpc::Status::OK;
}

void AgentServiceImpl::StoreReported(std::vector<PendingResult>& batch) {
  std::vector<PendingResult*> checked;
  std::vector<ResultUpload> uploads;
  for (PendingResult& call : batch) {
    if (grpc::Status bad = CheckReport(call.ctx, call.req); !bad.ok()) {
      call.timer.Finish(bad.error_code());
      call.reactor->Finish(bad);
      continue;
    }
    checked.push_back(&call);
    uploads.push_back(ResultUpload{.board = call.req->board(),
                                   .run_id = call.req->run_id(),
                                   .attempt_id = call.req->attempt_id(),
                                   .succeeded = call.req->succeeded(),
                                   .failure_reason = call.req->failure_reason(),
                                   .result = ResultFromProto(call.req->result())});
  }
  if (uploads.empty()) return;
  const std::vector<absl::StatusOr<int64_t>> answers = stores_.work->StoreResults(uploads);
  uploads.clear();  // the samples: not kept while the calls finish
  std::set<int64_t> changed;
  for (size_t i = 0; i < checked.size(); ++i) {
    const absl::StatusOr<int64_t> answer =
        i < answers.size() ? answers[i] : absl::InternalError("no answer from the store");
    if (answer.ok()) changed.insert(*answer);
    const grpc::Status status = AfterStore(*checked[i]->req, answer);
    checked[i]->timer.Finish(status.error_code());
    checked[i]->reactor->Finish(status);
  }
  for (int64_t job : changed) dispatcher_->JobChanged(job);
  if (!changed.empty()) dispatcher_->WorkAvailable();
}

grpc::Status AgentServiceImpl::AfterStore(const v1::ReportResultRequest& req,
                                          const absl::StatusOr<int64_t>& job_id) {
  if (!job_id.ok()) {
    log::warn("event=result_refused run={} board={} error=\"{}\"", req.run_id(), req.board(),
              std::string(job_id.status().message()));
    return ToGrpc(job_id.status());
  }
  if (metrics_ != nullptr) {
    // A killed workload printed nothing: take the benchmark from the job.
    std::string benchmark = req.result().benchmark();
    if (benchmark.empty()) {
      auto job = stores_.jobs->GetJob(*job_id);
      benchmark = job.ok() ? job->benchmark : "unknown";
    }
    metrics_->ObserveRunFinished(benchmark, req.succeeded(),
                                 req.result().duration_seconds() + req.result().warmup_seconds());
  }
  log::info("event=result_stored run={} board={} succeeded={} throughput={:.2f}", req.run_id(),
            req.board(), req.succeeded(), req.result().throughput_rounds_per_second());
  return grpc::Status::OK;
}

}  // namespace faultline::controller
