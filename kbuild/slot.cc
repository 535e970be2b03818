#include "kbuild/slot.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "kbuild/files.h"
#include "kbuild/worktree.h"

namespace faultline::kbuild {
namespace fs = std::filesystem;

std::string BoundedTail(const std::string& text, int lines, size_t line_bytes) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(Tail(text, lines), '\n')) {
    if (line.size() > line_bytes) {
      out.push_back(absl::StrCat(line.substr(0, line_bytes), " [... ", line.size() - line_bytes,
                                 " more bytes]"));
    } else {
      out.emplace_back(line);
    }
  }
  return ValidUtf8(absl::StrJoin(out, "\n"));
}

absl::StatusOr<bool> UseSandbox(Sandbox& sandbox, bool untrusted,
                                const std::function<void(const std::string&)>& say) {
  if (sandbox.options().mode == SandboxMode::kNone) return false;  // the operator's opt-out
  const absl::Status available = sandbox.Available();
  if (available.ok()) return true;
  if (untrusted || sandbox.options().mode == SandboxMode::kRequired) {
    return absl::FailedPreconditionError(
        absl::StrCat("build refused: ",
                     untrusted ? "a stranger's series is built only inside the sandbox"
                               : "the builder requires the sandbox",
                     ", and it cannot run on this builder: ", available.message(),
                     " (an operator who trusts every series opts out by name: build sandbox "
                     "none-i-trust-every-series)"));
  }
  say(absl::StrCat("no sandbox on this builder (", available.message(),
                   "): a trusted build runs without it"));
  return false;
}

void MakeCacheDirs(const std::string& cache, bool sandboxed) {
  std::error_code ec;
  for (const char* d : {"src", "obj", "kernels", "logs", "locks", "cfg", "index", "slots"}) {
    fs::create_directories(fs::path(cache) / d, ec);
  }
  // The sandbox's uid passes (not lists) the cache on its way to its slot.
  if (sandboxed) fs::permissions(cache, fs::perms::others_exec, fs::perm_options::add, ec);
  // Slots of builders that died mid-build (<pid>-<n>: copies of object directories).
  for (const auto& entry : fs::directory_iterator(fs::path(cache) / "slots", ec)) {
    int pid = 0;
    const std::string name = entry.path().filename().string();
    if (absl::SimpleAtoi(name.substr(0, name.find('-')), &pid) && pid > 0 && ::kill(pid, 0) != 0 &&
        errno == ESRCH) {
      std::error_code ignored;
      fs::remove_all(entry.path(), ignored);
    }
  }
}

// Where this build's programs run (slot.h), said in its progress.
absl::StatusOr<std::unique_ptr<Slot>> OpenSlot(Sandbox* sandbox, bool untrusted,
                                               const std::string& cache, const std::string& src,
                                               const std::string& cfg,
                                               const std::function<void(const std::string&)>& say) {
  absl::StatusOr<std::string> common_dir =
      RunForOutput({GitArgv(src, {"rev-parse", "--path-format=absolute", "--git-common-dir"})});
  if (!common_dir.ok()) return common_dir.status();
  absl::StatusOr<std::unique_ptr<Slot>> slot = Slot::Open(
      sandbox, untrusted, {cache, src, std::string(absl::StripAsciiWhitespace(*common_dir)), cfg});
  if (slot.ok() && (untrusted || sandbox != nullptr)) {
    say(absl::StrCat(untrusted ? "untrusted: private copies of the object directory, " : "",
                     sandbox != nullptr ? absl::StrCat("sandboxed as uid ", sandbox->options().uid)
                                        : "NOT sandboxed (the operator's opt-out)"));
  }
  return slot;
}

