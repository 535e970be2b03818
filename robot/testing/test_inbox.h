#pragma once
// For tests: a throwaway public-inbox v2 archive (public-inbox-init) that mails are delivered
// to as a list server does (public-inbox-mda), in a temporary directory removed at the end.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kbuild/process.h"

namespace faultline::robot::testing {

class TestInbox {
 public:
  // Why it cannot be made here ("" when public-inbox is installed).
  static std::string Missing() {
    auto found =
        kbuild::Run({.argv = {"sh", "-c", "command -v public-inbox-init public-inbox-mda"}});
    return found.ok() && found->exit_code == 0
               ? ""
               : "public-inbox is not installed (scripts/install-deps.sh test)";
  }

  // Creates it; check ::testing::Test::HasFatalFailure() after.
  void Create() {
    char tmpl[] = "/tmp/faultline-inbox-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_ = {{"HOME", dir_},
            {"PI_CONFIG", dir_ + "/config"},
            {"ORIGINAL_RECIPIENT", "linux-mm@kvack.org"}};
    Run({"public-inbox-init", "-V2", "-L", "basic", "mm", inbox(), "http://localhost/mm",
         "linux-mm@kvack.org"});
    Run({"git", "config", "-f", dir_ + "/config", "publicinboxmda.spamcheck", "none"});
  }
  ~TestInbox() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The file's mail, delivered to the list.
  void Deliver(const std::string& path) {
    Run({"sh", "-c", "public-inbox-mda --no-precheck < '" + path + "'"});
  }
  // Runs a command with the archive's environment; a failure fails the test.
  void Run(std::vector<std::string> argv) {
    auto done = kbuild::Run({.argv = std::move(argv), .env = env_});
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->exit_code, 0) << done->output;
  }

  std::string inbox() const { return dir_ + "/mm"; }
  const std::string& dir() const { return dir_; }
  // "K=V K=V ": the environment public-inbox-mda needs, for a shell command line.
  std::string EnvPrefix() const {
    std::string out;
    for (const auto& [k, v] : env_) out += k + "=" + v + " ";
    return out;
  }

 private:
  std::string dir_;
  std::vector<std::pair<std::string, std::string>> env_;
};

}  // namespace faultline::robot::testing
