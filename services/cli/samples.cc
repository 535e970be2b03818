#include "services/cli/samples.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>

#include "absl/status/status.h"
#include "common/files.h"
#include "common/strings.h"

namespace faultline::cli {
namespace {}  // namespace

absl::StatusOr<std::vector<double>> ParseSamples(std::string_view text, std::string_view name) {
  std::vector<double> samples;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (const size_t hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    line = TrimSpace(line);
    if (line.empty()) continue;
    const std::string where = std::string(name) + ":" + std::to_string(line_no) + ": ";
    std::string_view number = line;
    if (number.ends_with("/s")) number = TrimSpace(number.substr(0, number.size() - 2));
    double value = 0;
    const char* end = number.data() + number.size();
    const auto [ptr, ec] = std::from_chars(number.data(), end, value);
    if (number.empty() || ec != std::errc() || ptr != end) {
      const bool has_space = number.find_first_of(" \t") != std::string_view::npos;
      return absl::InvalidArgumentError(where + "'" + std::string(line) + "' is not a number" +
                                        (has_space ? " (one number per line)" : ""));
    }
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(where + "'" + std::string(line) +
                                        "' is not a finite number");
    }
    if (value < 0) {
      return absl::InvalidArgumentError(where + "'" + std::string(line) +
                                        "' is negative (throughput)");
    }
    samples.push_back(value);
  }
  if (samples.empty()) return absl::InvalidArgumentError(std::string(name) + ": no samples");
  return samples;
}

absl::StatusOr<std::vector<double>> LoadSamplesFile(const std::string& path) {
  std::optional<std::string> text = ReadFileToString(path, nullptr);
  if (!text.has_value()) {
    return absl::NotFoundError(path + ": cannot read: " + std::strerror(errno));
  }
  return ParseSamples(*text, path);
}

}  // namespace faultline::cli
