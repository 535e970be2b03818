#include "kbuild/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace faultline::kbuild {
namespace {

std::vector<std::string> Environment(const std::vector<std::pair<std::string, std::string>>& add) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : add) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

absl::StatusOr<Finished> Run(const Command& command) {
  if (command.argv.empty()) return absl::InvalidArgumentError("empty command");
  std::string capture_path;
  int out_fd = -1;
  if (command.output_file.empty()) {
    char tmpl[] = "/tmp/faultline-kbuild-out-XXXXXX";
    out_fd = ::mkostemp(tmpl, O_CLOEXEC);  // not inherited by other lanes' children
    if (out_fd < 0) return absl::InternalError(absl::StrCat("mkstemp: ", std::strerror(errno)));
    capture_path = tmpl;
    ::unlink(tmpl);
  } else {
    out_fd = ::open(command.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      return absl::InternalError(
          absl::StrCat("cannot open ", command.output_file, ": ", std::strerror(errno)));
    }
  }
  // The input, when there is one, from an anonymous file: no pipe to feed while the output
  // is read, no file left behind.
  int in_fd = -1;
  if (!command.input.empty()) {
    in_fd = ::memfd_create("faultline-input", MFD_CLOEXEC);
    size_t written = 0;
    while (in_fd >= 0 && written < command.input.size()) {
      const ssize_t n =
          ::write(in_fd, command.input.data() + written, command.input.size() - written);
      if (n <= 0) break;
      written += static_cast<size_t>(n);
    }
    if (in_fd < 0 || written != command.input.size() || ::lseek(in_fd, 0, SEEK_SET) != 0) {
      const std::string error = std::strerror(errno);
      if (in_fd >= 0) ::close(in_fd);
      ::close(out_fd);
      return absl::InternalError(
          absl::StrCat("cannot hold the input of ", command.argv[0], ": ", error));
    }
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (in_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 2);
  if (!command.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, command.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> args = command.argv;
  std::vector<std::string> env = Environment(command.env);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (in_fd >= 0) ::close(in_fd);
  if (rc != 0) {
    ::close(out_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", command.argv[0], ": ", std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  Finished finished;
  finished.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (command.output_file.empty()) {
    ::lseek(out_fd, 0, SEEK_SET);
    char buffer[65536];
    ssize_t n = 0;
    while ((n = ::read(out_fd, buffer, sizeof buffer)) > 0) finished.output.append(buffer, n);
  }
  ::close(out_fd);
  return finished;
}

absl::StatusOr<std::string> RunForOutput(const Command& command) {
  absl::StatusOr<Finished> finished = Run(command);
  if (!finished.ok()) return finished.status();
  if (finished->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat("`", absl::StrJoin(command.argv, " "),
                                                      "` exited with ", finished->exit_code, ": ",
                                                      Tail(finished->output, 8)));
  }
  return std::move(finished->output);
}

std::string Tail(const std::string& text, int lines) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  size_t pos = end;
  int breaks = 0;
  while (pos > 0) {
    if (text[pos - 1] == '\n' && ++breaks == lines) break;
    --pos;
  }
  return text.substr(pos, end - pos);
}

std::string TailFile(const std::string& path, int lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > 65536 ? size - 65536 : 0;
  in.seekg(from);
  std::ostringstream text;
  text << in.rdbuf();
  return Tail(text.str(), lines);
}

}  // namespace faultline::kbuild
