#include "spec/yaml_node.h"

#include <sstream>

namespace faultline::spec::yaml {

std::string_view KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// What a node is, for "expected X, got Y" messages.
std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  return std::string(KindName(node));
}

std::string JoinPath(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  return std::string(parent) + "." + std::string(child);
}
YAML::Mark MarkOf(const YAML::Node& node, const YAML::Mark& fallback) {
  if (!node.IsDefined()) return fallback;
  YAML::Mark mark = node.Mark();
  return mark.is_null() ? fallback : mark;
}

absl::Status Context::Error(const YAML::Mark& mark, std::string_view path,
                            std::string_view problem) const {
  std::ostringstream out;
  out << display_name_;
  if (!mark.is_null()) out << ':' << mark.line + 1 << ':' << mark.column + 1;
  out << ": ";
  if (!path.empty()) out << path << ": ";
  out << problem;
  return absl::InvalidArgumentError(out.str());
}

absl::Status Context::ScalarText(const YAML::Node& node, const std::string& path,
                                 const YAML::Mark& mark, std::string* out) const {
  if (!node.IsScalar()) {
    return Error(mark, path, "expected a scalar (string), got " + std::string(KindName(node)));
  }
  *out = node.Scalar();
  return absl::OkStatus();
}

absl::Status Context::ScalarList(const YAML::Node& node, const std::string& path,
                                 const YAML::Mark& mark,
                                 std::vector<std::pair<std::string, YAML::Mark>>* out) const {
  if (!node.IsSequence()) {
    return Error(mark, path, "expected a sequence (e.g. [a, b]), got " + Describe(node));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node element = node[i];
    const std::string element_path = path + "[" + std::to_string(i) + "]";
    const YAML::Mark element_mark = MarkOf(element, mark);
    if (element.IsNull()) return Error(element_mark, element_path, "missing value");
    std::string text;
    if (absl::Status status = ScalarText(element, element_path, element_mark, &text);
        !status.ok()) {
      return status;
    }
    out->emplace_back(std::move(text), element_mark);
  }
  return absl::OkStatus();
}

}  // namespace faultline::spec::yaml
