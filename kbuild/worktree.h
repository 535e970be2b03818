#pragma once
// Inside kbuild/: the worktree a build owns (builder.cc): its lock, the checkout of the base
// commit, reverts and the series applied into the index.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "kbuild/builder.h"
#include "kbuild/series.h"

namespace faultline::kbuild {

using Say = std::function<void(const std::string&)>;

// `git -C dir ARGS` with no hook, no fsmonitor and no pager: git on trees a stranger's series
// has written to runs nothing the tree or its metadata names.
inline std::vector<std::string> GitArgv(const std::string& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {"git",
                                   "-c",
                                   "core.hooksPath=/dev/null",
                                   "-c",
                                   "core.fsmonitor=false",
                                   "-c",
                                   "core.pager=cat",
                                   "--no-pager",
                                   "-C",
                                   dir};
  for (std::string& a : args) argv.push_back(std::move(a));
  return argv;
}

// An exclusive flock held for a scope (other builders on the same cache wait). The holder
// writes who it is into the file, so that a builder that has to wait can say for whom.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {}
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Takes the lock. When another holds it, first calls `waiting` with what the holder wrote
  // (empty when it wrote nothing yet), then blocks. Writes `holder` once it has the lock.
  // False when the file could not be opened or locked.
  bool Lock(const std::string& holder, const std::function<void(const std::string&)>& waiting) {
    if (fd_ < 0) return false;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return false;
      char text[512] = "";
      const ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
      waiting(std::string(
          absl::StripAsciiWhitespace(absl::string_view(text, n > 0 ? static_cast<size_t>(n) : 0))));
      while (::flock(fd_, LOCK_EX) != 0) {
        if (errno != EINTR) return false;
      }
    }
    if (::ftruncate(fd_, 0) == 0 && !holder.empty()) {
      (void)!::pwrite(fd_, holder.data(), holder.size(), 0);
    }
    return true;
  }

 private:
  int fd_;
};

// Takes the worktree's lock for this build, saying first for whom it waits when another
// build holds it.
absl::Status LockWorktree(FileLock& tree_lock, const std::string& lock_path,
                          const BuildRequest& request, const std::string& tree, size_t patches,
                          const Say& say);
// The worktree at the base commit; files that do not change keep their mtimes.
absl::Status CheckOut(const std::string& tree, const std::string& src,
                      const std::string& base_commit);
// Reverts, each the commit's own diff applied backwards into the index. `scratch`: a path
// prefix this build owns (under its lock).
absl::Status ApplyReverts(const BuildRequest& request, const std::string& tree,
                          const std::string& src, const std::string& scratch, const Say& say);
// The series, patch by patch, into the index (so write-tree sees it): the patches'
// subjects, or why one did not apply.
absl::StatusOr<std::vector<std::string>> ApplySeries(const std::vector<Patch>& patches,
                                                     const BuildRequest& request,
                                                     const std::string& src,
                                                     const std::string& scratch, const Say& say);

}  // namespace faultline::kbuild
