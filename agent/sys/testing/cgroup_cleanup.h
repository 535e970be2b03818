#pragma once
// Test-only: integration tests leave the shared <parent>/faultline directory behind after
// their run cgroups are gone; this removes it again when nothing else is inside.
#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/sys/cgroup.h"

namespace faultline::sys::testing {

class RemoveEmptyFaultlineCgroupParent : public ::testing::Environment {
 public:
  void TearDown() override {
    std::string ignored;
    if (auto backend = DetectCgroupBackend({}, &ignored)) {
      // rmdir fails (EBUSY/ENOTEMPTY) while any run cgroup still exists: that is the point.
      ::rmdir((backend->parent_dir + "/" + std::string(kFaultlineCgroupDirName)).c_str());
    }
  }
};

// Registers the cleanup from a test file: `FAULTLINE_REMOVE_EMPTY_CGROUP_PARENT_AT_EXIT();`
#define FAULTLINE_REMOVE_EMPTY_CGROUP_PARENT_AT_EXIT()                            \
  [[maybe_unused]] static ::testing::Environment* const kFaultlineCgroupCleanup = \
      ::testing::AddGlobalTestEnvironment(                                        \
          new ::faultline::sys::testing::RemoveEmptyFaultlineCgroupParent)

}  // namespace faultline::sys::testing
