#include "agent/rpc/build_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "kbuild/builder.h"
#include "kbuild/prebuilt.h"
#include "kbuild/series.h"

namespace faultline::agent {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

std::chrono::system_clock::time_point In(std::chrono::seconds d) {
  return std::chrono::system_clock::now() + d;
}

// Sleeps up to `d`, waking early when `stopping` is set (checked every 100 ms).
void Nap(std::chrono::milliseconds d, const std::atomic<bool>& stopping) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stopping && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

BuildClient::BuildClient(std::shared_ptr<grpc::Channel> channel, std::string token)
    : stub_(v1::AgentService::NewStub(channel)), token_(std::move(token)) {}

void BuildClient::Authorize(grpc::ClientContext* ctx) const {
  if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
}

absl::StatusOr<std::optional<v1::BuildOrder>> BuildClient::Acquire(
    const std::string& builder, const std::vector<std::string>& arches) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(15)));
  Authorize(&ctx);
  v1::AcquireBuildRequest req;
  req.set_builder(builder);
  for (const auto& a : arches) req.add_arches(a);
  v1::AcquireBuildResponse resp;
  if (auto s = FromGrpc(stub_->AcquireBuild(&ctx, req, &resp)); !s.ok()) return s;
  if (!resp.has_build()) return std::nullopt;
  return resp.build();
}

absl::StatusOr<bool> BuildClient::Heartbeat(int64_t build_id, const std::string& attempt_id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(10)));
  Authorize(&ctx);
  v1::BuildHeartbeatRequest req;
  req.set_build_id(build_id);
  req.set_attempt_id(attempt_id);
  v1::BuildHeartbeatResponse resp;
  if (auto s = FromGrpc(stub_->BuildHeartbeat(&ctx, req, &resp)); !s.ok()) return s;
  return !resp.cancel();
}

absl::Status BuildClient::Upload(const std::string& path, const std::string& sha256,
                                 uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(600)));
  Authorize(&ctx);
  v1::UploadArtifactResponse resp;
  auto writer = stub_->UploadArtifact(&ctx, &resp);
  std::string buffer(1 << 20, '\0');
  uint64_t offset = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    v1::ArtifactChunk chunk;
    chunk.set_sha256(sha256);
    chunk.set_offset(offset);
    chunk.set_total_bytes(bytes);
    chunk.set_data(buffer.data(), n);
    if (!writer->Write(chunk)) break;
    offset += n;
  }
  writer->WritesDone();
  return FromGrpc(writer->Finish());
}

absl::Status BuildClient::Finish(const v1::FinishBuildRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(30)));
  Authorize(&ctx);
  v1::FinishBuildResponse resp;
  return FromGrpc(stub_->FinishBuild(&ctx, request, &resp));
}

absl::Status BuildClient::Source::Read(const std::string& sha256, uint64_t offset,
                                       const std::function<absl::Status(absl::string_view)>& sink) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(900)));
  client_->Authorize(&ctx);
  v1::FetchArtifactRequest req;
  req.set_sha256(sha256);
  req.set_offset(offset);
  auto reader = client_->stub_->FetchArtifact(&ctx, req);
  v1::ArtifactChunk chunk;
  uint64_t next = offset;
  while (reader->Read(&chunk)) {
    if (chunk.offset() > next || chunk.offset() + chunk.data().size() <= next) {
      ctx.TryCancel();
      reader->Finish();
      return absl::DataLossError(absl::StrCat("chunk at ", chunk.offset(), ", expected ", next));
    }
    absl::string_view data(chunk.data());
    data.remove_prefix(next - chunk.offset());
    if (absl::Status s = sink(data); !s.ok()) {
      ctx.TryCancel();
      reader->Finish();
      return s;
    }
    next += data.size();
  }
  return FromGrpc(reader->Finish());
}

