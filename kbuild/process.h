#pragma once
// Running the tools a kernel build needs (git, make, the compiler) as child processes:
// argv (looked up in PATH), a working directory, extra environment, output to a file.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace faultline::kbuild {

struct Command {
  std::vector<std::string> argv;
  std::string cwd;                                       // "" : this process's
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) ours
  std::string output_file;  // stdout+stderr appended here; "" : captured into `output`
  std::string input;        // the child's stdin ("" : /dev/null)
};

struct Finished {
  int exit_code = 0;    // 128 + signal when killed
  std::string output;   // when Command::output_file is ""
  std::string stopped;  // sandboxed: why the sandbox stopped it (a limit), "" otherwise
};

// Runs `command` to its end. An error only when it could not be started.
absl::StatusOr<Finished> Run(const Command& command);

// Runs `command` and returns its output; a non-zero exit is FAILED_PRECONDITION naming the
// command, its exit code and the output's last lines.
absl::StatusOr<std::string> RunForOutput(const Command& command);

// The last `lines` lines of `text` (for error messages and log tails).
std::string Tail(const std::string& text, int lines);
// The last `lines` lines of the file at `path` ("" when it cannot be read).
std::string TailFile(const std::string& path, int lines);

}  // namespace faultline::kbuild
