#pragma once
// A throwaway PostgreSQL cluster for integration tests: started once per test binary by
// scripts/pg-throwaway.sh (initdb into a temp dir, its own free port), stopped at exit.
#include <string>

namespace faultline::testing {

// The URL of the cluster, starting it on first use. Empty when PostgreSQL is not installed
// (tests then GTEST_SKIP with the reason from PgSkipReason()).
const std::string& PgUrl();
const std::string& PgSkipReason();

// A database outage: stops the cluster (fast shutdown) / starts it again on its port.
void HaltCluster();
void ResumeCluster();

// Creates a fresh database on the cluster and returns its URL, so tests do not share state.
std::string FreshDatabase(const std::string& name);

}  // namespace faultline::testing
