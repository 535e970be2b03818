#include "kbuild/worktree.h"

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kbuild/files.h"
#include "kbuild/process.h"

namespace faultline::kbuild {
namespace fs = std::filesystem;

// Takes the worktree's lock for this build, saying first for whom it waits when another
// build holds it.
absl::Status LockWorktree(FileLock& tree_lock, const std::string& lock_path,
                          const BuildRequest& request, const std::string& tree, size_t patches,
                          const Say& say) {
  bool waited = false;
  const auto lock_asked = std::chrono::steady_clock::now();
  const bool locked = tree_lock.Lock(
      absl::StrCat("pid ", ::getpid(), ": ", request.ref,
                   patches == 0 ? "" : absl::StrCat(" + ", patches, " patch(es)"), " for ",
                   request.arch),
      [&](const std::string& holder) {
        waited = true;
        say(absl::StrCat("waiting: another build holds the worktree of ", tree, " for ",
                         request.arch, " (", holder.empty() ? "" : holder + "; ", "lock ",
                         lock_path, ")"));
      });
  if (!locked) return absl::InternalError(absl::StrCat("cannot lock ", lock_path));
  if (waited) {
    say(absl::StrCat(
        "lock taken after ",
        static_cast<int>(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - lock_asked).count()),
        " s"));
  }
  return absl::OkStatus();
}

// The worktree at the base commit; files that do not change keep their mtimes.
absl::Status CheckOut(const std::string& tree, const std::string& src,
                      const std::string& base_commit) {
  std::error_code ec;
  if (!fs::exists(src + "/.git")) {
    fs::remove_all(src, ec);
    RunForOutput({GitArgv(tree, {"worktree", "prune"})}).IgnoreError();
    absl::StatusOr<std::string> added =
        RunForOutput({GitArgv(tree, {"worktree", "add", "--detach", "--force", src, base_commit})});
    if (!added.ok()) return added.status();
  } else {
    for (std::vector<std::string> argv :
         {GitArgv(src, {"reset", "-q", "--hard"}),
          GitArgv(src, {"checkout", "-q", "-f", "--detach", base_commit}),
          GitArgv(src, {"reset", "-q", "--hard"}), GitArgv(src, {"clean", "-q", "-fdx"})}) {
      absl::StatusOr<std::string> done = RunForOutput({argv});
      if (!done.ok()) return done.status();
    }
  }
  return absl::OkStatus();
}

// Reverts, each the commit's own diff applied backwards into the index. `scratch`: a path
// prefix this build owns (under its lock).
absl::Status ApplyReverts(const BuildRequest& request, const std::string& tree,
                          const std::string& src, const std::string& scratch, const Say& say) {
  for (size_t i = 0; i < request.revert.size(); ++i) {
    const std::string& rev = request.revert[i];
    absl::StatusOr<std::string> sha =
        RunForOutput({GitArgv(tree, {"rev-parse", "--verify", "--quiet", rev + "^{commit}"})});
    if (!sha.ok() || rev.empty() || rev.front() == '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("revert[", i, "]: '", rev, "' is not a commit in ", request.tree));
    }
    const std::string commit_sha(absl::StripAsciiWhitespace(*sha));
    absl::StatusOr<std::string> diff =
        RunForOutput({GitArgv(tree, {"diff", "--binary", commit_sha + "^", commit_sha})});
    if (!diff.ok()) return diff.status();
    const std::string file = scratch + ".revert";
    if (absl::Status s = WriteFile(file, *diff); !s.ok()) return s;
    absl::StatusOr<Finished> run = Run({GitArgv(src, {"apply", "--index", "-R", file})});
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "revert[", i, "]: ", commit_sha.substr(0, 12), " does not revert cleanly on ",
          request.ref, ": ", absl::StripAsciiWhitespace(run->output.substr(0, 512))));
    }
    say(absl::StrCat("reverted ", commit_sha.substr(0, 12)));
  }
  return absl::OkStatus();
}

// The series, patch by patch, into the index (so write-tree sees it): the patches'
// subjects, or why one did not apply.
absl::StatusOr<std::vector<std::string>> ApplySeries(const std::vector<Patch>& patches,
                                                     const BuildRequest& request,
                                                     const std::string& src,
                                                     const std::string& scratch, const Say& say) {
  int applied = 0;
  std::vector<std::string> subjects;
  for (const Patch& patch : patches) {
    subjects.push_back(patch.subject);
    const std::vector<std::string> files = IncludedFiles(patch, request.include);
    if (files.empty()) {
      say(absl::StrCat("patch ", patch.index, " touches no included path: skipped"));
      continue;
    }
    // A path outside the tree (absolute, or with a ".." component) is refused here, by
    // name, whatever git would make of it.
    for (const std::string& path : PatchPaths(patch)) {
      if (!PathInsideTree(path)) {
        return ApplyFailureError(patch, absl::StrCat("error: ", path, ": a path outside the tree"));
      }
    }
    const std::string file = scratch + ".patch";
    if (absl::Status s = WriteFile(file, patch.text); !s.ok()) return s;
    std::vector<std::string> argv = GitArgv(src, {"apply", "--index"});
    for (const std::string& glob : request.include) argv.push_back("--include=" + glob);
    argv.push_back(file);
    absl::StatusOr<Finished> run = Run({argv});
    if (!run.ok()) return run.status();
    if (run->exit_code != 0) {
      return ApplyFailureError(patch, run->output);
    }
    ++applied;
    say(absl::StrCat("applied patch ", patch.index, " \"", patch.subject, "\" (", files.size(),
                     " of ", patch.files.size(), " files)"));
  }
  if (!patches.empty() && applied == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("series: `include` (", absl::StrJoin(request.include, ", "),
                     ") selects no file of any patch: nothing would be applied"));
  }
  return subjects;
}

}  // namespace faultline::kbuild
