#pragma once
// Inside kbuild/: where one build's tree programs run (builder.cc). A trusted build runs
// them on the shared kconfig directory and object directory of its (tree, arch, config),
// so the next build is incremental; an untrusted one on private copies of both, in its own
// slot, thrown away after (a stranger's objects never reach another build). Sandboxed, only
// those two and a scratch directory are writable; the worktree and its git metadata are
// read-only, and nothing else of the builder is visible.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kbuild/process.h"
#include "kbuild/sandbox.h"

namespace faultline::kbuild {

class Slot {
 public:
  struct Paths {
    std::string cache;           // the builder's cache
    std::string src;             // the worktree (read-only inside)
    std::string git_common_dir;  // its git metadata (read-only inside; setlocalversion)
    std::string cfg;             // the shared kconfig directory of (tree, arch)
  };
  // `sandbox` null: the programs run as the builder does (a trusted build where no sandbox
  // runs, or the operator's opt-out).
  static absl::StatusOr<std::unique_ptr<Slot>> Open(Sandbox* sandbox, bool untrusted,
                                                    const Paths& paths);
  ~Slot();
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

  // The object directory the make step builds in (the shared one's path, as the programs
  // see it): prepared (copied for an untrusted build, owned by the sandbox's uid).
  absl::Status UseObj(const std::string& obj);

  // Where the builder reads and writes what the programs see at cfg() and obj().
  const std::string& cfg_host() const { return cfg_host_; }
  const std::string& obj_host() const { return obj_host_; }
  // Where the programs see them: the shared paths when sandboxed (the copies are bound
  // there, so a build's paths and image do not depend on its slot), else the host's.
  const std::string& cfg() const { return sandbox_ != nullptr ? paths_.cfg : cfg_host_; }
  const std::string& obj() const { return sandbox_ != nullptr ? obj_ : obj_host_; }

  bool sandboxed() const { return sandbox_ != nullptr; }

  // A program of the tree, with the kbuild environment (and ccache's, sandboxed).
  // `wall` (sandboxed): this program's wall-time limit when shorter than the limits' wall.
  absl::StatusOr<Finished> Run(Command command, std::chrono::seconds wall = {}) const;
  // Its output (also appended to `log` when one is named, which the error then names); a
  // non-zero exit or a limit reached is FAILED_PRECONDITION with the tail.
  absl::StatusOr<std::string> RunForOutput(Command command, const std::string& log = "") const;

 private:
  Slot(Sandbox* sandbox, bool untrusted, Paths paths)
      : sandbox_(sandbox), untrusted_(untrusted), paths_(std::move(paths)) {}
  absl::Status Prepare(const std::string& shared, const std::string& copy, std::string* host);

  Sandbox* sandbox_;
  bool untrusted_;
  Paths paths_;
  std::string dir_;  // the slot's own directory ("" when it needs none)
  std::string cfg_host_, obj_host_, obj_;
  std::vector<SandboxMount> mounts_;
};

// Whether a build's programs run in `sandbox` (its mode, whether it runs here, whether the
// build is a stranger's); FAILED_PRECONDITION when it must and cannot.
absl::StatusOr<bool> UseSandbox(Sandbox& sandbox, bool untrusted,
                                const std::function<void(const std::string&)>& say);

// The cache's directories (passable by the sandbox's uid when `sandboxed`); the slots of
// builders no longer running removed.
void MakeCacheDirs(const std::string& cache, bool sandboxed);
// Where a build's programs run (Slot::Open, with the worktree's git metadata), said.
absl::StatusOr<std::unique_ptr<Slot>> OpenSlot(Sandbox* sandbox, bool untrusted,
                                               const std::string& cache, const std::string& src,
                                               const std::string& cfg,
                                               const std::function<void(const std::string&)>& say);

// `text` bounded for an error message and a text column: its last `lines` lines, each at
// most `line_bytes`, valid UTF-8.
std::string BoundedTail(const std::string& text, int lines, size_t line_bytes = 240);

}  // namespace faultline::kbuild
