#include "kbuild/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace faultline::kbuild {
namespace fs = std::filesystem;
namespace {

constexpr char kPath[] = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool WriteSmall(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// The executable `name` in PATH (or `name` itself when it holds a '/'); "" when none.
std::string Which(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = ::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : kPath, ':')) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// One build's cgroups: memory, pids and cpu (one directory on v2, one per hierarchy on
// v1), named build-<builder pid>-<n> under faultline/.
class BuildCgroup {
 public:
  BuildCgroup(const std::string& root, const SandboxLimits& limits) {
    static std::atomic<int> next{0};
    const std::string name = absl::StrCat("build-", ::getpid(), "-", next++);
    const bool v2 = absl::StrContains(ReadSmall(root + "/cgroup.controllers"), "memory");
    if (v2) {
      v2_ = true;
      for (const std::string& parent : {root, root + "/faultline"}) {
        ::mkdir(parent.c_str(), 0755);
        for (const char* c : {"+memory", "+pids", "+cpu"}) {
          WriteSmall(parent + "/cgroup.subtree_control", c);
        }
      }
      Make(root + "/faultline/" + name);
    } else {
      for (const char* hierarchy : {"memory", "pids", "cpu"}) {
        const std::string base = absl::StrCat(root, "/", hierarchy);
        if (::access((base + "/cgroup.procs").c_str(), F_OK) != 0) continue;
        ::mkdir((base + "/faultline").c_str(), 0755);
        Make(base + "/faultline/" + name);
      }
    }
    for (const std::string& dir : dirs_) {
      const std::string memory = std::to_string(limits.memory_bytes);
      if (v2_) {
        WriteSmall(dir + "/memory.max", memory);
        WriteSmall(dir + "/memory.swap.max", "0");
        WriteSmall(dir + "/pids.max", std::to_string(limits.pids));
        if (limits.cpus > 0) {
          WriteSmall(dir + "/cpu.max",
                     absl::StrCat(static_cast<int64_t>(limits.cpus * 100000), " 100000"));
        }
        continue;
      }
      WriteSmall(dir + "/memory.limit_in_bytes", memory);
      WriteSmall(dir + "/memory.memsw.limit_in_bytes", memory);
      WriteSmall(dir + "/pids.max", std::to_string(limits.pids));
      if (limits.cpus > 0) {
        WriteSmall(dir + "/cpu.cfs_period_us", "100000");
        WriteSmall(dir + "/cpu.cfs_quota_us",
                   std::to_string(static_cast<int64_t>(limits.cpus * 100000)));
      }
    }
  }
  ~BuildCgroup() { KillAndRemove(); }
  BuildCgroup(const BuildCgroup&) = delete;
  BuildCgroup& operator=(const BuildCgroup&) = delete;

  // O_CLOEXEC fds on each cgroup.procs, for the child to join before exec.
  std::vector<int> OpenProcs() const {
    std::vector<int> fds;
    for (const std::string& dir : dirs_) {
      const int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (fd >= 0) fds.push_back(fd);
    }
    return fds;
  }
  bool Empty() const { return dirs_.empty(); }

  // Every process inside killed (repeatedly: forks race the kill), then the directories
  // removed.
  void KillAndRemove() {
    for (int round = 0; round < 200 && !dirs_.empty(); ++round) {
      bool alive = false;
      for (const std::string& dir : dirs_) {
        if (v2_ && WriteSmall(dir + "/cgroup.kill", "1")) continue;
        for (absl::string_view pid : absl::StrSplit(ReadSmall(dir + "/cgroup.procs"), '\n')) {
          int p = 0;
          if (absl::SimpleAtoi(pid, &p) && p > 0) {
            ::kill(p, SIGKILL);
            alive = true;
          }
        }
      }
      std::vector<std::string> left;
      for (const std::string& dir : dirs_) {
        if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) left.push_back(dir);
      }
      dirs_ = std::move(left);
      if (!dirs_.empty()) ::usleep(alive ? 10000 : 50000);
    }
  }

