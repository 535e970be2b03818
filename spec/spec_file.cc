#include "spec/spec_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <system_error>
#include <type_traits>
#include <vector>

#include <sys/stat.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "common/files.h"
#include "spec/kernels_yaml.h"
#include "spec/prescan.h"
#include "spec/yaml_node.h"

namespace faultline::spec {
namespace {

namespace pb = google::protobuf;
using yaml::Describe;
using yaml::JoinPath;
using yaml::KindName;
using yaml::MarkOf;

std::string JoinFieldNames(const pb::Descriptor* descriptor) {
  std::string out;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    if (i > 0) out += ", ";
    out += descriptor->field(i)->name();
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The closest field name when it is plausibly a typo, else "".
std::string Suggest(const pb::Descriptor* descriptor, std::string_view name) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, name.size() / 3) + 1;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const std::string& candidate = descriptor->field(i)->name();
    const size_t d = EditDistance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

// A message whose only field is a repeated scalar/message (e.g. ParamValues) may be
// written as its list: a YAML sequence, or one scalar for a one-element list.
const pb::FieldDescriptor* ListWrapperField(const pb::Descriptor* descriptor) {
  if (descriptor->field_count() != 1) return nullptr;
  const pb::FieldDescriptor* field = descriptor->field(0);
  if (!field->is_repeated() || field->is_map()) return nullptr;
  return field;
}

template <typename T>
std::optional<T> ParseInteger(std::string_view text, bool* out_of_range) {
  *out_of_range = false;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  if constexpr (std::is_unsigned_v<T>) {
    if (text.front() == '-') return std::nullopt;
  }
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size()) {
    *out_of_range = true;
    return std::nullopt;
  }
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseDouble(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  // YAML spellings of the special values.
  if (text == ".inf" || text == ".Inf" || text == ".INF")
    return std::numeric_limits<double>::infinity();
  if (text == "-.inf" || text == "-.Inf" || text == "-.INF") {
    return -std::numeric_limits<double>::infinity();
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN")
    return std::numeric_limits<double>::quiet_NaN();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<bool> ParseBool(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "false" || lower == "no" || lower == "off") return false;
  return std::nullopt;
}

class YamlToMessage : public yaml::Context {
 public:
  using Context::Context;

  // Fills `message` from `node`. `fallback` locates nodes without a mark of their own.
  absl::Status FillMessage(const YAML::Node& node, pb::Message* message, const std::string& path,
                           const YAML::Mark& fallback) const {
    const pb::Descriptor* descriptor = message->GetDescriptor();
    if (!node.IsMap()) {
      if (const pb::FieldDescriptor* list = ListWrapperField(descriptor);
          list != nullptr && (node.IsSequence() || node.IsScalar())) {
        return FillRepeated(node, message, list, path, fallback);
      }
      return Error(MarkOf(node, fallback), path,
                   "expected a map of " + descriptor->name() + " fields, got " + Describe(node));
    }
    std::set<int> seen;
    // JobSpec: `kernels` as a map of sources (FillKernels) fills kernel_sources too.
    auto* job_spec =
        descriptor == v1::JobSpec::descriptor() ? dynamic_cast<v1::JobSpec*>(message) : nullptr;
    bool kernels_as_map = false;
    for (const auto& pair : node) {  // by value: yaml-cpp iterators yield temporaries
      const YAML::Node key = pair.first;
      const YAML::Node value = pair.second;
      const YAML::Mark key_mark = MarkOf(key, MarkOf(node, fallback));
      if (!key.IsScalar()) {
        return Error(key_mark, path, "field names must be scalars, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      const pb::FieldDescriptor* field = descriptor->FindFieldByName(name);
      if (field == nullptr) {
        std::string problem = "unknown field '" + name + "' in " + descriptor->name() +
                              " (fields: " + JoinFieldNames(descriptor) + ")";
        if (std::string guess = Suggest(descriptor, name); !guess.empty()) {
          problem += "; did you mean '" + guess + "'?";
        }
        return Error(key_mark, path, problem);
      }
      if (!seen.insert(field->number()).second) {
        return Error(key_mark, path, "duplicate field '" + name + "'");
      }
      if (job_spec != nullptr && field->number() == v1::JobSpec::kKernelsFieldNumber &&
          value.IsMap()) {
        if (!job_spec->kernel_sources().empty()) {
          return Error(key_mark, JoinPath(path, name),
                       "a map of kernel sources, but kernel_sources is given too: give the "
                       "sources in one place");
        }
        kernels_as_map = true;
        if (absl::Status status =
                yaml::FillKernels(*this, value, job_spec, JoinPath(path, name), key_mark);
            !status.ok()) {
          return status;
        }
        continue;
      }
      if (kernels_as_map && field->number() == v1::JobSpec::kKernelSourcesFieldNumber &&
          !value.IsNull()) {
        return Error(key_mark, JoinPath(path, name),
                     "kernels is a map of kernel sources already: give the sources in one place");
      }
      if (absl::Status status = FillField(value, message, field, JoinPath(path, name), key_mark);
          !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status FillField(const YAML::Node& value, pb::Message* message,
                         const pb::FieldDescriptor* field, const std::string& path,
                         const YAML::Mark& key_mark) const {
    if (value.IsNull()) return absl::OkStatus();  // "field:" or "field: ~" leaves it unset
    if (field->is_map()) return FillMap(value, message, field, path, key_mark);
    if (field->is_repeated()) return FillRepeated(value, message, field, path, key_mark);
    return SetValue(value, message, field, /*add=*/false, path, key_mark);
  }

  absl::Status FillRepeated(const YAML::Node& value, pb::Message* message,
                            const pb::FieldDescriptor* field, const std::string& path,
                            const YAML::Mark& fallback) const {
    const YAML::Mark mark = MarkOf(value, fallback);
    // A lone scalar counts as a one-element list only inside list wrappers (ParamValues).
    if (value.IsScalar() && ListWrapperField(message->GetDescriptor()) == field) {
      return SetValue(value, message, field, /*add=*/true, path, mark);
    }
    if (!value.IsSequence()) {
      return Error(mark, path, "expected a sequence (e.g. [a, b]), got " + Describe(value));
    }
    for (size_t i = 0; i < value.size(); ++i) {
      const YAML::Node element = value[i];
      const std::string element_path = path + "[" + std::to_string(i) + "]";
      if (element.IsNull()) return Error(MarkOf(element, mark), element_path, "missing value");
      if (absl::Status status =
              SetValue(element, message, field, /*add=*/true, element_path, MarkOf(element, mark));
          !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

  absl::Status FillMap(const YAML::Node& value, pb::Message* message,
                       const pb::FieldDescriptor* field, const std::string& path,
                       const YAML::Mark& fallback) const {
    const YAML::Mark mark = MarkOf(value, fallback);
    if (!value.IsMap()) {
      return Error(mark, path, "expected a map (e.g. {key: value}), got " + Describe(value));
    }
    const pb::Descriptor* entry_type = field->message_type();
    const pb::FieldDescriptor* key_field = entry_type->map_key();
    const pb::FieldDescriptor* value_field = entry_type->map_value();
    const pb::Reflection* reflection = message->GetReflection();
    std::set<std::string> seen;
    for (const auto& pair : value) {
      const YAML::Node key = pair.first;
      const YAML::Node item = pair.second;
      const YAML::Mark key_mark = MarkOf(key, mark);
      if (!key.IsScalar())
        return Error(key_mark, path, "map keys must be scalars, got " + Describe(key));
      const std::string item_path = JoinPath(path, key.Scalar());
      if (!seen.insert(key.Scalar()).second) {
        return Error(key_mark, path, "duplicate key '" + key.Scalar() + "'");
      }
      if (item.IsNull()) return Error(MarkOf(item, key_mark), item_path, "missing value");
      pb::Message* entry = reflection->AddMessage(message, field);
      if (absl::Status status = SetValue(key, entry, key_field, /*add=*/false, path, key_mark);
          !status.ok()) {
        return status;
      }
      if (absl::Status status =
              SetValue(item, entry, value_field, /*add=*/false, item_path, MarkOf(item, key_mark));
          !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

  // Sets (or, with add, appends to) one field from one node.
  absl::Status SetValue(const YAML::Node& node, pb::Message* message,
                        const pb::FieldDescriptor* field, bool add, const std::string& path,
                        const YAML::Mark& fallback) const {
    const pb::Reflection* reflection = message->GetReflection();
    const YAML::Mark mark = MarkOf(node, fallback);
    if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      pb::Message* sub =
          add ? reflection->AddMessage(message, field) : reflection->MutableMessage(message, field);
      return FillMessage(node, sub, path, mark);
    }
    if (!node.IsScalar()) {
      return Error(mark, path,
                   "expected a scalar (" + std::string(field->type_name()) + "), got " +
                       std::string(KindName(node)));
    }
    const std::string& text = node.Scalar();
    auto bad = [&](std::string_view expected) {
      return Error(mark, path, "expected " + std::string(expected) + ", got '" + text + "'");
    };
    auto integer = [&]<typename T>(std::string_view expected, std::string_view type_name, auto set,
                                   auto append) -> absl::Status {
      bool out_of_range = false;
      std::optional<T> parsed = ParseInteger<T>(text, &out_of_range);
      if (out_of_range) {
        return Error(mark, path, "'" + text + "' is out of range for " + std::string(type_name));
      }
      if (!parsed) return bad(expected);
      if (add) {
        (reflection->*append)(message, field, *parsed);
      } else {
        (reflection->*set)(message, field, *parsed);
      }
      return absl::OkStatus();
    };
    switch (field->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_STRING:
        if (add) {
          reflection->AddString(message, field, text);
        } else {
          reflection->SetString(message, field, text);
        }
        return absl::OkStatus();
      case pb::FieldDescriptor::CPPTYPE_INT32:
        return integer.operator()<int32_t>("an integer", "int32", &pb::Reflection::SetInt32,
                                           &pb::Reflection::AddInt32);
      case pb::FieldDescriptor::CPPTYPE_INT64:
        return integer.operator()<int64_t>("an integer", "int64", &pb::Reflection::SetInt64,
                                           &pb::Reflection::AddInt64);
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        return integer.operator()<uint32_t>("a non-negative integer", "uint32",
                                            &pb::Reflection::SetUInt32, &pb::Reflection::AddUInt32);
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        return integer.operator()<uint64_t>("a non-negative integer", "uint64",
                                            &pb::Reflection::SetUInt64, &pb::Reflection::AddUInt64);
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      case pb::FieldDescriptor::CPPTYPE_FLOAT: {
        std::optional<double> parsed = ParseDouble(text);
        if (!parsed) return bad("a number");
        if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
          add ? reflection->AddDouble(message, field, *parsed)
              : reflection->SetDouble(message, field, *parsed);
        } else {
          const auto value = static_cast<float>(*parsed);
          add ? reflection->AddFloat(message, field, value)
              : reflection->SetFloat(message, field, value);
        }
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_BOOL: {
        std::optional<bool> parsed = ParseBool(text);
        if (!parsed) return bad("true or false");
        add ? reflection->AddBool(message, field, *parsed)
            : reflection->SetBool(message, field, *parsed);
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* type = field->enum_type();
        const pb::EnumValueDescriptor* value = type->FindValueByName(text);
        if (value == nullptr) {
          std::string names;
          for (int i = 0; i < type->value_count(); ++i) {
            if (i > 0) names += ", ";
            names += type->value(i)->name();
          }
          return bad("one of " + names);
        }
        add ? reflection->AddEnum(message, field, value)
            : reflection->SetEnum(message, field, value);
        return absl::OkStatus();
      }
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        break;  // handled above
    }
    return Error(mark, path, "unsupported field type");
  }
};

}  // namespace

namespace {

// LoadMessageFromYaml, with files named in the spec (kernels' series and config fragments)
// relative to `base_dir` ("": the current directory).
absl::Status LoadFromYaml(std::string_view text, std::string_view display_name,
                          const std::filesystem::path& base_dir,
                          google::protobuf::Message* message) {
  YamlToMessage loader(display_name, base_dir);
  if (auto bad = yaml::PrescanYaml(text)) return loader.Error(bad->mark, "", bad->message);
  // One document. Not YAML::LoadAll: yaml-cpp 0.7 loops forever in it on text as small as
  // "\n,i" (found by tests/fuzz/fuzz_job_spec); YAML::Load reads the first document only, so
  // further documents are found by their "---" markers.
  const YAML::Mark start;  // line 0, column 0
  int documents = 1, first_extra_line = -1;
  {
    bool content = false;
    int line_number = 0;
    for (size_t pos = 0; pos <= text.size(); ++line_number) {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      const bool marker = line.substr(0, 3) == "---" && (line.size() == 3 || line[3] == ' ' ||
                                                         line[3] == '\t' || line[3] == '\r');
      if (marker && content) {
        ++documents;
        if (first_extra_line < 0) first_extra_line = line_number;
      }
      const size_t first = line.find_first_not_of(" \t\r");
      if (!marker && first != std::string_view::npos && line[first] != '#') content = true;
      pos = end + 1;
    }
  }
  if (documents > 1) {
    YAML::Mark second;
    second.line = first_extra_line;
    return loader.Error(second, "",
                        "expected one YAML document, found " + std::to_string(documents));
  }
  YAML::Node document;
  try {
    document = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return loader.Error(e.mark, "", "invalid YAML: " + e.msg);
  }
  if (!document.IsDefined() || document.IsNull()) {
    return loader.Error(
        start, "",
        "empty document; expected a map of " + message->GetDescriptor()->name() + " fields");
  }
  try {
    return loader.FillMessage(document, message, "", start);
  } catch (const YAML::Exception& e) {  // not expected from a parsed tree, but never crash
    return loader.Error(e.mark, "", e.msg);
  }
}

absl::StatusOr<v1::JobSpec> LoadJobSpec(std::string_view text, std::string_view display_name,
                                        const std::filesystem::path& base_dir) {
  v1::JobSpec spec;
  if (absl::Status status = LoadFromYaml(text, display_name, base_dir, &spec); !status.ok())
    return status;
  return spec;
}

}  // namespace

absl::Status LoadMessageFromYaml(std::string_view text, std::string_view display_name,
                                 google::protobuf::Message* message) {
  return LoadFromYaml(text, display_name, {}, message);
}

absl::StatusOr<v1::JobSpec> LoadJobSpecFromString(std::string_view text,
                                                  std::string_view display_name) {
  return LoadJobSpec(text, display_name, {});
}

absl::StatusOr<v1::JobSpec> LoadJobSpecFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return absl::InvalidArgumentError(path + ": is a directory");
  std::string error;
  std::optional<std::string> text = ReadFileToString(path, &error);
  if (!text.has_value())
    return absl::InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  // Files the spec names (kernels' series and config fragments) are next to it.
  return LoadJobSpec(*text, path, std::filesystem::path(path).parent_path());
}

}  // namespace faultline::spec
