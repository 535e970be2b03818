#pragma once
// What a job may upload with its kernels (JobSpec.kernel_sources' config fragments and
// series): the controller refuses more, the CLI says so before sending. One definition
// beside the generated code, for every client of the API.
#include <cstdint>

namespace faultline::v1 {

inline constexpr uint64_t kMaxKernelFileBytes = 1 << 20;     // one fragment or mbox
inline constexpr uint64_t kMaxJobKernelFileBytes = 8 << 20;  // all files of a job together
inline constexpr int kMaxKernelFilesPerLabel = 32;           // one label's files

}  // namespace faultline::v1
