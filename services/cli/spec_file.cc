#include "services/cli/spec_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <vector>

#include <sys/stat.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace faultline::cli {
namespace {

namespace pb = google::protobuf;

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

std::string JoinPath(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  return std::string(parent) + "." + std::string(child);
}

// "812 bytes", "3.4 KiB", "3.2 MiB": sizes in messages about spec files.
std::string FormatFileSize(uint64_t bytes) {
  char buf[48];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes < (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1u << 20));
  }
  return buf;
}

// A size over `limit`, in bytes when rounding would show it as the limit itself.
std::string FormatSizeOver(uint64_t bytes, uint64_t limit) {
  std::string text = FormatFileSize(bytes);
  if (text == FormatFileSize(limit)) text = std::to_string(bytes) + " bytes";
  return text;
}

std::string FormatLimit(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// The keys of one entry of `kernels` written as a map, and of its `config`.
constexpr std::string_view kKernelSourceKeys =
    "tree, ref, config, from, series, include, revert, image, sha256, arch, release";
constexpr std::string_view kKernelConfigKeys = "base, fragments";

class YamlToMessage {
 public:
  // `base_dir`: where files named by relative paths in the spec are ("": the current
  // directory).
  YamlToMessage(std::string_view display_name, std::filesystem::path base_dir = {})
      : display_name_(display_name), base_dir_(std::move(base_dir)) {}

  absl::Status Error(const YAML::Mark& mark, std::string_view path,
                     std::string_view problem) const {
    std::ostringstream out;
    out << display_name_;
    if (!mark.is_null()) out << ':' << mark.line + 1 << ':' << mark.column + 1;
    out << ": ";
    if (!path.empty()) out << path << ": ";
    out << problem;
    return absl::InvalidArgumentError(out.str());
  }

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
        if (absl::Status status = FillKernels(value, job_spec, JoinPath(path, name), key_mark);
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
  static YAML::Mark MarkOf(const YAML::Node& node, const YAML::Mark& fallback) {
    if (!node.IsDefined()) return fallback;
    YAML::Mark mark = node.Mark();
    return mark.is_null() ? fallback : mark;
  }

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

  // `kernels` as a map: label -> source (a map), `installed` or nothing (a kernel the
  // boards have). The labels go into spec->kernels in file order.
  absl::Status FillKernels(const YAML::Node& value, v1::JobSpec* spec, const std::string& path,
                           const YAML::Mark& fallback) const {
    const YAML::Mark mark = MarkOf(value, fallback);
    std::set<std::string> seen;
    uint64_t job_bytes = 0;  // of every label's files so far
    for (const auto& pair : value) {
      const YAML::Node key = pair.first;
      const YAML::Node item = pair.second;
      const YAML::Mark key_mark = MarkOf(key, mark);
      if (!key.IsScalar()) {
        return Error(key_mark, path, "kernel labels must be scalars, got " + Describe(key));
      }
      const std::string& label = key.Scalar();
      if (!seen.insert(label).second) {
        return Error(key_mark, path, "duplicate key '" + label + "'");
      }
      spec->add_kernels(label);
      const std::string label_path = JoinPath(path, label);
      if (item.IsNull() || (item.IsScalar() && item.Scalar() == "installed") ||
          (item.IsMap() && item.size() == 0)) {
        continue;  // installed on the boards: a label only
      }
      if (!item.IsMap()) {
        return Error(MarkOf(item, key_mark), label_path,
                     "expected a map of the kernel's source (" + std::string(kKernelSourceKeys) +
                         ") or 'installed', got " + Describe(item));
      }
      v1::KernelSource source;
      if (absl::Status status = FillKernelSource(item, &source, label_path, key_mark, &job_bytes);
          !status.ok()) {
        return status;
      }
      (*spec->mutable_kernel_sources())[label] = std::move(source);
    }
    return absl::OkStatus();
  }

  // A file named in a kernel's source, read once the whole entry is checked.
  struct PendingFile {
    std::string path;  // field path, "kernels.patched.series[0]"
    std::string written;
    YAML::Mark mark;
    pb::RepeatedPtrField<v1::SourceFile>* into;
  };

  absl::Status FillKernelSource(const YAML::Node& item, v1::KernelSource* source,
                                const std::string& path, const YAML::Mark& fallback,
                                uint64_t* job_bytes) const {
    const YAML::Mark mark = MarkOf(item, fallback);
    std::set<std::string> seen;
    std::vector<PendingFile> files;
    for (const auto& pair : item) {
      const YAML::Node key = pair.first;
      const YAML::Node value = pair.second;
      const YAML::Mark key_mark = MarkOf(key, mark);
      if (!key.IsScalar()) {
        return Error(key_mark, path, "keys must be scalars, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      if (!seen.insert(name).second) return Error(key_mark, path, "duplicate key '" + name + "'");
      const std::string key_path = JoinPath(path, name);
      const YAML::Mark value_mark = MarkOf(value, key_mark);
      std::string* text = name == "tree"      ? source->mutable_tree()
                          : name == "ref"     ? source->mutable_ref()
                          : name == "from"    ? source->mutable_from()
                          : name == "image"   ? source->mutable_image()
                          : name == "sha256"  ? source->mutable_image_sha256()
                          : name == "release" ? source->mutable_image_release()
                          : name == "arch"    ? source->mutable_image_arch()
                                              : nullptr;
      if (text == nullptr && name != "config" && name != "series" && name != "include" &&
          name != "revert") {
        return Error(key_mark, path,
                     "unknown key '" + name + "' (" + std::string(kKernelSourceKeys) + ")");
      }
      absl::Status status;
      if (value.IsNull()) {
        // "key:" or "key: ~" leaves it unset, as for every other field
      } else if (text != nullptr) {
        status = ScalarText(value, key_path, value_mark, text);
      } else if (name == "config") {
        status = FillKernelConfig(value, source, key_path, value_mark, &files);
      } else if (name == "series") {
        std::vector<std::pair<std::string, YAML::Mark>> paths;
        status = ScalarList(value, key_path, value_mark, &paths);
        for (size_t i = 0; status.ok() && i < paths.size(); ++i) {
          files.push_back({key_path + "[" + std::to_string(i) + "]", paths[i].first,
                           paths[i].second, source->mutable_series()});
        }
      } else if (name == "include") {
        std::vector<std::pair<std::string, YAML::Mark>> patterns;
        status = ScalarList(value, key_path, value_mark, &patterns);
        for (auto& pattern : patterns) source->add_include(std::move(pattern.first));
      } else if (name == "revert") {
        std::vector<std::pair<std::string, YAML::Mark>> commits;
        status = ScalarList(value, key_path, value_mark, &commits);
        for (auto& commit : commits) source->add_revert(std::move(commit.first));
      }
      if (!status.ok()) return status;
    }
    if (files.size() > static_cast<size_t>(kMaxKernelFilesPerLabel)) {
      return Error(mark, path,
                   std::to_string(files.size()) +
                       " files (config.fragments and series), over the limit of " +
                       std::to_string(kMaxKernelFilesPerLabel) + " files per kernel");
    }
    for (const PendingFile& file : files) {
      if (absl::Status status = ReadKernelFile(file, job_bytes); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // `config: BASE` or `config: {base: BASE, fragments: [FILE, ...]}`.
  absl::Status FillKernelConfig(const YAML::Node& value, v1::KernelSource* source,
                                const std::string& path, const YAML::Mark& mark,
                                std::vector<PendingFile>* files) const {
    if (value.IsScalar()) return ScalarText(value, path, mark, source->mutable_config_base());
    if (!value.IsMap()) {
      return Error(mark, path,
                   "expected a config target (e.g. defconfig) or a map (" +
                       std::string(kKernelConfigKeys) + "), got " + Describe(value));
    }
    std::set<std::string> seen;
    for (const auto& pair : value) {
      const YAML::Node key = pair.first;
      const YAML::Node item = pair.second;
      const YAML::Mark key_mark = MarkOf(key, mark);
      if (!key.IsScalar()) {
        return Error(key_mark, path, "keys must be scalars, got " + Describe(key));
      }
      const std::string& name = key.Scalar();
      if (!seen.insert(name).second) return Error(key_mark, path, "duplicate key '" + name + "'");
      const std::string key_path = JoinPath(path, name);
      if (name != "base" && name != "fragments") {
        return Error(key_mark, path,
                     "unknown key '" + name + "' (" + std::string(kKernelConfigKeys) + ")");
      }
      if (item.IsNull()) continue;
      const YAML::Mark item_mark = MarkOf(item, key_mark);
      if (name == "base") {
        if (absl::Status status =
                ScalarText(item, key_path, item_mark, source->mutable_config_base());
            !status.ok()) {
          return status;
        }
        continue;
      }
      std::vector<std::pair<std::string, YAML::Mark>> paths;
      if (absl::Status status = ScalarList(item, key_path, item_mark, &paths); !status.ok()) {
        return status;
      }
      for (size_t i = 0; i < paths.size(); ++i) {
        files->push_back({key_path + "[" + std::to_string(i) + "]", paths[i].first, paths[i].second,
                          source->mutable_fragments()});
      }
    }
    return absl::OkStatus();
  }

  absl::Status ScalarText(const YAML::Node& node, const std::string& path, const YAML::Mark& mark,
                          std::string* out) const {
    if (!node.IsScalar()) {
      return Error(mark, path, "expected a scalar (string), got " + std::string(KindName(node)));
    }
    *out = node.Scalar();
    return absl::OkStatus();
  }

  // A sequence of scalars (with where each is).
  absl::Status ScalarList(const YAML::Node& node, const std::string& path, const YAML::Mark& mark,
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

  // Reads one config fragment or series file into a SourceFile named by its base name,
  // within the per-file and per-job limits. Only regular files: a FIFO or a device would
  // block or never end.
  absl::Status ReadKernelFile(const PendingFile& file, uint64_t* job_bytes) const {
    std::filesystem::path resolved(file.written);
    if (resolved.is_relative() && !base_dir_.empty()) resolved = base_dir_ / resolved;
    const std::string shown = resolved.string() == file.written
                                  ? file.written
                                  : file.written + " (" + resolved.string() + ")";
    if (file.written.empty()) return Error(file.mark, file.path, "empty file name");
    auto cannot_read = [&](std::string_view why) {
      return Error(file.mark, file.path, "cannot read " + shown + ": " + std::string(why));
    };
    struct stat st {};
    if (::stat(resolved.c_str(), &st) != 0) return cannot_read(std::strerror(errno));
    if (S_ISDIR(st.st_mode)) return cannot_read("is a directory");
    if (!S_ISREG(st.st_mode)) return cannot_read("not a regular file");
    std::string content;
    if (static_cast<uint64_t>(st.st_size) <= kMaxKernelFileBytes) {
      std::ifstream in(resolved, std::ios::binary);
      if (!in) return cannot_read(std::strerror(errno));
      content.resize(kMaxKernelFileBytes + 1);  // files like /proc's say 0 bytes: bounded
      in.read(content.data(), static_cast<std::streamsize>(content.size()));
      if (in.bad()) return cannot_read(std::strerror(errno));
      content.resize(static_cast<size_t>(in.gcount()));
    }
    const uint64_t bytes = std::max<uint64_t>(static_cast<uint64_t>(st.st_size), content.size());
    if (bytes > kMaxKernelFileBytes) {
      return Error(file.mark, file.path,
                   file.written + " is " + FormatSizeOver(bytes, kMaxKernelFileBytes) +
                       ", over the " + FormatLimit(kMaxKernelFileBytes) + " limit for one file");
    }
    if (*job_bytes + bytes > kMaxJobKernelFileBytes) {
      return Error(file.mark, file.path,
                   file.written + " (" + FormatFileSize(bytes) + ") brings the job's files to " +
                       FormatSizeOver(*job_bytes + bytes, kMaxJobKernelFileBytes) + ", over the " +
                       FormatLimit(kMaxJobKernelFileBytes) + " limit for all files of a job");
    }
    *job_bytes += bytes;
    v1::SourceFile* out = file.into->Add();
    out->set_name(resolved.filename().string());
    out->set_content(std::move(content));
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

  std::string display_name_;
  std::filesystem::path base_dir_;
};

// yaml-cpp 0.7 can take unbounded time and memory on some malformed text (found by
// tests/fuzz/fuzz_job_spec: a flow map "memcg: {memory_max: ..." never closed used 1.9 GB and
// did not finish; so did text with NUL bytes, lone carriage returns or bytes that are not
// UTF-8). Such text is
// refused before yaml-cpp sees it: bytes that are not UTF-8, control characters (YAML allows
// neither), flow collections nested deeper than 32, and a '{' or '[' never closed. The scan knows
// quotes, comments and block scalars.
struct PrescanError {
  YAML::Mark mark;
  std::string message;
};

// Length of the valid UTF-8 sequence at text[i], or 0 (overlongs, surrogates and values
// above U+10FFFF are invalid too).
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

std::optional<PrescanError> PrescanYaml(std::string_view text) {
  struct Open {
    int line, column;
  };
  std::vector<Open> open;
  bool single_quoted = false, double_quoted = false;
  int block_parent_indent = -1;  // inside a block scalar (| or >) of a key at this indent
  int line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    for (size_t i = 0; i < line.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(line[i]);
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(line, i);
        if (n == 0) {
          YAML::Mark mark;
          mark.line = line_number;
          mark.column = static_cast<int>(i);
          return PrescanError{mark, "invalid YAML: not UTF-8"};
        }
        i += n - 1;
        continue;
      }
      // A carriage return only as part of CR LF (yaml-cpp ran away on lone ones too).
      const bool crlf = c == '\r' && i + 1 == line.size() && end < text.size();
      if ((c < 0x20 && c != '\t' && !crlf) || c == 0x7f) {
        YAML::Mark mark;
        mark.line = line_number;
        mark.column = static_cast<int>(i);
        char hex[8];
        std::snprintf(hex, sizeof(hex), "0x%02x", c);
        return PrescanError{mark, std::string("invalid YAML: control character ") + hex};
      }
    }
    const size_t indent = line.find_first_not_of(' ');
    const bool blank = indent == std::string_view::npos || line[indent] == '\r';
    if (block_parent_indent >= 0 && (blank || static_cast<int>(indent) > block_parent_indent)) {
      // block scalar content: anything goes
    } else {
      block_parent_indent = -1;
      char last_token = ' ';  // previous non-space character outside quotes
      size_t content_end = line.size();
      for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (double_quoted) {
          if (c == '\\')
            ++i;
          else if (c == '"')
            double_quoted = false;
          continue;
        }
        if (single_quoted) {
          if (c == '\'' && i + 1 < line.size() && line[i + 1] == '\'')
            ++i;
          else if (c == '\'')
            single_quoted = false;
          continue;
        }
        const bool token_start =
            std::string_view(" :,[{-?").find(last_token) != std::string_view::npos;
        if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
          content_end = i;
          break;
        }
        if (c == '"' && token_start)
          double_quoted = true;
        else if (c == '\'' && token_start)
          single_quoted = true;
        else if (c == '{' || c == '[') {
          open.push_back({line_number, static_cast<int>(i)});
          if (open.size() > 32) {
            YAML::Mark mark;
            mark.line = line_number;
            mark.column = static_cast<int>(i);
            return PrescanError{mark, "invalid YAML: flow collections nested deeper than 32"};
          }
        } else if ((c == '}' || c == ']') && !open.empty())
          open.pop_back();
        if (c != ' ' && c != '\t') last_token = c;
      }
      // "key: |" / "key: >-" starts a block scalar on the next lines.
      std::string_view content = line.substr(0, content_end);
      while (!content.empty() &&
             (content.back() == ' ' || content.back() == '\r' || content.back() == '\t')) {
        content.remove_suffix(1);
      }
      while (!content.empty() && (content.back() == '-' || content.back() == '+' ||
                                  std::isdigit(static_cast<unsigned char>(content.back())))) {
        content.remove_suffix(1);
      }
      if (!single_quoted && !double_quoted && open.empty() && !content.empty() &&
          (content.back() == '|' || content.back() == '>') &&
          (content.size() == 1 || content[content.size() - 2] == ' ')) {
        block_parent_indent = indent == std::string_view::npos ? 0 : static_cast<int>(indent);
      }
    }
    ++line_number;
    start = end + 1;
  }
  if (open.empty()) return std::nullopt;
  YAML::Mark mark;
  mark.line = open.back().line;
  mark.column = open.back().column;
  return PrescanError{mark, "invalid YAML: this '{' or '[' is never closed"};
}

}  // namespace

namespace {

// LoadMessageFromYaml, with files named in the spec (kernels' series and config fragments)
// relative to `base_dir` ("": the current directory).
absl::Status LoadFromYaml(std::string_view text, std::string_view display_name,
                          const std::filesystem::path& base_dir,
                          google::protobuf::Message* message) {
  YamlToMessage loader(display_name, base_dir);
  if (auto bad = PrescanYaml(text)) return loader.Error(bad->mark, "", bad->message);
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(path + ": cannot read: " + std::strerror(errno));
  // Files the spec names (kernels' series and config fragments) are next to it.
  return LoadJobSpec(text.str(), path, std::filesystem::path(path).parent_path());
}

}  // namespace faultline::cli
