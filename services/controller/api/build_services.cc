// The builds' side of the agent service (services.h): claims, leases, artifacts in and out.
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/strings.h"
#include "services/controller/api/services.h"
#include "services/controller/convert/convert.h"

namespace faultline::controller {
namespace {

// Receives an image in chunks, checks that the chunks are in order and that the whole has
// the sha256 the first chunk named, then stores it (PutArtifact; with an object store, PUT
// there and recorded). Bounded by kMaxArtifactBytes.
class UploadReactor final : public grpc::ServerReadReactor<v1::ArtifactChunk> {
 public:
  UploadReactor(BuildStore* builds, const s3::Client* object_store,
                v1::UploadArtifactResponse* resp, RpcTimer timer)
      : builds_(builds), object_store_(object_store), resp_(resp), timer_(std::move(timer)) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Complete();
    if (sha256_.empty()) {
      if (!IsSha256Hex(chunk_.sha256()))
        return Fail(grpc::StatusCode::INVALID_ARGUMENT, "sha256: 64 lowercase hex characters");
      sha256_ = chunk_.sha256();
      total_ = chunk_.total_bytes();
      if (total_ > AgentServiceImpl::kMaxArtifactBytes) {
        return Fail(grpc::StatusCode::INVALID_ARGUMENT,
                    absl::StrCat("total_bytes: ", total_, ", over the limit of ",
                                 AgentServiceImpl::kMaxArtifactBytes));
      }
      data_.reserve(total_);
    }
    if (chunk_.offset() != data_.size()) {
      return Fail(grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("offset: ", chunk_.offset(), ", expected ", data_.size()));
    }
    if (data_.size() + chunk_.data().size() > total_) {
      return Fail(grpc::StatusCode::INVALID_ARGUMENT, "more data than total_bytes");
    }
    sha_.Update(chunk_.data());
    data_ += chunk_.data();
    StartRead(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  void Complete() {
    if (sha256_.empty()) return Fail(grpc::StatusCode::INVALID_ARGUMENT, "no chunk received");
    if (data_.size() != total_) {
      return Fail(grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("received ", data_.size(), " of ", total_, " bytes"));
    }
    const std::string got = sha_.Hex();
    if (got != sha256_) {
      return Fail(grpc::StatusCode::DATA_LOSS,
                  absl::StrCat("sha256 of the upload is ", got, ", not ", sha256_));
    }
    if (object_store_ != nullptr) {
      // The object store first, the record after: a record never names a missing object.
      if (absl::Status s = object_store_->Put(sha256_, data_); !s.ok()) {
        log::warn("event=artifact_s3_put_failed sha256={} error=\"{}\"", sha256_,
                  std::string(s.message()));
        return Fail(grpc::StatusCode::UNAVAILABLE, std::string(s.message()));
      }
      if (absl::Status s = builds_->RecordArtifact(sha256_, data_.size(), "s3"); !s.ok()) {
        return Fail(ToGrpc(s).error_code(), std::string(s.message()));
      }
    } else if (absl::Status s = builds_->PutArtifact(sha256_, data_); !s.ok()) {
      return Fail(ToGrpc(s).error_code(), std::string(s.message()));
    }
    resp_->set_sha256(sha256_);
    resp_->set_bytes(data_.size());
    log::info("event=artifact_stored sha256={} bytes={} in={}", sha256_, data_.size(),
              object_store_ != nullptr ? "s3" : "db");
    timer_.Finish(grpc::StatusCode::OK);
    Finish(grpc::Status::OK);
  }
  void Fail(grpc::StatusCode code, const std::string& message) {
    timer_.Finish(code);
    Finish(grpc::Status(code, message));
  }

  BuildStore* builds_;
  const s3::Client* object_store_;
  v1::UploadArtifactResponse* resp_;
  RpcTimer timer_;
  Sha256 sha_;
  v1::ArtifactChunk chunk_;
  std::string sha256_;
  uint64_t total_ = 0;
  std::string data_;
};

// Streams an image from an offset, one stored chunk per write.
class FetchReactor final : public grpc::ServerWriteReactor<v1::ArtifactChunk> {
 public:
  FetchReactor(BuildStore* builds, std::string sha256, uint64_t offset, RpcTimer timer)
      : builds_(builds), sha256_(std::move(sha256)), next_(offset), timer_(std::move(timer)) {
    auto bytes = builds_->ArtifactBytes(sha256_);
    if (!bytes.ok()) {
      End(ToGrpc(bytes.status()));
    } else if (*bytes < next_) {
      End(grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                       absl::StrCat("offset ", next_, " is past the end (", *bytes, ")")));
    } else {
      total_ = *bytes;
      WriteNext();
    }
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return End(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    if (next_ >= total_) return End(grpc::Status::OK);
    // One chunk: ReadArtifact from next_ delivers the stored chunk that holds it first.
    std::string data;
    uint64_t at = 0;
    bool got = false;
    absl::Status s = builds_->ReadArtifact(
        sha256_, next_, [&](const std::string& chunk, uint64_t where) -> absl::Status {
          if (got) return absl::CancelledError("one chunk per write");
          data = chunk;
          at = where;
          got = true;
          return absl::OkStatus();
        });
    if (!got) return End(ToGrpc(s.ok() ? absl::DataLossError("artifact ended early") : s));
    chunk_.set_sha256(sha256_);
    chunk_.set_offset(at);
    chunk_.set_total_bytes(total_);
    chunk_.set_data(std::move(data));
    next_ = at + chunk_.data().size();
    StartWrite(&chunk_);
  }
  void End(const grpc::Status& status) {
    timer_.Finish(status.error_code());
    Finish(status);
  }

