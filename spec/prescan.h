#pragma once
// Inside spec/: text refused before yaml-cpp sees it (see prescan.cc).
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>

namespace faultline::spec::yaml {

struct PrescanError {
  YAML::Mark mark;
  std::string message;
};

// Bytes that are not UTF-8, control characters, flow collections nested deeper than 32, a
// '{' or '[' never closed: the first such place, or nothing.
std::optional<PrescanError> PrescanYaml(std::string_view text);

}  // namespace faultline::spec::yaml
