#pragma once
// Builds a kernel from a git tree, a ref, a config (a make target plus fragments) and a
// patch series, once per exact key, into a cache that every later build consults.
//
// Key = (tree hash after the series is applied, arch, compiler version, sha256 of the
// final .config): the artifact lives in
//   <cache>/kernels/<arch>/<compiler>/<config sha256>/<tree hash>/
// (LKP's /pkg/linux/<kconfig>/<compiler>/<commit>, made exact), written under a temporary
// name and renamed when whole, so a build killed half-way leaves nothing that looks built.
// Each (tree, arch) has one git worktree and each (tree, arch, config) one object
// directory, both kept: the second kernel of a pair (the same tree with a series on top)
// rebuilds only what the series touched.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kbuild/sandbox.h"
#include "kbuild/series.h"

namespace faultline::kbuild {

struct NamedText {
  std::string name;
  std::string text;
};

struct BuildRequest {
  std::string tree;  // a git repository (work tree or bare)
  std::string ref;   // anything `git rev-parse` takes: a tag, a branch, a commit
  std::string arch;  // x86_64 | aarch64 | riscv64
  std::string config_base = "tinyconfig";  // a make target: tinyconfig, defconfig, ...
  std::vector<NamedText> fragments;        // merged in order (merge_config.sh)
  std::vector<NamedText> series;           // mbox files, applied in order
  std::vector<std::string> include;        // apply only these paths (git apply --include)
  // Commits reverted on the ref before the series (a bisection's confirmation: the bad end
  // without its culprit). One that does not revert cleanly is INVALID_ARGUMENT.
  std::vector<std::string> revert;
  int jobs = 0;  // make -j; 0: the number of CPUs
  // A stranger's series (docs/kernels.md#strangers-kernels): built only in the sandbox, on a
  // private copy of the object directory and kconfig tools, never on the shared ones.
  bool untrusted = false;
};

struct Artifact {
  std::string key;  // sha256 over the four parts below
  std::string dir;  // the artifact's directory in the cache
  std::string arch;
  std::string base_commit;  // the ref, resolved
  std::string tree_hash;    // git write-tree after the series
  std::string config_sha256;
  std::string compiler;  // first line of `gcc --version`
  std::string release;   // uname -r of the built kernel
  std::string image;     // path of the boot image (bzImage / Image)
  std::string image_sha256;
  uint64_t image_bytes = 0;
  std::string config;                 // path of the final .config
  std::string log;                    // path of the build log
  double build_seconds = 0;           // of the build that made it
  std::vector<std::string> series;    // patch subjects, in order
  std::vector<std::string> warnings;  // fragment options olddefconfig dropped
  bool cached = false;                // found built, nothing done
  double seconds = 0;                 // this call
};

// Reads an artifact's metadata from its directory (NOT_FOUND when it is not whole).
absl::StatusOr<Artifact> ReadArtifact(const std::string& dir);
// The metadata ReadArtifact reads back (the file kMetaFile in the artifact's directory).
std::string ArtifactMeta(const Artifact& artifact);

// The parts of a request that depend on the architecture.
struct ArchInfo {
  std::string make_arch;      // ARCH=
  std::string cross_compile;  // CROSS_COMPILE= ("" for the host's)
  std::string image_target;   // make target
  std::string image_path;     // relative to the object directory
};
absl::StatusOr<ArchInfo> ArchFor(const std::string& arch);  // INVALID_ARGUMENT when unknown

class Builder {
 public:
  // `cache` holds worktrees, object directories, artifacts and kept logs of failed builds.
  // The tree's programs run in `sandbox` (sandbox.h) as its mode says.
  explicit Builder(std::string cache, SandboxOptions sandbox = {});

  // Builds (or finds) the kernel `request` asks for. Errors name what was wrong:
  // INVALID_ARGUMENT for an unknown ref or arch, a series that does not apply (the patch, the
  // file and the hunk), a config without what a board needs (the options);
  // FAILED_PRECONDITION for a build error (the log's last lines, and where the log is kept),
  // a limit of the sandbox reached (which), or an untrusted build where no sandbox runs.
  // `progress` gets one line per step.
  absl::StatusOr<Artifact> Build(const BuildRequest& request,
                                 const std::function<void(const std::string&)>& progress = {});

  const std::string& cache() const { return cache_; }
  Sandbox& sandbox() { return sandbox_; }

 private:
  std::string cache_;
  Sandbox sandbox_;
};

}  // namespace faultline::kbuild
