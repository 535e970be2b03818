// JobService's bisection calls: they translate, the orchestration decides.
#include "common/log.h"
#include "services/controller/api/services.h"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/bisection.h"

namespace faultline::controller {

grpc::ServerUnaryReactor* JobServiceImpl::StartBisection(grpc::CallbackServerContext* ctx,
                                                         const v1::StartBisectionRequest* req,
                                                         v1::Bisection* resp) {
  RpcTimer timer(metrics_, "StartBisection");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  if (req->request_id().size() > 128) {
    return FinishUnary(ctx, &timer,
                       grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "request_id: must be at most 128 characters"));
  }
  auto started = controller::StartBisection(stores_, req->request(), req->request_id());
  if (!started.ok()) {
    log::info("event=bisect_refused error=\"{}\"", std::string(started.status().message()));
    return FinishUnary(ctx, &timer, started.status());
  }
  *resp = *std::move(started);
  dispatcher_->WorkAvailable();
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetBisection(grpc::CallbackServerContext* ctx,
                                                       const v1::GetBisectionRequest* req,
                                                       v1::Bisection* resp) {
  RpcTimer timer(metrics_, "GetBisection");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto loaded = LoadBisection(stores_, req->id());
  if (!loaded.ok()) return FinishUnary(ctx, &timer, loaded.status());
  *resp = *std::move(loaded);
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListBisections(grpc::CallbackServerContext* ctx,
                                                         const v1::ListBisectionsRequest* req,
                                                         v1::ListBisectionsResponse* resp) {
  RpcTimer timer(metrics_, "ListBisections");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  if (req->limit() > 1000) {
    return FinishUnary(
        ctx, &timer,
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "limit: must be at most 1000"));
  }
  if (stores_.bisections == nullptr) return FinishUnary(ctx, &timer, grpc::Status::OK);
  auto listed = stores_.bisections->ListBisections(req->limit() == 0 ? 20 : req->limit(), false);
  if (!listed.ok()) return FinishUnary(ctx, &timer, listed.status());
  for (const auto& record : *listed) {
    auto loaded = LoadBisection(stores_, record.id);
    if (!loaded.ok()) return FinishUnary(ctx, &timer, loaded.status());
    *resp->add_bisections() = *std::move(loaded);
  }
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelBisection(grpc::CallbackServerContext* ctx,
                                                          const v1::CancelBisectionRequest* req,
                                                          v1::Bisection* resp) {
  RpcTimer timer(metrics_, "CancelBisection");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  auto cancelled = controller::CancelBisection(stores_, req->id());
  if (!cancelled.ok()) return FinishUnary(ctx, &timer, cancelled.status());
  if (cancelled->current_job() != 0) dispatcher_->JobChanged(cancelled->current_job());
  *resp = *std::move(cancelled);
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

}  // namespace faultline::controller
