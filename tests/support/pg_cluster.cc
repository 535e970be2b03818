#include "tests/support/pg_cluster.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <pqxx/pqxx>

namespace faultline::testing {
namespace {

struct Cluster {
  std::string dir;
  std::string url;
  std::string skip_reason;

  Cluster() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "faultline-pg-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      skip_reason = "cannot create a temp dir";
      return;
    }
    dir = tmpl;
    std::string cmd =
        std::string(FAULTLINE_SOURCE_DIR) + "/scripts/pg-throwaway.sh start " + dir + " 2>&1";
    std::array<char, 512> buf{};
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    while (p && fgets(buf.data(), buf.size(), p)) out += buf.data();
    int rc = p ? pclose(p) : -1;
    if (rc != 0) {
      skip_reason = "could not start a throwaway PostgreSQL: " + out;
      return;
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    url = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  }
  ~Cluster() {
    if (dir.empty()) return;
    std::string cmd = std::string(FAULTLINE_SOURCE_DIR) + "/scripts/pg-throwaway.sh stop " + dir +
                      " >/dev/null 2>&1";
    (void)std::system(cmd.c_str());
  }
};

Cluster& Instance() {
  static Cluster cluster;  // destroyed at exit: the cluster is stopped and removed
  return cluster;
}

}  // namespace

static void RunScript(const std::string& verb) {
  std::string cmd = std::string(FAULTLINE_SOURCE_DIR) + "/scripts/pg-throwaway.sh " + verb + " " +
                    Instance().dir + " 2>&1";
  int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << cmd;
}

const std::string& PgUrl() {
  return Instance().url;
}
void HaltCluster() {
  RunScript("halt");
}
void ResumeCluster() {
  RunScript("resume");
}
const std::string& PgSkipReason() {
  return Instance().skip_reason;
}

bool PostgresInstalled() {
  std::error_code ec;
  for (const auto& version : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    if (std::filesystem::exists(version.path() / "bin" / "initdb")) return true;
  }
  return false;
}

std::string FreshDatabase(const std::string& name) {
  const std::string& url = PgUrl();
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  n.exec("DROP DATABASE IF EXISTS " + n.quote_name(name));
  n.exec("CREATE DATABASE " + n.quote_name(name));
  return url.substr(0, url.rfind('/') + 1) + name;
}

}  // namespace faultline::testing
