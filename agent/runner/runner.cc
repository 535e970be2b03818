#include "agent/runner/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/sys/file_io.h"
#include "agent/sys/unique_fd.h"
#include "agent/sys/vmstat.h"
#include "common/benchmarks.h"
#include "common/units.h"

extern char** environ;

namespace faultline::runner {
namespace {

using sys::UniqueFd;
using Clock = std::chrono::steady_clock;

constexpr int kProgressFdInChild = 3;
constexpr size_t kStderrTailBytes = 4096;
// The result is one small JSON object; anything near this is a runaway child.
constexpr size_t kMaxStdoutBytes = 16 << 20;
// How often the wait loop looks at the cancel flag when the child is quiet.
constexpr int kPollTickMilliseconds = 50;
// Child-side descriptors are moved above this before fork, so the dup2()s onto 0..3 in
// the child can never overwrite one another.
constexpr int kFirstHighFd = 10;

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

bool MakePipe(Pipe* pipe, std::string* error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  pipe->read.Reset(fds[0]);
  pipe->write.Reset(fds[1]);
  return true;
}

bool MoveHigh(UniqueFd* fd, std::string* error) {
  int high = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, kFirstHighFd);
  if (high < 0) {
    *error = std::string("fcntl(F_DUPFD_CLOEXEC): ") + std::strerror(errno);
    return false;
  }
  fd->Reset(high);
  return true;
}

void SetNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Everything the forked child does before exec. Only async-signal-safe calls: the agent
// is multi-threaded, and after fork() only this thread exists in the child.
[[noreturn]] void ExecChild(pid_t agent_pid, int procs_fd, int stdin_fd, int stdout_fd,
                            int stderr_fd, int progress_fd, int exec_error_fd, char* const* argv) {
  auto fail = [exec_error_fd](int error_number) {
    ssize_t ignored = ::write(exec_error_fd, &error_number, sizeof(error_number));
    (void)ignored;
    ::_exit(127);
  };
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP}) ::signal(sig, SIG_DFL);
  // Own process group: a terminal's Ctrl-C aimed at the agent does not hit the run directly.
  ::setpgid(0, 0);
  // The run must not outlive the agent. PDEATHSIG follows the forking *thread*; that is
  // fine because RunWorkload keeps this thread busy until the child is reaped.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != agent_pid) ::_exit(127);
  if (!sys::WriteSelfToCgroupProcs(procs_fd)) fail(errno);
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(stderr_fd, 2) < 0 ||
      ::dup2(progress_fd, kProgressFdInChild) < 0) {
    fail(errno);
  }
  ::execve(argv[0], argv, environ);
  fail(errno);
  ::_exit(127);
}

// Reads what is available; returns false at EOF or on a hard error.
bool ReadSome(int fd, std::string* into) {
  char buffer[16384];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      into->append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

class ProgressLines {
 public:
  ProgressLines(const std::function<void(const WorkloadProgress&)>& callback,
                Clock::time_point start)
      : callback_(callback), start_(start) {}
  void Feed(const std::string& chunk) {
    buffer_ += chunk;
    size_t eol;
    while ((eol = buffer_.find('\n')) != std::string::npos) {
      auto progress = ParseProgressLine(std::string_view(buffer_).substr(0, eol));
      buffer_.erase(0, eol + 1);
      if (progress && callback_) {
        progress->elapsed_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        callback_(*progress);
      }
    }
  }

 private:
  const std::function<void(const WorkloadProgress&)>& callback_;
  Clock::time_point start_;
  std::string buffer_;
};

uint64_t SystemOomKills() {
  auto vmstat = sys::ReadVmstat();
  if (!vmstat) return 0;
  auto it = vmstat->find("oom_kill");
  return it == vmstat->end() ? 0 : it->second;
}

WorkloadOutcome SetupFailure(std::string reason) {
  WorkloadOutcome outcome;
  outcome.failure_reason = std::move(reason);
  return outcome;
}

}  // namespace

std::string LastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  size_t start = text.rfind('\n');
  return std::string(start == std::string_view::npos ? text : text.substr(start + 1));
}

std::vector<std::string> BuildWorkloadArgv(const WorkloadInvocation& invocation) {
  std::vector<std::string> argv = {invocation.workload_binary, invocation.benchmark};
  for (const auto& [knob, value] : invocation.params) {
    argv.push_back("--" + knob);
    argv.push_back(value);
  }
  argv.push_back("--duration");
  argv.push_back(std::to_string(invocation.duration_seconds) + "s");
  if (!invocation.work_dir.empty()) {
    argv.push_back("--dir");
    argv.push_back(invocation.work_dir);
  }
  if (!invocation.run_options.empty() && invocation.run_options != "{}") {
    argv.push_back("--run-options");
    argv.push_back(invocation.run_options);
  }
  argv.push_back("--progress-fd");
  argv.push_back(std::to_string(kProgressFdInChild));
  // The run cgroup already carries the limits: a preset must not make the child nest its own.
  argv.push_back("--inherit-cgroup");
  return argv;
}

