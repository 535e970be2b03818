#include "spec/kernels_yaml.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include <sys/stat.h>

#include "common/files.h"
#include "faultline/v1/limits.h"

namespace faultline::spec::yaml {
namespace {

namespace pb = google::protobuf;

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
    "tree, ref, config, from, series, include, revert, image, sha256, arch, release, untrusted";
constexpr std::string_view kKernelConfigKeys = "base, fragments";

class KernelsReader : public Context {
 public:
  explicit KernelsReader(const Context& context) : Context(context) {}

  absl::Status Fill(const YAML::Node& value, v1::JobSpec* spec, const std::string& path,
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
          name != "revert" && name != "untrusted") {
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
      } else if (name == "untrusted") {
        // A stranger's kernel (docs/kernels.md): only true or false.
        std::string flag;
        status = ScalarText(value, key_path, value_mark, &flag);
        if (status.ok() && flag != "true" && flag != "false") {
          status = Error(value_mark, key_path, "must be true or false, not '" + flag + "'");
        }
        source->set_untrusted(flag == "true");
      } else if (name == "revert") {
        std::vector<std::pair<std::string, YAML::Mark>> commits;
        status = ScalarList(value, key_path, value_mark, &commits);
        for (auto& commit : commits) source->add_revert(std::move(commit.first));
      }
      if (!status.ok()) return status;
    }
    if (files.size() > static_cast<size_t>(v1::kMaxKernelFilesPerLabel)) {
      return Error(mark, path,
                   std::to_string(files.size()) +
                       " files (config.fragments and series), over the limit of " +
                       std::to_string(v1::kMaxKernelFilesPerLabel) + " files per kernel");
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

  // Reads one config fragment or series file into a SourceFile named by its base name,
  // within the per-file and per-job limits. Only regular files: a FIFO or a device would
  // block or never end.
  absl::Status ReadKernelFile(const PendingFile& file, uint64_t* job_bytes) const {
    std::filesystem::path resolved(file.written);
    if (resolved.is_relative() && !base_dir().empty()) resolved = base_dir() / resolved;
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
    if (static_cast<uint64_t>(st.st_size) <= v1::kMaxKernelFileBytes) {
      // Bounded: files like /proc's say 0 bytes.
      std::optional<std::string> text =
          ReadFileToString(resolved.string(), nullptr, v1::kMaxKernelFileBytes);
      if (!text.has_value()) return cannot_read(std::strerror(errno));
      content = *std::move(text);
    }
    const uint64_t bytes = std::max<uint64_t>(static_cast<uint64_t>(st.st_size), content.size());
    if (bytes > v1::kMaxKernelFileBytes) {
      return Error(file.mark, file.path,
                   file.written + " is " + FormatSizeOver(bytes, v1::kMaxKernelFileBytes) +
                       ", over the " + FormatLimit(v1::kMaxKernelFileBytes) +
                       " limit for one file");
    }
    if (*job_bytes + bytes > v1::kMaxJobKernelFileBytes) {
      return Error(file.mark, file.path,
                   file.written + " (" + FormatFileSize(bytes) + ") brings the job's files to " +
                       FormatSizeOver(*job_bytes + bytes, v1::kMaxJobKernelFileBytes) +
                       ", over the " + FormatLimit(v1::kMaxJobKernelFileBytes) +
                       " limit for all files of a job");
    }
    *job_bytes += bytes;
    v1::SourceFile* out = file.into->Add();
    out->set_name(resolved.filename().string());
    out->set_content(std::move(content));
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status FillKernels(const Context& context, const YAML::Node& value, v1::JobSpec* spec,
                         const std::string& path, const YAML::Mark& fallback) {
  return KernelsReader(context).Fill(value, spec, path, fallback);
}

}  // namespace faultline::spec::yaml