absl::StatusOr<std::unique_ptr<Slot>> Slot::Open(Sandbox* sandbox, bool untrusted,
                                                 const Paths& paths) {
  std::unique_ptr<Slot> slot(new Slot(sandbox, untrusted, paths));
  std::error_code ec;
  if (sandbox != nullptr || untrusted) {
    static std::atomic<int> next{0};
    slot->dir_ = absl::StrCat(paths.cache, "/slots/", ::getpid(), "-", next++);
    fs::remove_all(slot->dir_, ec);
    fs::create_directories(slot->dir_ + "/scratch", ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot make the slot ", slot->dir_, ": ", ec.message()));
    }
    // git inside (kbuild's setlocalversion) reads the worktree another uid owns.
    if (absl::Status s = WriteFile(slot->dir_ + "/scratch/.gitconfig",
                                   "[safe]\n\tdirectory = *\n[core]\n\thooksPath = /dev/null\n");
        !s.ok()) {
      return s;
    }
  }
  if (sandbox != nullptr) {
    if (absl::Status s = sandbox->Own(slot->dir_ + "/scratch"); !s.ok()) return s;
    slot->mounts_.push_back({paths.src, "", false});
    if (!paths.git_common_dir.empty()) slot->mounts_.push_back({paths.git_common_dir, "", false});
    // ccache: a trusted build fills the builder's kernel cache, an untrusted one only reads
    // it (its objects never reach another build).
    const std::string ccache = paths.cache + "/ccache";
    fs::create_directories(ccache, ec);
    if (!untrusted) {
      if (absl::Status s = sandbox->Own(ccache); !s.ok()) return s;
    }
    slot->mounts_.push_back({ccache, "", !untrusted});
  }
  if (absl::Status s = slot->Prepare(paths.cfg, "cfg", &slot->cfg_host_); !s.ok()) return s;
  return slot;
}

Slot::~Slot() {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

absl::Status Slot::Prepare(const std::string& shared, const std::string& copy, std::string* host) {
  std::error_code ec;
  fs::create_directories(shared, ec);
  *host = shared;
  if (untrusted_) {
    *host = absl::StrCat(dir_, "/", copy);
    // With mtimes, so make rebuilds only what the series changed.
    absl::StatusOr<std::string> copied =
        kbuild::RunForOutput({{"cp", "-a", "--reflink=auto", shared, *host}});
    if (!copied.ok()) return copied.status();
  }
  if (sandbox_ == nullptr) return absl::OkStatus();
  if (absl::Status s = sandbox_->Own(*host); !s.ok()) return s;
  mounts_.push_back({*host, shared, true});
  return absl::OkStatus();
}

absl::Status Slot::UseObj(const std::string& obj) {
  obj_ = obj;
  return Prepare(obj, "obj", &obj_host_);
}

absl::StatusOr<Finished> Slot::Run(Command command, std::chrono::seconds wall) const {
  std::vector<std::pair<std::string, std::string>> env = KbuildEnvironment();
  if (sandbox_ == nullptr) {
    for (auto& e : command.env) env.push_back(std::move(e));
    command.env = std::move(env);
    return kbuild::Run(command);
  }
  env.insert(env.end(),
             {{"CCACHE_DIR", paths_.cache + "/ccache"}, {"CCACHE_TEMPDIR", "/scratch/ccache-tmp"}});
  if (untrusted_) env.emplace_back("CCACHE_READONLY", "1");
  for (auto& e : command.env) env.push_back(std::move(e));
  command.env = std::move(env);
  return sandbox_->Run({command, mounts_, dir_ + "/scratch", wall});
}

absl::StatusOr<std::string> Slot::RunForOutput(Command command, const std::string& log) const {
  const std::string what = absl::StrJoin(command.argv, " ");
  absl::StatusOr<Finished> finished =
      Run(std::move(command),
          sandbox_ != nullptr ? sandbox_->options().limits.step_wall : std::chrono::seconds{});
  if (!finished.ok()) return finished.status();
  std::string kept;
  if (!log.empty()) {
    std::ofstream out(log, std::ios::app | std::ios::binary);
    out << "$ " << what << "\n" << finished->output;
    if (out) kept = absl::StrCat("log kept at ", log, "; ");
  }
  if (!finished->stopped.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", what, "` stopped by the sandbox: ", finished->stopped, "; ", kept,
                     "last lines:\n", BoundedTail(finished->output, 8)));
  }
  if (finished->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("`", what, "` exited with ", finished->exit_code, "; ", kept, "last lines:\n",
                     BoundedTail(finished->output, 8)));
  }
  return std::move(finished->output);
}

}  // namespace faultline::kbuild