namespace {

// One lane of the builder: builds of `arches` (and prebuilt images), one at a time.
void RunLane(const std::string& builder, const std::vector<std::string>& arches,
             const std::string& cache, int jobs, kbuild::Builder& kbuilder, BuildClient& client,
             const std::atomic<bool>& stopping) {
  while (!stopping) {
    auto order = client.Acquire(builder, arches);
    if (!order.ok()) {
      log::warn("event=acquire_build_failed error=\"{}\"", std::string(order.status().message()));
      Nap(std::chrono::seconds(5), stopping);
      continue;
    }
    if (!order->has_value()) {
      Nap(std::chrono::seconds(2), stopping);
      continue;
    }
    const v1::BuildOrder& b = **order;
    log::info("event=build_started build={} arch={} ref={} series={}", b.build_id(), b.arch(),
              b.source().ref(), b.source().series_size());
    // The lease: renewed every third of it while kbuild runs.
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::atomic<bool> lost{false};
    std::thread heartbeat([&] {
      std::unique_lock lock(mu);
      const auto every = std::chrono::seconds(std::max<uint32_t>(b.lease_seconds() / 3, 5));
      while (!cv.wait_for(lock, every, [&] { return done; })) {
        auto current = client.Heartbeat(b.build_id(), b.attempt_id());
        if (current.ok() && !*current) {
          lost = true;
          log::warn("event=build_lease_lost build={}", b.build_id());
        }
      }
    });
    auto progress = [&](const std::string& line) {
      log::info("event=build_progress build={} step=\"{}\"", b.build_id(), line);
    };
    absl::StatusOr<kbuild::Artifact> built;
    if (!b.source().image().empty()) {
      // A prebuilt kernel: fetched and checked here, then stored and served as a build.
      kbuild::PrebuiltRequest request;
      request.url = b.source().image();
      request.sha256 = b.source().image_sha256();
      request.arch = b.arch();
      request.release = b.source().image_release();
      built = kbuild::FetchImage(cache, request, progress);
    } else {
      kbuild::BuildRequest request;
      request.tree = b.source().tree();
      request.ref = b.source().ref();
      request.arch = b.arch();
      request.config_base = b.source().config_base();
      for (const auto& f : b.source().fragments())
        request.fragments.push_back({f.name(), f.content()});
      for (const auto& f : b.source().series()) request.series.push_back({f.name(), f.content()});
      request.include.assign(b.source().include().begin(), b.source().include().end());
      request.revert.assign(b.source().revert().begin(), b.source().revert().end());
      request.jobs = jobs;
      request.untrusted = b.source().untrusted();
      built = kbuilder.Build(request, progress);
    }
    v1::FinishBuildRequest finish;
    finish.set_build_id(b.build_id());
    finish.set_attempt_id(b.attempt_id());
    absl::Status uploaded = absl::OkStatus();
    if (built.ok()) {
      uploaded = client.Upload(built->image, built->image_sha256, built->image_bytes);
    }
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
    heartbeat.join();
    if (lost) continue;  // another builder has it now
    if (built.ok() && uploaded.ok()) {
      finish.set_succeeded(true);
      auto* out = finish.mutable_build();
      out->set_key(built->key);
      out->set_release(built->release);
      out->set_base_commit(built->base_commit);
      out->set_tree_hash(built->tree_hash);
      out->set_config_sha256(built->config_sha256);
      out->set_compiler(built->compiler);
      for (const auto& s : built->series) out->add_series(s);
      out->set_image_sha256(built->image_sha256);
      out->set_image_bytes(built->image_bytes);
      out->set_build_seconds(built->build_seconds);
      out->set_cached(built->cached);
    } else if (!built.ok()) {
      finish.set_succeeded(false);
      finish.set_error(std::string(built.status().message()));
      // A series that did not apply: which patch, where, as a message (the robot answers
      // the series with it; no one parses the error's words).
      if (std::optional<kbuild::ApplyFailure> f = kbuild::ApplyFailureOf(built.status())) {
        v1::ApplyFailure* out = finish.mutable_build()->mutable_apply_failure();
        out->set_patch(f->index);
        out->set_subject(f->subject);
        out->set_source(f->source);
        out->set_file(f->file);
        out->set_hunk(f->hunk);
        out->set_reason(f->reason);
      }
    } else {
      // The image did not reach the controller: the lease lapses and the build is retried.
      log::warn("event=upload_failed build={} error=\"{}\"", b.build_id(),
                std::string(uploaded.message()));
      continue;
    }
    if (absl::Status s = client.Finish(finish); !s.ok()) {
      log::warn("event=finish_build_failed build={} error=\"{}\"", b.build_id(),
                std::string(s.message()));
    } else {
      log::info("event=build_finished build={} succeeded={} release={} cached={}", b.build_id(),
                finish.succeeded(), finish.build().release(), finish.build().cached());
    }
  }
}

}  // namespace

void RunBuilder(const std::string& builder, const std::vector<std::string>& arches,
                const std::string& cache, int jobs, const kbuild::SandboxOptions& sandbox,
                BuildClient& client, const std::atomic<bool>& stopping) {
  kbuild::Builder kbuilder(cache, sandbox);
  // Only this host's dead builders' cgroups: another agent's builds go on.
  kbuilder.sandbox().RemoveStaleCgroups();
  // Probed once here, before the lanes share it.
  const absl::Status sandboxed = kbuilder.sandbox().Available();
  log::info(
      "event=builder_ready builder={} arches={} lanes={} cache={} sandbox={} sandbox_ok={} "
      "why=\"{}\"",
      builder, arches.size(), arches.size(), cache, kbuild::SandboxModeName(sandbox.mode),
      sandboxed.ok(), std::string(sandboxed.message()));
  // The lanes share the cache: kbuild locks each (tree, arch) worktree, and every arch's
  // artifacts, index entries and logs are apart.
  std::vector<std::thread> lanes;
  for (const std::string& arch : arches) {
    lanes.emplace_back(
        [&, arch] { RunLane(builder, {arch}, cache, jobs, kbuilder, client, stopping); });
  }
  for (std::thread& lane : lanes) lane.join();
}

}  // namespace faultline::agent
