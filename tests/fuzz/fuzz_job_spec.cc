// libFuzzer: a job spec from the network or a file, through parsing and validation.
// The first byte picks the encoding: even = YAML text (the CLI's spec file loader), odd =
// protobuf bytes (what SubmitJob receives). Either way the spec goes through the
// controller's conversion and validation against a small fleet; an accepted job must
// respect the limits validation promises.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "services/controller/convert/convert.h"
#include "services/controller/core/validation.h"
#include "spec/spec_file.h"

using namespace faultline;

namespace {
// FAULTLINE_FUZZ_YAML=0 (fuzz.sh --no-yaml) skips the YAML half, for a campaign on what
// reaches the controller over the network (protobuf) alone: yaml-cpp 0.7 has pathological
// inputs of its own (two found and guarded against in spec_file.cc's prescan), and YAML
// only ever comes from the user's own files. The bounded CI run (fuzz_smoke) fuzzes both.
bool FuzzYaml() {
  static const bool yaml = [] {
    const char* env = std::getenv("FAULTLINE_FUZZ_YAML");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return yaml;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 16)) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  v1::JobSpec spec;
  if (data[0] % 2 == 0) {
    if (!FuzzYaml()) return 0;
    auto parsed = spec::LoadJobSpecFromString(rest, "fuzz.yaml");
    if (!parsed.ok()) return 0;
    spec = *parsed;
  } else if (!spec.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) {
    return 0;
  }
  static const std::vector<controller::BoardSummary> fleet = {
      {.name = "x86-01",
       .arch = "x86_64",
       .memory_bytes = 24ull << 30,
       .kernel_labels = {"vanilla", "patched"},
       .running_kernel_label = "vanilla",
       .running_kernel_labels = {"vanilla"},
       .bootable_kernel_labels = {"patched"}},
      {.name = "arm-01",
       .arch = "aarch64",
       .memory_bytes = 8ull << 30,
       .kernel_labels = {"vanilla"},
       .running_kernel_label = "vanilla",
       .running_kernel_labels = {"vanilla"}},
  };
  auto input = controller::SpecFromProto(spec);
  if (!input.ok()) {
    if (input.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  auto job = controller::ValidateJobSpec(*input, fleet);
  if (!job.ok()) {
    if (job.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  const controller::SpecLimits limits;
  if (job->runs.empty() || job->runs.size() > limits.max_runs) std::abort();
  for (size_t i = 0; i < job->runs.size(); ++i) {
    if (job->runs[i].sequence != static_cast<int>(i)) std::abort();  // claim order is dense
  }
  return 0;
}