  // Why the kernel stopped something inside: the memory or the pids limit ("" neither).
  std::string LimitHit(const SandboxLimits& limits) const {
    for (const std::string& dir : dirs_) {
      const std::string events = ReadSmall(dir + (v2_ ? "/memory.events" : "/memory.oom_control"));
      for (absl::string_view line : absl::StrSplit(events, '\n')) {
        int64_t n = 0;
        if (absl::ConsumePrefix(&line, "oom_kill ") && absl::SimpleAtoi(line, &n) && n > 0) {
          return absl::StrCat("the memory limit (", limits.memory_bytes >> 20, " MiB)");
        }
      }
      for (absl::string_view line : absl::StrSplit(ReadSmall(dir + "/pids.events"), '\n')) {
        int64_t n = 0;
        if (absl::ConsumePrefix(&line, "max ") && absl::SimpleAtoi(line, &n) && n > 0) {
          return absl::StrCat("the process limit (", limits.pids, " processes)");
        }
      }
    }
    return "";
  }

 private:
  void Make(const std::string& dir) {
    if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) dirs_.push_back(dir);
  }
  bool v2_ = false;
  std::vector<std::string> dirs_;
};

// Output of the sandboxed program into `out_fd`, at most `cap` bytes; false once over.
class CappedLog {
 public:
  CappedLog(int out_fd, uint64_t cap) : fd_(out_fd), cap_(cap) {}
  bool Write(const char* data, size_t n) {
    tail_.append(data, n);
    if (tail_.size() > 8192) tail_.erase(0, tail_.size() - 4096);
    total_ += n;
    if (written_ >= cap_) return false;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, cap_ - written_));
    size_t done = 0;
    while (done < take) {
      const ssize_t w = ::write(fd_, data + done, take - done);
      if (w <= 0 && errno != EINTR) break;
      if (w > 0) done += static_cast<size_t>(w);
    }
    written_ += take;
    return total_ <= cap_;
  }
  const std::string& tail() const { return tail_; }

 private:
  std::string tail_;  // the last few KiB, for what the program said last
  int fd_;
  uint64_t cap_, written_ = 0, total_ = 0;
};

// bwrap's arguments: namespaces, the file system the program sees, its environment.
std::vector<std::string> BwrapArgs(const std::string& bwrap,
                                   const std::vector<SandboxMount>& mounts,
                                   const Command& command) {
  std::vector<std::string> args = {bwrap,           "--unshare-all", "--die-with-parent",
                                   "--new-session", "--hostname",    "faultline-build",
                                   "--ro-bind",     "/usr",          "/usr"};
  for (const char* link : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    const std::string host = absl::StrCat("/", link);
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[256] = "";
      const ssize_t n = ::readlink(host.c_str(), target, sizeof target - 1);
      if (n > 0) args.insert(args.end(), {"--symlink", std::string(target, n), host});
    } else {
      args.insert(args.end(), {"--ro-bind", host, host});
    }
  }
  // What the dynamic linker and Debian's alternatives (awk, cc) need of /etc; nothing else.
  for (const char* etc : {"/etc/ld.so.cache", "/etc/alternatives"}) {
    if (::access(etc, F_OK) == 0) args.insert(args.end(), {"--ro-bind", etc, etc});
  }
  args.insert(args.end(),
              {"--proc", "/proc", "--dev", "/dev", "--size", "67108864", "--tmpfs", "/tmp"});
  for (const SandboxMount& m : mounts) {
    args.insert(args.end(), {m.writable ? "--bind" : "--ro-bind", m.source, m.dest});
  }
  if (!command.cwd.empty()) args.insert(args.end(), {"--chdir", command.cwd});
  args.insert(args.end(), {"--clearenv", "--setenv", "PATH", kPath, "--setenv", "HOME", "/scratch",
                           "--setenv", "TMPDIR", "/scratch"});
  for (const auto& [k, v] : command.env) args.insert(args.end(), {"--setenv", k, v});
  args.emplace_back("--");
  args.insert(args.end(), command.argv.begin(), command.argv.end());

  return args;
}

}  // namespace

