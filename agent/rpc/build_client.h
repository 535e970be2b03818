#pragma once
// The builds' side of the controller conversation: a builder claims builds, renews their
// lease, uploads images and reports; a board fetches images (resumably) for a switch.
#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/artifact_cache.h"
#include "faultline/v1/agent.grpc.pb.h"
#include "kbuild/sandbox.h"

namespace faultline::agent {

class BuildClient {
 public:
  BuildClient(std::shared_ptr<grpc::Channel> channel, std::string token);

  absl::StatusOr<std::optional<v1::BuildOrder>> Acquire(const std::string& builder,
                                                        const std::vector<std::string>& arches);
  // False when the attempt is no longer the build's (stop building).
  absl::StatusOr<bool> Heartbeat(int64_t build_id, const std::string& attempt_id);
  // Streams the file in 1 MiB chunks; the controller checks the sha256 of the whole.
  absl::Status Upload(const std::string& path, const std::string& sha256, uint64_t bytes);
  absl::Status Finish(const v1::FinishBuildRequest& request);

  // FetchArtifact as an ArtifactSource (ArtifactCache::Fetch resumes through it).
  class Source : public ArtifactSource {
   public:
    explicit Source(BuildClient* client) : client_(client) {}
    absl::Status Read(const std::string& sha256, uint64_t offset,
                      const std::function<absl::Status(absl::string_view)>& sink) override;

   private:
    BuildClient* client_;
  };

 private:
  void Authorize(grpc::ClientContext* ctx) const;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  std::string token_;
};

// The builder (agent.yaml builder): a lane per arch, each on a thread of its own, claiming
// builds of its arch, building them with kbuild into the builder's cache (heartbeats keep
// the lease meanwhile), uploading the image and reporting; until `stopping`. A cold build
// of one arch never holds up another arch's (a cache hit or an incremental build). The
// tree's programs run in `sandbox` (kbuild/sandbox.h).
void RunBuilder(const std::string& builder, const std::vector<std::string>& arches,
                const std::string& cache, int jobs, const kbuild::SandboxOptions& sandbox,
                BuildClient& client, const std::atomic<bool>& stopping);

}  // namespace faultline::agent
