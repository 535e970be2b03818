// main() for integration tests: like gtest_main, but a run in which some test skipped (the
// machine lacks a cgroup, swap, PostgreSQL...) and none failed exits with 77, which ctest's
// SKIP_RETURN_CODE reports as "Skipped", never as "Passed". The skipped tests and their
// reasons are printed by GoogleTest itself.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) return rc;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (unit.skipped_test_count() > 0) {
    std::fprintf(stderr, "%d test(s) skipped: reporting the run as skipped (exit 77)\n",
                 unit.skipped_test_count());
    return 77;
  }
  return 0;
}
