#pragma once
// Files of throughput samples for `faultline compare`: one number per line (rounds per
// second; an optional " /s" suffix as the seeds print them), '#' starts a comment, blank
// lines are ignored. Errors name the file and line: "a.txt:3: 'abc' is not a number".
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace faultline::cli {

absl::StatusOr<std::vector<double>> ParseSamples(std::string_view text, std::string_view name);
absl::StatusOr<std::vector<double>> LoadSamplesFile(const std::string& path);

}  // namespace faultline::cli