std::optional<WorkloadProgress> ParseProgressLine(std::string_view line) {
  WorkloadProgress progress;
  bool has_phase = false;
  while (!line.empty()) {
    size_t space = line.find(' ');
    std::string_view field = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = field.substr(0, eq);
    std::string_view value = field.substr(eq + 1);
    if (key == "phase") {
      if (value == "started") {
        progress.phase = WorkloadProgress::Phase::kStarted;
      } else if (value == "measuring") {
        progress.phase = WorkloadProgress::Phase::kMeasuring;
      } else {
        return std::nullopt;
      }
      has_phase = true;
    } else if (key == "second") {
      auto v = ParseUnsigned(value);
      if (!v) return std::nullopt;
      progress.second = static_cast<uint32_t>(*v);
    } else if (key == "rounds") {
      auto v = ParseUnsigned(value);
      if (!v) return std::nullopt;
      progress.rounds = *v;
    }
  }
  if (!has_phase) return std::nullopt;
  return progress;
}

Verdict ClassifyChildOutcome(const ChildObservations& observed) {
  if (observed.exited && observed.exit_code == 0 && !observed.cancel_requested) {
    if (observed.stdout_text.find('{') != std::string::npos) return {true, ""};
    return {false, "exit code 0 without a result on stdout"};
  }
  // The workload is the only process in its cgroup, so a memcg OOM kill was of it. Without
  // memcg evidence, an unexplained SIGKILL while the system OOM killer fired counts too.
  if (observed.memcg_oom_kills > 0) return {false, "oom_killed"};
  if (!observed.exited && observed.signal == SIGKILL && !observed.we_sent_sigkill &&
      observed.system_oom_kills_during_run > 0) {
    return {false, "oom_killed"};
  }
  if (observed.cancel_requested) return {false, "cancelled"};
  if (observed.timed_out) return {false, "timeout"};
  if (observed.exited) {
    std::string reason = "exit code " + std::to_string(observed.exit_code);
    std::string line = LastLine(observed.stderr_tail);
    // The workload prefixes its messages with its name; the reason reads better without.
    constexpr std::string_view kPrefix = "faultline-workload: ";
    if (line.rfind(kPrefix, 0) == 0) line.erase(0, kPrefix.size());
    if (!line.empty()) reason += ": " + line;
    return {false, reason};
  }
  return {false, "killed by signal " + std::to_string(observed.signal)};
}

namespace {

// EOF on the exec-error pipe means exec succeeded (the pipe is close-on-exec); an int is
// the errno otherwise.
bool ExecFailed(int fd, int* exec_errno) {
  ssize_t n;
  do {
    n = ::read(fd, exec_errno, sizeof(*exec_errno));
  } while (n < 0 && errno == EINTR);
  return n == sizeof(*exec_errno);
}

void RecordExit(int status, ChildObservations* observed) {
  if (WIFEXITED(status)) {
    observed->exited = true;
    observed->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    observed->signal = WTERMSIG(status);
  }
}

}  // namespace

