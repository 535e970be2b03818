#include "services/controller/api/services.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/common/log.h"
#include "services/controller/api/convert.h"
#include "services/controller/core/report.h"
#include "services/controller/core/validation.h"

namespace faultline::controller {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  return Done(ctx, ToGrpc(status));
}

grpc::Status Invalid(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

constexpr size_t kMaxNameLength = 128;

}  // namespace

// ---- JobService ----

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* ctx,
                                                    const v1::SubmitJobRequest* req,
                                                    v1::SubmitJobResponse* resp) {
  auto boards = store_->ListBoards();
  if (!boards.ok()) return Done(ctx, boards.status());
  std::vector<BoardSummary> summaries;
  for (const auto& b : *boards) summaries.push_back(b.summary);
  // The shuffle seed is recorded with the job, so its run order can be reproduced.
  v1::JobSpec spec = req->spec();
  if (spec.shuffle_seed() == 0) spec.set_shuffle_seed(std::random_device{}() | 1ull << 32);
  auto job = ValidateJobSpec(SpecFromProto(spec), summaries);
  if (!job.ok()) {
    log::info("event=job_refused error=\"{}\"", std::string(job.status().message()));
    return Done(ctx, job.status());
  }
  auto id = store_->CreateJob(*job, spec.name(), SpecToJson(spec));
  if (!id.ok()) return Done(ctx, id.status());
  resp->set_job_id(*id);
  resp->set_runs(static_cast<uint32_t>(job->runs.size()));
  log::info("event=job_submitted job={} benchmark={} runs={}", *id, job->benchmark,
            job->runs.size());
  dispatcher_->WorkAvailable();
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* ctx,
                                                 const v1::GetJobRequest* req,
                                                 v1::GetJobResponse* resp) {
  auto job = store_->GetJob(req->job_id());
  if (!job.ok()) return Done(ctx, job.status());
  JobToProto(*job, resp->mutable_job());
  if (req->include_runs()) {
    auto runs = store_->ListRuns(req->job_id());
    if (!runs.ok()) return Done(ctx, runs.status());
    for (const auto& r : *runs) RunToProto(r, resp->add_runs());
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                   const v1::ListJobsRequest* req,
                                                   v1::ListJobsResponse* resp) {
  if (req->limit() > 1000) return Done(ctx, Invalid("limit: must be at most 1000"));
  int limit = req->limit() == 0 ? 50 : static_cast<int>(req->limit());
  auto jobs = store_->ListJobs(limit);
  if (!jobs.ok()) return Done(ctx, jobs.status());
  for (const auto& j : *jobs) JobToProto(j, resp->add_jobs());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* ctx,
                                                    const v1::CancelJobRequest* req,
                                                    v1::CancelJobResponse* resp) {
  auto job = store_->CancelJob(req->job_id());
  if (!job.ok()) return Done(ctx, job.status());
  JobToProto(*job, resp->mutable_job());
  log::info("event=job_cancelled job={}", req->job_id());
  dispatcher_->JobChanged(req->job_id());
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::JobProgress>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* ctx, const v1::WatchJobRequest* req) {
  auto* reactor = new WatchReactor(dispatcher_, req->job_id());
  auto job = store_->GetJob(req->job_id());
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
  auto job = store_->GetJob(req->job_id());
  if (!job.ok()) return Done(ctx, job.status());
  auto runs = store_->ListRuns(req->job_id());
  if (!runs.ok()) return Done(ctx, runs.status());
  JobToProto(*job, resp->mutable_job());
  for (const auto& k : job->matrix_keys) resp->add_matrix_keys(k);
  std::vector<RunOutcome> outcomes;
  for (const auto& r : *runs) {
    RunOutcome o;
    for (const auto& k : job->matrix_keys) {
      auto it = r.cell.find(k);
      o.cell.emplace_back(k, it == r.cell.end() ? "" : it->second);
    }
    o.kernel = r.kernel;
    // Runs not yet placed are reported with their cell; a board appears once one ran there.
    o.board = r.has_result || r.state == "failed" ? r.board : "";
    o.succeeded = r.state == "succeeded" && r.has_result;
    o.failed = r.state == "failed";
    o.throughput = r.throughput;
    outcomes.push_back(std::move(o));
  }
  // Unplaced runs should not form their own rows once their cell has a board: merge them.
  std::vector<SummaryRow> rows = Summarize(outcomes);
  for (const auto& row : rows) {
    bool placed_twin = row.board.empty() &&
                       std::any_of(rows.begin(), rows.end(), [&](const SummaryRow& other) {
                         return !other.board.empty() && other.cell == row.cell &&
                                other.kernel == row.kernel;
                       });
    if (placed_twin) continue;
    auto* out = resp->add_rows();
    for (const auto& [k, v] : row.cell) (*out->mutable_cell())[k] = v;
    out->set_kernel(row.kernel);
    out->set_board(row.board);
    out->set_n(row.n);
    out->set_median(row.median);
    out->set_min(row.min);
    out->set_max(row.max);
    out->set_mean(row.mean);
    out->set_failed(row.failed);
  }

  // A/B: every other kernel against the baseline, per board and cell.
  const v1::JobSpec& spec = resp->job().spec();
  std::vector<std::string> kernels(spec.kernels().begin(), spec.kernels().end());
  std::string baseline = !job->baseline.empty() ? job->baseline
                         : kernels.empty()      ? std::string()
                                                : kernels.front();
  CompareOptions options;
  options.alpha = job->alpha;
  options.min_effect = job->min_effect;
  resp->set_alpha(options.alpha);
  resp->set_min_effect(options.min_effect);
  if (kernels.size() > 1) {
    for (const auto& c : CompareKernels(outcomes, baseline, kernels, options)) {
      auto* out = resp->add_comparisons();
      for (const auto& [k, v] : c.cell) (*out->mutable_cell())[k] = v;
      out->set_board(c.board);
      out->set_baseline(c.baseline);
      out->set_candidate(c.candidate);
      out->set_n_baseline(static_cast<uint32_t>(c.stats.n_a));
      out->set_n_candidate(static_cast<uint32_t>(c.stats.n_b));
      out->set_baseline_median(c.stats.median_a);
      out->set_candidate_median(c.stats.median_b);
      out->set_ratio(c.stats.ratio);
      out->set_ci_low(c.stats.ci_low);
      out->set_ci_high(c.stats.ci_high);
      out->set_p_value(c.stats.p_value);
      out->set_q_value(c.stats.q_value);
      out->set_verdict(std::string(ToString(c.stats.verdict)));
    }
    std::vector<RunEnvironment> environments;
    for (const auto& r : *runs) {
      if (!r.has_result) continue;
      RunEnvironment e{r.board, r.kernel, {}};
      const auto parsed = nlohmann::json::parse(r.environment_json, nullptr, false);
      if (parsed.is_object()) {
        for (const auto& [k, v] : parsed.items()) {
          e.facts[k] = v.is_string() ? v.get<std::string>() : v.dump();
        }
      }
      environments.push_back(std::move(e));
    }
    for (const auto& [k, v] : EnvironmentDifferences(environments)) {
      (*resp->mutable_environment_differences())[k] = v;
    }
  }
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* JobServiceImpl::ListAgents(grpc::CallbackServerContext* ctx,
                                                     const v1::ListAgentsRequest*,
                                                     v1::ListAgentsResponse* resp) {
  auto boards = store_->ListBoards();
  if (!boards.ok()) return Done(ctx, boards.status());
  for (const auto& b : *boards) BoardToProto(b, resp->add_boards());
  return Done(ctx, grpc::Status::OK);
}

// ---- AgentService ----

grpc::ServerUnaryReactor* AgentServiceImpl::Hello(grpc::CallbackServerContext* ctx,
                                                  const v1::HelloRequest* req,
                                                  v1::HelloResponse* resp) {
  const v1::Board& board = req->board();
  if (board.name().empty() || board.name().size() > kMaxNameLength) {
    return Done(ctx, Invalid(absl::StrCat("board.name: must be 1..", kMaxNameLength,
                                          " characters")));
  }
  if (board.arch().empty()) return Done(ctx, Invalid("board.arch: is required"));
  if (board.memory_bytes() == 0) return Done(ctx, Invalid("board.memory_bytes: must be positive"));
  if (board.kernels_size() == 0) {
    return Done(ctx, Invalid("board.kernels: at least one bootable kernel is required"));
  }
  absl::Status s = store_->UpsertBoard(BoardFromProto(board));
  if (!s.ok()) return Done(ctx, s);
  // A hello means the agent (re)started: whatever it was running is gone.
  auto released = store_->ReleaseBoardRuns(board.name());
  if (!released.ok()) return Done(ctx, released.status());
  log::info("event=agent_hello board={} arch={} kernel={} released_runs={}", board.name(),
            board.arch(), board.running_kernel_label(), *released);
  resp->set_heartbeat_interval_seconds(kHeartbeatIntervalSeconds);
  dispatcher_->WorkAvailable();
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AgentServiceImpl::AcquireWork(grpc::CallbackServerContext* ctx,
                                                        const v1::AcquireWorkRequest* req,
                                                        v1::AcquireWorkResponse* resp) {
  if (req->board().empty()) return Done(ctx, Invalid("board: is required"));
  absl::Status touched = store_->TouchBoard(req->board());
  if (!touched.ok()) return Done(ctx, touched);
  auto wait = std::min<std::chrono::seconds>(std::chrono::seconds(req->wait_seconds()),
                                             Dispatcher::kMaxWait);
  auto* reactor = new AcquireReactor(dispatcher_, req->board(), resp,
                                     std::chrono::steady_clock::now() + wait);
  dispatcher_->Park(reactor);
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                      const v1::HeartbeatRequest* req,
                                                      v1::HeartbeatResponse* resp) {
  if (req->run_id() == 0) return Done(ctx, store_->TouchBoard(req->board()));
  auto current = store_->RenewLease(req->board(), req->run_id(), req->attempt_id());
  if (!current.ok()) return Done(ctx, current.status());
  resp->set_cancel(!*current);
  return Done(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportResult(grpc::CallbackServerContext* ctx,
                                                         const v1::ReportResultRequest* req,
                                                         v1::ReportResultResponse*) {
  if (req->run_id() <= 0) return Done(ctx, Invalid("run_id: must be positive"));
  if (req->attempt_id().empty()) return Done(ctx, Invalid("attempt_id: is required"));
  if (req->result().samples_size() > 4 * 3600 + 60) {
    return Done(ctx, Invalid("result.samples: at most one per second of a 4h run"));
  }
  auto job_id = store_->StoreResult(req->board(), req->run_id(), req->attempt_id(),
                                    req->succeeded(), req->failure_reason(),
                                    ResultFromProto(req->result()));
  if (!job_id.ok()) {
    log::warn("event=result_refused run={} board={} error=\"{}\"", req->run_id(), req->board(),
              std::string(job_id.status().message()));
    return Done(ctx, job_id.status());
  }
  log::info("event=result_stored run={} board={} succeeded={} throughput={:.2f}", req->run_id(),
            req->board(), req->succeeded(), req->result().throughput_rounds_per_second());
  dispatcher_->JobChanged(*job_id);
  dispatcher_->WorkAvailable();
  return Done(ctx, grpc::Status::OK);
}

}  // namespace faultline::controller