  BuildStore* builds_;
  std::string sha256_;
  uint64_t next_;
  uint64_t total_ = 0;
  RpcTimer timer_;
  v1::ArtifactChunk chunk_;
};

}  // namespace

grpc::ServerUnaryReactor* AgentServiceImpl::AcquireBuild(grpc::CallbackServerContext* ctx,
                                                         const v1::AcquireBuildRequest* req,
                                                         v1::AcquireBuildResponse* resp) {
  RpcTimer timer(metrics_, "AcquireBuild");
  if (auto denied = auth_->RequireAgent(ctx, req->builder()); !denied.ok()) {
    return FinishUnary(ctx, &timer, denied);
  }
  if (stores_.builds == nullptr) {
    return FinishUnary(ctx, &timer,
                       grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no build store"));
  }
  std::vector<std::string> arches(req->arches().begin(), req->arches().end());
  auto claimed = stores_.builds->ClaimBuild(req->builder(), arches, build_lease_seconds_);
  if (!claimed.ok()) return FinishUnary(ctx, &timer, ToGrpc(claimed.status()));
  if (*claimed) {
    const BuildRecord& b = **claimed;
    auto* order = resp->mutable_build();
    order->set_build_id(b.id);
    order->set_attempt_id(b.attempt_id);
    order->set_arch(b.arch);
    *order->mutable_source() = KernelSourceFromJson(b.source_json);
    order->set_lease_seconds(build_lease_seconds_);
    log::info("event=build_claimed build={} label={} arch={} builder={} attempt={}", b.id, b.label,
              b.arch, req->builder(), b.attempts);
  }
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerUnaryReactor* AgentServiceImpl::BuildHeartbeat(grpc::CallbackServerContext* ctx,
                                                           const v1::BuildHeartbeatRequest* req,
                                                           v1::BuildHeartbeatResponse* resp) {
  RpcTimer timer(metrics_, "BuildHeartbeat");
  // The attempt id is the fence: the agent that holds it renews it.
  if (auto denied = auth_->RequireAnyAgent(ctx); !denied.ok())
    return FinishUnary(ctx, &timer, denied);
  if (stores_.builds == nullptr) {
    return FinishUnary(ctx, &timer,
                       grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no build store"));
  }
  auto current =
      stores_.builds->RenewBuild(req->build_id(), req->attempt_id(), build_lease_seconds_);
  if (!current.ok()) return FinishUnary(ctx, &timer, ToGrpc(current.status()));
  resp->set_cancel(!*current);
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

grpc::ServerReadReactor<v1::ArtifactChunk>* AgentServiceImpl::UploadArtifact(
    grpc::CallbackServerContext* ctx, v1::UploadArtifactResponse* resp) {
  class Refused final : public grpc::ServerReadReactor<v1::ArtifactChunk> {
   public:
    explicit Refused(const grpc::Status& s) { Finish(s); }
    void OnDone() override { delete this; }
  };
  if (auto denied = auth_->RequireAnyAgent(ctx); !denied.ok()) return new Refused(denied);
  if (stores_.builds == nullptr) {
    return new Refused(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no build store"));
  }
  return new UploadReactor(stores_.builds, artifact_store_, resp,
                           RpcTimer(metrics_, "UploadArtifact"));
}

grpc::ServerUnaryReactor* AgentServiceImpl::FinishBuild(grpc::CallbackServerContext* ctx,
                                                        const v1::FinishBuildRequest* req,
                                                        v1::FinishBuildResponse*) {
  RpcTimer timer(metrics_, "FinishBuild");
  if (auto denied = auth_->RequireAnyAgent(ctx); !denied.ok())
    return FinishUnary(ctx, &timer, denied);
  if (stores_.builds == nullptr) {
    return FinishUnary(ctx, &timer,
                       grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no build store"));
  }
  BuildRecord outcome = BuildFromProto(req->build());
  // Cut to a bound, and never mid-character: a text column refuses a broken sequence.
  outcome.error = ValidUtf8(req->error().substr(0, 8000));
  if (req->succeeded() && !IsSha256Hex(outcome.image_sha256)) {
    return FinishUnary(ctx, &timer,
                       grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "build.image_sha256: 64 lowercase hex characters"));
  }
  absl::Status s =
      stores_.builds->FinishBuild(req->build_id(), req->attempt_id(), req->succeeded(), outcome);
  if (s.ok()) {
    log::info("event=build_finished build={} succeeded={} release={} seconds={:.0f} cached={}",
              req->build_id(), req->succeeded(), outcome.release, outcome.build_seconds,
              outcome.cached);
    if (metrics_ != nullptr)
      metrics_->ObserveBuild(req->succeeded(), outcome.build_seconds, outcome.cached);
    if (dispatcher_ != nullptr && req->succeeded()) dispatcher_->WorkAvailable();
  }
  return FinishUnary(ctx, &timer, ToGrpc(s));
}

grpc::ServerWriteReactor<v1::ArtifactChunk>* AgentServiceImpl::FetchArtifact(
    grpc::CallbackServerContext* ctx, const v1::FetchArtifactRequest* req) {
  class Refused final : public grpc::ServerWriteReactor<v1::ArtifactChunk> {
   public:
    explicit Refused(const grpc::Status& s) { Finish(s); }
    void OnDone() override { delete this; }
  };
  if (auto denied = auth_->RequireAnyAgent(ctx); !denied.ok()) return new Refused(denied);
  if (!IsSha256Hex(req->sha256())) {
    return new Refused(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "sha256: 64 lowercase hex characters"));
  }
  if (stores_.builds == nullptr) {
    return new Refused(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no build store"));
  }
  return new FetchReactor(stores_.builds, req->sha256(), req->offset(),
                          RpcTimer(metrics_, "FetchArtifact"));
}

grpc::ServerUnaryReactor* JobServiceImpl::ListBuilds(grpc::CallbackServerContext* ctx,
                                                     const v1::ListBuildsRequest* req,
                                                     v1::ListBuildsResponse* resp) {
  RpcTimer timer(metrics_, "ListBuilds");
  if (auto denied = auth_->RequireUser(ctx); !denied.ok()) return FinishUnary(ctx, &timer, denied);
  if (stores_.builds == nullptr) return FinishUnary(ctx, &timer, grpc::Status::OK);
  auto builds = stores_.builds->ListBuilds(req->job_id());
  if (!builds.ok()) return FinishUnary(ctx, &timer, ToGrpc(builds.status()));
  for (const auto& b : *builds) BuildToProto(b, resp->add_builds());
  return FinishUnary(ctx, &timer, grpc::Status::OK);
}

}  // namespace faultline::controller