absl::Status Reachable(const std::string& path, uid_t uid) {
  std::string at;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    at = absl::StrCat(at, "/", part);
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("sandbox: ", at, ": ", std::strerror(errno)));
    }
    if (S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0 && st.st_uid != uid) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "sandbox: its uid %d cannot pass %s (mode %04o) to reach %s: let it through "
          "(chmod o+x) or keep the cache and trees elsewhere",
          uid, at, st.st_mode & 07777, path));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SandboxMode> ParseSandboxMode(const std::string& text) {
  if (text == "auto") return SandboxMode::kAuto;
  if (text == "required") return SandboxMode::kRequired;
  if (text == "none-i-trust-every-series") return SandboxMode::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("build sandbox: '", text,
                   "' is not auto, required or none-i-trust-every-series (the opt-out, by name)"));
}

const char* SandboxModeName(SandboxMode mode) {
  switch (mode) {
    case SandboxMode::kAuto:
      return "auto";
    case SandboxMode::kRequired:
      return "required";
    case SandboxMode::kNone:
      return "none-i-trust-every-series";
  }
  return "auto";
}

std::vector<std::pair<std::string, std::string>> KbuildEnvironment() {
  // Reproducible (Documentation/kbuild/reproducible-builds.rst): the same key gives the
  // same image, whichever cache or object directory builds it and however often. Without
  // KBUILD_BUILD_VERSION the version string counts the links of the object directory
  // (`#1`, `#2`, ...: the second label of a pair links there too). Source paths: kbuild
  // maps __FILE__ itself (-fmacro-prefix-map), and the boot image has no debug info.
  return {{"KBUILD_BUILD_VERSION", "1"},
          {"KBUILD_BUILD_TIMESTAMP", "@0"},
          {"KBUILD_BUILD_USER", "faultline"},
          {"KBUILD_BUILD_HOST", "faultline"},
          {"LC_ALL", "C"}};
}

Sandbox::Sandbox(SandboxOptions options) : options_(std::move(options)) {}