WorkloadOutcome RunWorkload(const WorkloadInvocation& invocation) {
  // Validate against the catalogue first: a bad param fails here, with no cgroup or fork.
  const BenchmarkSpec* spec = FindBenchmark(invocation.benchmark);
  if (spec == nullptr) return SetupFailure("unknown benchmark " + invocation.benchmark);
  std::string knob, why;
  auto knobs = ResolveKnobs(*spec, invocation.params, &knob, &why);
  if (!knobs) return SetupFailure("invalid params: " + knob + ": " + why);
  if (invocation.duration_seconds == 0) return SetupFailure("invalid params: duration is 0");
  const auto time_limit = invocation.warmup + std::chrono::seconds(invocation.duration_seconds) +
                          std::chrono::seconds(invocation.grace_seconds);

  if (invocation.cancel != nullptr && invocation.cancel->load()) return SetupFailure("cancelled");

  std::string error;
  auto cgroup = sys::MemoryCgroup::Create(
      invocation.cgroup_backend, sys::RunCgroupName(invocation.run_id), invocation.limits, &error);
  if (!cgroup) return SetupFailure("cgroup: " + error);
  WorkloadOutcome outcome;
  outcome.applied_limits = cgroup->AppliedLimits();

  // Everything the child needs is prepared before fork(): it may not allocate afterwards.
  UniqueFd procs = cgroup->OpenProcsForWriting(&error);
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  Pipe out, err, progress, exec_error;
  if (!procs || !dev_null || !MakePipe(&out, &error) || !MakePipe(&err, &error) ||
      !MakePipe(&progress, &error) || !MakePipe(&exec_error, &error) || !MoveHigh(&procs, &error) ||
      !MoveHigh(&dev_null, &error) || !MoveHigh(&out.write, &error) ||
      !MoveHigh(&err.write, &error) || !MoveHigh(&progress.write, &error) ||
      !MoveHigh(&exec_error.write, &error)) {
    outcome.failure_reason =
        "setup: " + (error.empty() ? std::string(std::strerror(errno)) : error);
    if (!cgroup->Destroy(&error)) outcome.cleanup_error = error;
    return outcome;
  }
  std::vector<std::string> args = BuildWorkloadArgv(invocation);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const uint64_t oom_kills_before = SystemOomKills();
  const pid_t agent_pid = ::getpid();
  const Clock::time_point start = Clock::now();
  const pid_t child = ::fork();
  if (child < 0) {
    outcome.failure_reason = std::string("fork: ") + std::strerror(errno);
    if (!cgroup->Destroy(&error)) outcome.cleanup_error = error;
    return outcome;
  }
  if (child == 0) {
    ExecChild(agent_pid, procs.get(), dev_null.get(), out.write.get(), err.write.get(),
              progress.write.get(), exec_error.write.get(), argv.data());
  }
  procs.Reset();
  dev_null.Reset();
  out.write.Reset();
  err.write.Reset();
  progress.write.Reset();
  exec_error.write.Reset();

  int exec_errno = 0;
  const bool exec_failed = ExecFailed(exec_error.read.get(), &exec_errno);

  SetNonBlocking(out.read.get());
  SetNonBlocking(err.read.get());
  SetNonBlocking(progress.read.get());
  ProgressLines progress_lines(invocation.on_progress, start);
  std::string stderr_text;
  ChildObservations observed;
  std::optional<Clock::time_point> term_sent_at;
  int status = 0;
  bool out_open = true, err_open = true, progress_open = true;
  bool stdout_overflow = false;

  auto drain = [&](bool* open, int fd, std::string* into) {
    if (*open && !ReadSome(fd, into)) *open = false;
  };
  auto drain_all = [&] {
    drain(&out_open, out.read.get(), &outcome.result_json);
    drain(&err_open, err.read.get(), &stderr_text);
    if (stderr_text.size() > 2 * kStderrTailBytes) {
      stderr_text.erase(0, stderr_text.size() - kStderrTailBytes);
    }
    std::string chunk;
    drain(&progress_open, progress.read.get(), &chunk);
    if (!chunk.empty()) progress_lines.Feed(chunk);
  };

  while (true) {  // until the child is reaped
    struct pollfd fds[3] = {{out_open ? out.read.get() : -1, POLLIN, 0},
                            {err_open ? err.read.get() : -1, POLLIN, 0},
                            {progress_open ? progress.read.get() : -1, POLLIN, 0}};
    ::poll(fds, 3, kPollTickMilliseconds);
    drain_all();
    if (outcome.result_json.size() > kMaxStdoutBytes && !stdout_overflow) {
      stdout_overflow = true;
      ::kill(child, SIGKILL);
      observed.we_sent_sigkill = true;
    }
    if (stdout_overflow) outcome.result_json.clear();
    if (::waitpid(child, &status, WNOHANG) == child) break;
    const Clock::time_point now = Clock::now();
    if (!term_sent_at) {
      if (invocation.cancel != nullptr && invocation.cancel->load()) {
        observed.cancel_requested = true;
      } else if (now - start >= time_limit) {
        observed.timed_out = true;
      }
      if (observed.cancel_requested || observed.timed_out) {
        ::kill(child, SIGTERM);
        term_sent_at = now;
      }
    } else if (!observed.we_sent_sigkill && now - *term_sent_at >= invocation.kill_after_term) {
      ::kill(child, SIGKILL);
      observed.we_sent_sigkill = true;
    }
  }
  drain_all();  // whatever the child wrote just before exiting

  RecordExit(status, &observed);
  if (auto events = cgroup->ReadEvents(&error)) {
    outcome.memcg_events = std::move(*events);
    auto it = outcome.memcg_events.find("oom_kill");
    if (it != outcome.memcg_events.end()) observed.memcg_oom_kills = it->second;
  }
  const uint64_t oom_kills_after = SystemOomKills();
  observed.system_oom_kills_during_run =
      oom_kills_after >= oom_kills_before ? oom_kills_after - oom_kills_before : 0;
  if (stderr_text.size() > kStderrTailBytes) {
    stderr_text.erase(0, stderr_text.size() - kStderrTailBytes);
  }
  outcome.stderr_tail = stderr_text;
  observed.stdout_text = outcome.result_json;
  observed.stderr_tail = stderr_text;

  if (exec_failed) {
    outcome.failure_reason =
        "exec " + invocation.workload_binary + ": " + std::strerror(exec_errno);
  } else if (stdout_overflow) {
    outcome.failure_reason = "more than " + FormatSize(kMaxStdoutBytes) + " on stdout";
  } else {
    Verdict verdict = ClassifyChildOutcome(observed);
    outcome.succeeded = verdict.succeeded;
    outcome.failure_reason = verdict.failure_reason;
  }
  if (!outcome.succeeded) outcome.result_json.clear();
  if (!cgroup->Destroy(&error)) outcome.cleanup_error = error;
  return outcome;
}

}  // namespace faultline::runner
