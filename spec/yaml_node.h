#pragma once
// Inside spec/: what a YAML node is and where, and errors that say so
// ("<display name>:<line>:<column>: <field path>: <problem>"), for the loaders of
// spec_file.h. Not for use outside spec/.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace faultline::spec::yaml {

// "null", "a scalar", "a sequence", "a map" (or "nothing").
std::string_view KindName(const YAML::Node& node);
// What a node is, for "expected X, got Y" messages: a scalar quoted, else its kind.
std::string Describe(const YAML::Node& node);
// "kernels" + "patched" -> "kernels.patched" ("" + child -> child).
std::string JoinPath(std::string_view parent, std::string_view child);
// The node's place, or `fallback` for a node without one.
YAML::Mark MarkOf(const YAML::Node& node, const YAML::Mark& fallback);

// The text being loaded: its name in messages, and where files it names are.
class Context {
 public:
  // `base_dir`: where files named by relative paths in the spec are ("": the current
  // directory).
  explicit Context(std::string_view display_name, std::filesystem::path base_dir = {})
      : display_name_(display_name), base_dir_(std::move(base_dir)) {}

  absl::Status Error(const YAML::Mark& mark, std::string_view path, std::string_view problem) const;
  // A scalar's text; anything else is an error.
  absl::Status ScalarText(const YAML::Node& node, const std::string& path, const YAML::Mark& mark,
                          std::string* out) const;
  // A sequence of scalars (with where each is).
  absl::Status ScalarList(const YAML::Node& node, const std::string& path, const YAML::Mark& mark,
                          std::vector<std::pair<std::string, YAML::Mark>>* out) const;
  const std::filesystem::path& base_dir() const { return base_dir_; }

 private:
  std::string display_name_;
  std::filesystem::path base_dir_;
};

}  // namespace faultline::spec::yaml
