#pragma once
// gRPC services: they only translate between protobuf and the core/storage, and map
// statuses. Callback API: no handler blocks a thread while an agent or a watcher waits.
#include <functional>

#include "common/s3.h"
#include "faultline/v1/agent.grpc.pb.h"
#include "faultline/v1/job.grpc.pb.h"
#include "services/controller/api/auth.h"
#include "services/controller/api/handler_pool.h"
#include "services/controller/core/clock.h"
#include "services/controller/http/metrics.h"
#include "services/controller/orchestration/dispatcher.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// A ReportResult call waiting for its transaction (AgentServiceImpl::StoreReported).
struct PendingResult {
  grpc::CallbackServerContext* ctx;
  const v1::ReportResultRequest* req;
  grpc::ServerUnaryReactor* reactor;
  RpcTimer timer;
};
// ReportResult's threads: the results that queued up meanwhile go into one transaction.
using ResultPool = BatchPool<PendingResult>;

// Ends a unary call: the timer records its code, the call's default reactor finishes it.
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx, RpcTimer* timer,
                                      const grpc::Status& status);
grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* ctx, RpcTimer* timer,
                                      const absl::Status& status);

class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  JobServiceImpl(const Stores& stores, Dispatcher* dispatcher, ControllerMetrics* metrics = nullptr,
                 Authorizer* auth = nullptr, const Clock* clock = SystemClock::Get())
      : stores_(stores),
        dispatcher_(dispatcher),
        metrics_(metrics),
        auth_(auth ? auth : &open_),
        clock_(clock) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitJobRequest* req,
                                      v1::SubmitJobResponse* resp) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const v1::GetJobRequest* req,
                                   v1::GetJobResponse* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const v1::ListJobsRequest* req,
                                     v1::ListJobsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const v1::CancelJobRequest* req,
                                      v1::CancelJobResponse* resp) override;
  grpc::ServerWriteReactor<v1::JobProgress>* WatchJob(grpc::CallbackServerContext* ctx,
                                                      const v1::WatchJobRequest* req) override;
  grpc::ServerUnaryReactor* GetReport(grpc::CallbackServerContext* ctx,
                                      const v1::GetReportRequest* req,
                                      v1::GetReportResponse* resp) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const v1::ListAgentsRequest* req,
                                       v1::ListAgentsResponse* resp) override;
  grpc::ServerUnaryReactor* CreateSchedule(grpc::CallbackServerContext* ctx,
                                           const v1::CreateScheduleRequest* req,
                                           v1::Schedule* resp) override;
  grpc::ServerUnaryReactor* ListSchedules(grpc::CallbackServerContext* ctx,
                                          const v1::ListSchedulesRequest* req,
                                          v1::ListSchedulesResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteSchedule(grpc::CallbackServerContext* ctx,
                                           const v1::DeleteScheduleRequest* req,
                                           v1::DeleteScheduleResponse* resp) override;
  grpc::ServerUnaryReactor* ListChangePoints(grpc::CallbackServerContext* ctx,
                                             const v1::ListChangePointsRequest* req,
                                             v1::ListChangePointsResponse* resp) override;
  grpc::ServerUnaryReactor* SetChangePointState(grpc::CallbackServerContext* ctx,
                                                const v1::SetChangePointStateRequest* req,
                                                v1::ChangePoint* resp) override;
  grpc::ServerUnaryReactor* ListBuilds(grpc::CallbackServerContext* ctx,
                                       const v1::ListBuildsRequest* req,
                                       v1::ListBuildsResponse* resp) override;
  // Bisections (api/bisect_services.cc).
  grpc::ServerUnaryReactor* StartBisection(grpc::CallbackServerContext* ctx,
                                           const v1::StartBisectionRequest* req,
                                           v1::Bisection* resp) override;
  grpc::ServerUnaryReactor* GetBisection(grpc::CallbackServerContext* ctx,
                                         const v1::GetBisectionRequest* req,
                                         v1::Bisection* resp) override;
  grpc::ServerUnaryReactor* ListBisections(grpc::CallbackServerContext* ctx,
                                           const v1::ListBisectionsRequest* req,
                                           v1::ListBisectionsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelBisection(grpc::CallbackServerContext* ctx,
                                            const v1::CancelBisectionRequest* req,
                                            v1::Bisection* resp) override;

  // Every kernel a user's job or schedule brings is a stranger's (KernelSource.untrusted):
  // the operator's choice (--untrusted-users); otherwise a spec marks its own.
  void SetUntrustedUsers(bool untrusted) { untrusted_users_ = untrusted; }

 private:
  // The spec as submitted, its kernels marked untrusted when the operator says so.
  v1::JobSpec AsTrusted(const v1::JobSpec& spec) const;

  bool untrusted_users_ = false;
  Stores stores_;
  Dispatcher* dispatcher_;
  ControllerMetrics* metrics_;
  Authorizer open_{nullptr, false};  // without an authorizer: no checks
  Authorizer* auth_;
  const Clock* clock_;
};

class AgentServiceImpl final : public v1::AgentService::CallbackService {
 public:
  AgentServiceImpl(const Stores& stores, Dispatcher* dispatcher,
                   ControllerMetrics* metrics = nullptr, Authorizer* auth = nullptr,
                   const Clock* clock = SystemClock::Get())
      : stores_(stores),
        dispatcher_(dispatcher),
        metrics_(metrics),
        auth_(auth ? auth : &open_),
        clock_(clock) {}

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* ctx, const v1::HelloRequest* req,
                                  v1::HelloResponse* resp) override;
  grpc::ServerUnaryReactor* AcquireWork(grpc::CallbackServerContext* ctx,
                                        const v1::AcquireWorkRequest* req,
                                        v1::AcquireWorkResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* ReportResult(grpc::CallbackServerContext* ctx,
                                         const v1::ReportResultRequest* req,
                                         v1::ReportResultResponse* resp) override;

  // Builders (agent.yaml builder:): claims under a lease renewed by BuildHeartbeat, the
  // image uploaded (verified against its sha256) before FinishBuild; boards fetch images
  // with FetchArtifact, from any offset.
  grpc::ServerUnaryReactor* AcquireBuild(grpc::CallbackServerContext* ctx,
                                         const v1::AcquireBuildRequest* req,
                                         v1::AcquireBuildResponse* resp) override;
  grpc::ServerUnaryReactor* BuildHeartbeat(grpc::CallbackServerContext* ctx,
                                           const v1::BuildHeartbeatRequest* req,
                                           v1::BuildHeartbeatResponse* resp) override;
  grpc::ServerReadReactor<v1::ArtifactChunk>* UploadArtifact(
      grpc::CallbackServerContext* ctx, v1::UploadArtifactResponse* resp) override;
  grpc::ServerUnaryReactor* FinishBuild(grpc::CallbackServerContext* ctx,
                                        const v1::FinishBuildRequest* req,
                                        v1::FinishBuildResponse* resp) override;
  grpc::ServerWriteReactor<v1::ArtifactChunk>* FetchArtifact(
      grpc::CallbackServerContext* ctx, const v1::FetchArtifactRequest* req) override;

  static constexpr uint32_t kHeartbeatIntervalSeconds = 10;
  void SetBuildLeaseSeconds(uint32_t seconds) { build_lease_seconds_ = seconds; }
  // Uploaded images go to this object store instead of the database (null: the database).
  void SetArtifactStore(const s3::Client* store) { artifact_store_ = store; }
  static constexpr uint64_t kMaxArtifactBytes = 512ull << 20;

  // Hello, Heartbeat and AcquireWork (its checks, before it parks) do their database work
  // on `boards`, ReportResult on `results` (not on gRPC's callback threads; a burst of
  // results does not hold heartbeats back); a full pool answers UNAVAILABLE at once.
  // `results` must hand its batches to StoreReported. Without pools (tests): inline.
  void SetHandlerPools(HandlerPool* boards, ResultPool* results) {
    board_pool_ = boards;
    result_pool_ = results;
  }
  // Checks each waiting ReportResult call, stores the valid ones together
  // (WorkStore::StoreResults) and finishes every call.
  void StoreReported(std::vector<PendingResult>& batch);

 private:
  // Runs `body` on `pool` (or inline when it is null) and finishes the call with its status.
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* ctx, HandlerPool* pool,
                                    const char* method, std::function<grpc::Status()> body);
  grpc::Status DoHello(grpc::CallbackServerContext* ctx, const v1::HelloRequest* req,
                       v1::HelloResponse* resp);
  grpc::Status DoHeartbeat(grpc::CallbackServerContext* ctx, const v1::HeartbeatRequest* req,
                           v1::HeartbeatResponse* resp);
  // ReportResult's checks before its transaction: token, fields.
  grpc::Status CheckReport(grpc::CallbackServerContext* ctx, const v1::ReportResultRequest* req);
  // After its transaction: metrics and the log line; the status to answer.
  grpc::Status AfterStore(const v1::ReportResultRequest& req,
                          const absl::StatusOr<int64_t>& job_id);

  Stores stores_;
  Dispatcher* dispatcher_;
  ControllerMetrics* metrics_;
  Authorizer open_{nullptr, false};  // without an authorizer: no checks
  Authorizer* auth_;
  const Clock* clock_;
  HandlerPool* board_pool_ = nullptr;
  ResultPool* result_pool_ = nullptr;
  uint32_t build_lease_seconds_ = 120;
  const s3::Client* artifact_store_ = nullptr;
};

}  // namespace faultline::controller
