#pragma once
// Inside spec/: a job spec's `kernels` written as a map from label to where the kernel
// comes from (spec_file.h), into JobSpec.kernels and JobSpec.kernel_sources, the files it
// names (config fragments, series) read within faultline/v1/limits.h.
#include <yaml-cpp/yaml.h>

#include <string>

#include "absl/status/status.h"
#include "faultline/v1/job.pb.h"
#include "spec/yaml_node.h"

namespace faultline::spec::yaml {

// `kernels` as a map: label -> source (a map), `installed` or nothing (a kernel the boards
// have). The labels go into spec->kernels in file order.
absl::Status FillKernels(const Context& context, const YAML::Node& value, v1::JobSpec* spec,
                         const std::string& path, const YAML::Mark& fallback);

}  // namespace faultline::spec::yaml
