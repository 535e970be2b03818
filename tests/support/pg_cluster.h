#pragma once
// A throwaway PostgreSQL cluster for integration tests: started once per test binary by
// scripts/pg-throwaway.sh (initdb into a temp dir, its own free port), stopped at exit.
#include <string>

namespace faultline::testing {

// The URL of the cluster, starting it on first use. Empty when it could not be started,
// with the reason in PgSkipReason(). PostgresInstalled() tells which case that is: not
// installed (the machine lacks it: skip) or installed but our start failed (a bug: fail).
const std::string& PgUrl();
const std::string& PgSkipReason();
bool PostgresInstalled();

// In SetUp() or a test body: skips without PostgreSQL, fails when starting it failed.
#define FAULTLINE_REQUIRE_PG()                              \
  do {                                                      \
    if (::faultline::testing::PgUrl().empty()) {            \
      if (::faultline::testing::PostgresInstalled()) {      \
        FAIL() << ::faultline::testing::PgSkipReason();     \
      }                                                     \
      GTEST_SKIP() << ::faultline::testing::PgSkipReason(); \
    }                                                       \
  } while (0)

// A database outage: stops the cluster (fast shutdown) / starts it again on its port.
void HaltCluster();
void ResumeCluster();

// Creates a fresh database on the cluster and returns its URL, so tests do not share state.
std::string FreshDatabase(const std::string& name);

}  // namespace faultline::testing