absl::Status Sandbox::Own(const std::string& dir) const {
  std::error_code ec;
  const uid_t uid = options_.uid;
  auto own = [&](const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && st.st_uid == uid && st.st_gid == uid) return true;
    return ::lchown(path.c_str(), uid, uid) == 0;
  };
  if (!own(dir))
    return absl::InternalError(absl::StrCat("chown ", dir, ": ", std::strerror(errno)));
  auto it = fs::recursive_directory_iterator(dir, ec);
  while (!ec && it != fs::end(it)) {
    if (!own(it->path().string())) {
      return absl::InternalError(
          absl::StrCat("chown ", it->path().string(), ": ", std::strerror(errno)));
    }
    it.increment(ec);
  }

  if (ec) return absl::InternalError(absl::StrCat("cannot walk ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

void Sandbox::RemoveStaleCgroups() const {
  std::vector<std::string> parents = {options_.cgroup_root + "/faultline"};
  for (const char* h : {"memory", "pids", "cpu"}) {
    parents.push_back(absl::StrCat(options_.cgroup_root, "/", h, "/faultline"));
  }
  for (const std::string& parent : parents) {
    DIR* d = ::opendir(parent.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> stale;
    while (struct dirent* e = ::readdir(d)) {
      absl::string_view name = e->d_name;
      if (!absl::ConsumePrefix(&name, "build-")) continue;
      int pid = 0;
      if (!absl::SimpleAtoi(name.substr(0, name.find('-')), &pid) || pid <= 0) continue;
      if (::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(parent + "/" + e->d_name);
    }
    ::closedir(d);
    for (const std::string& dir : stale) {
      for (absl::string_view pid : absl::StrSplit(ReadSmall(dir + "/cgroup.procs"), '\n')) {
        int p = 0;
        if (absl::SimpleAtoi(pid, &p) && p > 0) ::kill(p, SIGKILL);
      }
      ::rmdir(dir.c_str());
    }
  }
}

absl::Status Sandbox::Available() {
  if (probed_) return available_;
  probed_ = true;
  if (options_.mode == SandboxMode::kNone) {
    available_ = absl::FailedPreconditionError(
        "the operator turned the build sandbox off (none-i-trust-every-series)");
    return available_;
  }
  if (Which(options_.bwrap).empty()) {
    available_ = absl::FailedPreconditionError(
        absl::StrCat("no ", options_.bwrap, " in PATH (Debian: apt install bubblewrap)"));
    return available_;
  }
  char tmpl[] = "/tmp/faultline-sandbox-probe-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    available_ = absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
    return available_;
  }
  const std::string scratch = tmpl;
  absl::Status owned = Own(scratch);
  SandboxCommand probe;
  probe.command.argv = {"true"};
  probe.command.cwd = "/";
  probe.scratch = scratch;
  absl::StatusOr<Finished> ran = owned.ok() ? Run(probe) : absl::StatusOr<Finished>(owned);
  std::error_code ec;
  fs::remove_all(scratch, ec);
  if (!ran.ok()) {
    available_ = ran.status();
  } else if (ran->exit_code != 0) {
    available_ = absl::FailedPreconditionError(absl::StrCat(
        "bwrap cannot start a sandbox here (user namespaces off? kernel.unprivileged_userns_clone,"
        " user.max_user_namespaces): ",
        absl::StripAsciiWhitespace(ran->output.substr(0, 400))));
  } else {
    available_ = absl::OkStatus();
  }
  return available_;
}

absl::StatusOr<std::vector<SandboxMount>> Sandbox::Mounts(const SandboxCommand& run) const {
  // Parents first; the sandbox's uid must reach each source by its path (bwrap binds as it).
  std::vector<SandboxMount> mounts = run.mounts;
  for (const std::string& extra : options_.extra_writable) mounts.push_back({extra, "", true});
  for (const std::string& extra : options_.extra_readonly) mounts.push_back({extra, "", false});
  mounts.push_back({run.scratch, "/scratch", true});
  for (SandboxMount& m : mounts) {
    if (m.dest.empty()) m.dest = m.source;
  }
  std::stable_sort(mounts.begin(), mounts.end(), [](const SandboxMount& a, const SandboxMount& b) {
    return a.dest.size() < b.dest.size();
  });
  for (const SandboxMount& m : mounts) {
    if (absl::Status s = Reachable(m.source, options_.uid); !s.ok()) return s;
  }
  return mounts;
}

absl::StatusOr<Finished> Sandbox::Run(const SandboxCommand& run) {
  const Command& command = run.command;
  if (command.argv.empty()) return absl::InvalidArgumentError("empty command");
  const std::string bwrap = Which(options_.bwrap);
  if (bwrap.empty()) return absl::FailedPreconditionError("no bwrap in PATH");
  const SandboxLimits& limits = options_.limits;

  absl::StatusOr<std::vector<SandboxMount>> mounts = Mounts(run);
  if (!mounts.ok()) return mounts.status();
  auto close_all = [](const std::vector<int>& fds) {
    std::for_each(fds.begin(), fds.end(), ::close);
  };
  Command inside = command;
  for (const std::string& name : options_.pass_env) {
    if (const char* value = ::getenv(name.c_str())) inside.env.emplace_back(name, value);
  }
  std::vector<std::string> args = BwrapArgs(bwrap, *mounts, inside);

  // Output: a pipe read here, into the log (capped) or a capture file.
  int out_fd = -1;
  if (command.output_file.empty()) {
    char tmpl[] = "/tmp/faultline-sandbox-out-XXXXXX";
    out_fd = ::mkostemp(tmpl, O_CLOEXEC);  // not inherited by other lanes' children
    if (out_fd >= 0) ::unlink(tmpl);
  } else {
    out_fd = ::open(command.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  if (out_fd < 0) {
    return absl::InternalError(
        absl::StrCat("sandbox: cannot open its output: ", std::strerror(errno)));
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(out_fd);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }

  BuildCgroup cgroup(options_.cgroup_root, limits);
  const std::vector<int> procs_fds = cgroup.OpenProcs();

  // The child only calls async-signal-safe functions (the builder is multi-threaded).
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = absl::StrCat("PATH=", kPath);
  char* envp[] = {path_env.data(), nullptr};
  const uid_t uid = options_.uid;
  const rlimit fsize{limits.file_bytes, limits.file_bytes};
  const rlimit no_core{0, 0};
  const int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  const pid_t pid = ::fork();
  if (pid < 0) {
    close_all(procs_fds);
    ::close(out_fd);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::close(dev_null);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    for (int fd : procs_fds) {
      if (::write(fd, "0", 1) != 1) ::_exit(125);
    }
    ::setsid();
    ::setrlimit(RLIMIT_FSIZE, &fsize);
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (::dup2(dev_null, 0) < 0 || ::dup2(pipe_fds[1], 1) < 0 || ::dup2(pipe_fds[1], 2) < 0) {
      ::_exit(125);
    }
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      ::_exit(125);
    }
    // After the uid change (which clears it): the builder's death kills the sandbox.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp);
    ::_exit(127);
  }
  close_all(procs_fds);
  ::close(pipe_fds[1]);
  ::close(dev_null);

  // The program's output, the wall clock and the slot's disk, watched until it ends.
  Finished finished;
  CappedLog log(out_fd, limits.log_bytes);
  const std::chrono::seconds wall =
      run.wall.count() > 0 ? std::min(run.wall, limits.wall) : limits.wall;
  const auto deadline = std::chrono::steady_clock::now() + wall;
  std::string disk_path = run.scratch;
  for (const SandboxMount& m : *mounts) {
    if (m.writable && m.dest != "/scratch") disk_path = m.source;
  }
  auto stop = [&](const std::string& why) {
    if (finished.stopped.empty()) finished.stopped = why;
    ::kill(pid, SIGKILL);
    cgroup.KillAndRemove();
  };
  char buffer[65536];
  while (true) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, 500);
    if (ready > 0) {
      const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (n == 0) break;
      if (n > 0 && !log.Write(buffer, static_cast<size_t>(n))) {
        stop(absl::StrCat("the log limit (", limits.log_bytes >> 20, " MiB of output)"));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop(absl::StrCat("the wall-time limit (", wall.count(), " s)"));
    }
    struct statvfs vfs {};
    if (::statvfs(disk_path.c_str(), &vfs) == 0 &&
        static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize < limits.disk_reserve_bytes) {
      stop(absl::StrCat("the disk reserve (", limits.disk_reserve_bytes >> 20,
                        " MiB must stay free)"));
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  finished.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (finished.stopped.empty()) finished.stopped = cgroup.LimitHit(limits);
  // RLIMIT_FSIZE: the writer got SIGXFSZ, and make (its parent) says so.
  if (finished.stopped.empty() &&
      (finished.exit_code == 128 + SIGXFSZ ||
       (finished.exit_code != 0 && absl::StrContains(log.tail(), "File size limit exceeded")))) {
    finished.stopped = absl::StrCat("the file size limit (", limits.file_bytes >> 20, " MiB)");
  }
  cgroup.KillAndRemove();  // what outlived the program (its pid namespace ended too)
  if (command.output_file.empty()) {
    ::lseek(out_fd, 0, SEEK_SET);
    ssize_t n = 0;
    while ((n = ::read(out_fd, buffer, sizeof buffer)) > 0) finished.output.append(buffer, n);
  }
  ::close(out_fd);
  if (finished.exit_code == 125 && finished.output.empty()) {
    return absl::InternalError("sandbox: the child could not join its cgroup or drop to its uid");
  }
  return finished;
}

}  // namespace faultline::kbuild
