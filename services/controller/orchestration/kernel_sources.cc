#include "services/controller/orchestration/kernel_sources.h"

#include <algorithm>
#include <ctime>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kernel_label.h"
#include "common/sha256.h"
#include "kbuild/series.h"
#include "services/controller/convert/convert.h"

namespace faultline::controller {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

bool IsConfigTarget(const std::string& s) {
  return s.size() <= 64 && s.size() > 6 && s.substr(s.size() - 6) == "config" &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_islower(static_cast<unsigned char>(c)) ||
                  absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                  c == '-';
         });
}

bool IsSafeText(const std::string& s, size_t max) {
  return !s.empty() && s.size() <= max &&
         std::none_of(s.begin(), s.end(), [](char c) { return c == '\n' || c == '\0'; });
}

absl::Status CheckFiles(const std::string& field,
                        const google::protobuf::RepeatedPtrField<v1::SourceFile>& files,
                        const KernelSourceLimits& limits, size_t& total) {
  if (files.size() > static_cast<int>(limits.max_files_per_label)) {
    return Invalid(field, absl::StrCat(files.size(), " files, over the limit of ",
                                       limits.max_files_per_label));
  }
  for (int i = 0; i < files.size(); ++i) {
    const std::string f = absl::StrCat(field, "[", i, "]");
    if (!IsSafeText(files[i].name(), 255)) return Invalid(f, "a file needs a name (1-255 chars)");
    if (files[i].content().size() > limits.max_file_bytes) {
      return Invalid(f, absl::StrCat(files[i].name(), " is ", files[i].content().size(),
                                     " bytes, over the limit of ", limits.max_file_bytes));
    }
    total += files[i].content().size();
  }
  if (total > limits.max_total_bytes) {
    return Invalid(field, absl::StrCat("the job's files total ", total,
                                       " bytes, over the limit of ", limits.max_total_bytes));
  }
  return absl::OkStatus();
}

bool IsKnownArch(const std::string& arch) {
  return arch == "x86_64" || arch == "aarch64" || arch == "riscv64";
}

// A prebuilt kernel: a URL the builders can fetch, the image's sha256 and arch; nothing
// that belongs to a build from source.
absl::Status CheckImage(const std::string& field, const v1::KernelSource& source) {
  const std::string& url = source.image();
  const bool scheme = absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://") ||
                      absl::StartsWith(url, "file:///");
  if (!scheme || url.size() > 2048 || std::any_of(url.begin(), url.end(), [](char c) {
        return !absl::ascii_isgraph(static_cast<unsigned char>(c));
      })) {
    return Invalid(field + ".image",
                   "an http://, https:// or file:/// URL of a boot image (at most 2048 chars, "
                   "no spaces)");
  }
  if (!IsSha256Hex(source.image_sha256())) {
    return Invalid(field + ".sha256",
                   "the image's sha256 is needed (64 lowercase hex characters): it is checked "
                   "before any board boots it");
  }
  if (!IsKnownArch(source.image_arch())) {
    return Invalid(field + ".arch",
                   "the arch the image boots is needed: x86_64, aarch64 or riscv64");
  }
  if (!source.image_release().empty() && !IsSafeText(source.image_release(), 64)) {
    return Invalid(field + ".release", "a release (uname -r) of 1-64 chars");
  }
  if (!source.ref().empty() || !source.config_base().empty() || !source.fragments().empty() ||
      !source.series().empty() || !source.include().empty()) {
    return Invalid(field, "a prebuilt image takes no ref, config, series or include");
  }
  return absl::OkStatus();
}

// The series of a source keyed by its diffs (kbuild::SeriesKey): the same patches exported
// twice (another commit id, date, Message-Id, subject prefix or cover letter) are one key.
// An mbox without a patch is refused, naming the field.
absl::StatusOr<std::string> SeriesKeyOf(
    const std::string& field, const google::protobuf::RepeatedPtrField<v1::SourceFile>& series) {
  std::vector<kbuild::Patch> patches;
  for (int i = 0; i < series.size(); ++i) {
    absl::StatusOr<std::vector<kbuild::Patch>> split =
        kbuild::SplitMbox(series[i].content(), series[i].name());
    if (!split.ok()) {
      return Invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrCat(series[i].name(), " has no patch (no mail with a `diff --git`)"));
    }
    for (kbuild::Patch& p : *split) patches.push_back(std::move(p));
  }
  return kbuild::SeriesKey(patches);
}

// What the label's name hashes: the resolved source, fragments by name and content, the
// series by its diffs (`series_key`, "" without a series).
std::string Canonical(const v1::KernelSource& s, const std::string& series_key) {
  if (!s.image().empty()) {
    return absl::StrCat("image\n", s.image(), "\nsha256\n", s.image_sha256(), "\narch\n",
                        s.image_arch(), "\nrelease\n", s.image_release(), "\n");
  }
  std::string out =
      absl::StrCat("tree\n", s.tree(), "\nref\n", s.ref(), "\nbase\n", s.config_base(), "\n");
  for (const auto& f : s.fragments()) {
    absl::StrAppend(&out, "fragment\n", f.name(), "\n", f.content().size(), "\n", f.content());
  }
  if (!series_key.empty()) absl::StrAppend(&out, "series-diffs\n", series_key, "\n");
  for (const auto& i : s.include()) absl::StrAppend(&out, "include\n", i, "\n");
  for (const auto& r : s.revert()) absl::StrAppend(&out, "revert\n", r, "\n");
  if (s.untrusted()) out += "untrusted\n";  // a build of its own: never the trusted one's
  return out;
}

}  // namespace

std::string SlotTag(int64_t slot_ms) {
  const std::time_t t = static_cast<std::time_t>(slot_ms / 1000);
  std::tm utc{};
  char text[32] = "";
  if (gmtime_r(&t, &utc) == nullptr ||
      std::strftime(text, sizeof text, "%Y%m%dT%H%M", &utc) != 13) {
    return "00000000T0000";
  }
  return text;
}

bool IsCommitId(const std::string& ref) {
  return (ref.size() == 40 || ref.size() == 64) &&
         ref.find_first_not_of("0123456789abcdef") == std::string::npos;
}

absl::StatusOr<std::map<std::string, v1::KernelSource>> ResolveKernelSources(
    v1::JobSpec& spec, const KernelSourceLimits& limits, const std::string& slot) {
  std::map<std::string, v1::KernelSource> resolved;
  if (spec.kernel_sources().empty()) return resolved;
  const std::vector<std::string> labels(spec.kernels().begin(), spec.kernels().end());
  size_t total = 0;
  // Check each source on its own first.
  for (const auto& [label, source] : spec.kernel_sources()) {
    const std::string field = absl::StrCat("kernels.", label);
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) {
      return Invalid(field, "a source for a label that `kernels` does not list");
    }
    if (KernelLabel::Parse(label).source.has_value()) {
      return Invalid(field, "a label that brings a kernel may not contain '@'");
    }
    const int kinds = !source.tree().empty() + !source.from().empty() + !source.image().empty();
    if (kinds != 1) {
      return Invalid(field,
                     "exactly one of tree (with ref and config), from (another label) "
                     "or image is needed");
    }
    if (!source.image().empty()) {
      if (absl::Status s = CheckImage(field, source); !s.ok()) return s;
    } else if (!source.image_sha256().empty() || !source.image_arch().empty() ||
               !source.image_release().empty()) {
      return Invalid(field, "sha256, arch and release go with image (a prebuilt kernel)");
    }
    if (!source.tree().empty()) {
      if (!IsSafeText(source.tree(), 1024) || source.tree().front() != '/') {
        return Invalid(field + ".tree", "an absolute path of a git repository on the builders");
      }
      if (!IsSafeText(source.ref(), 256) || source.ref().front() == '-') {
        return Invalid(field + ".ref", "a tag, branch or commit is needed (e.g. v6.12.117)");
      }
    } else if (!source.ref().empty() || !source.config_base().empty() ||
               !source.fragments().empty()) {
      return Invalid(field, "with `from`, the tree, ref and config are the other label's");
    }
    if (!source.config_base().empty() && !IsConfigTarget(source.config_base())) {
      return Invalid(field + ".config.base",
                     absl::StrCat("'", source.config_base().substr(0, 64),
                                  "' is not a config make target (tinyconfig, defconfig, ...)"));
    }
    for (int i = 0; i < source.include().size(); ++i) {
      if (!IsSafeText(source.include(i), 256)) {
        return Invalid(absl::StrCat(field, ".include[", i, "]"), "a path glob of 1-256 chars");
      }
    }
    if (source.revert_size() > 16) {
      return Invalid(field + ".revert", "at most 16 commits to revert");
    }
    for (int i = 0; i < source.revert().size(); ++i) {
      const std::string& r = source.revert(i);
      if (source.tree().empty() || r.size() < 7 || r.size() > 64 ||
          r.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return Invalid(absl::StrCat(field, ".revert[", i, "]"),
                       "a commit id (7-64 lowercase hex) of a source with a tree");
      }
    }
    if (absl::Status s = CheckFiles(field + ".config.fragments", source.fragments(), limits, total);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckFiles(field + ".series", source.series(), limits, total); !s.ok()) {
      return s;
    }
  }
  // Resolve `from` and name every label by its resolved source.
  std::map<std::string, std::string> renamed;
  for (const auto& [label, source] : spec.kernel_sources()) {
    v1::KernelSource r = source;
    if (!source.from().empty()) {
      auto base = spec.kernel_sources().find(source.from());
      if (base == spec.kernel_sources().end() || base->second.tree().empty()) {
        return Invalid(absl::StrCat("kernels.", label, ".from"),
                       absl::StrCat("'", source.from().substr(0, 64),
                                    "' is not a label of this job with a tree"));
      }
      r.set_tree(base->second.tree());
      r.set_ref(base->second.ref());
      r.set_config_base(base->second.config_base());
      *r.mutable_fragments() = base->second.fragments();
      r.clear_from();
    }
    if (r.config_base().empty() && r.image().empty()) r.set_config_base("defconfig");
    std::string series_key;
    if (!r.series().empty()) {
      absl::StatusOr<std::string> key =
          SeriesKeyOf(absl::StrCat("kernels.", label, ".series"), r.series());
      if (!key.ok()) return key.status();
      series_key = *key;
    }
    KernelLabel built{label, Sha256Hex(Canonical(r, series_key)).substr(0, 12), ""};
    if (!slot.empty() && !r.tree().empty() && !IsCommitId(r.ref())) built.slot = slot;
    const std::string name = built.ToString();
    renamed[label] = name;
    resolved[name] = std::move(r);
  }
  auto rename = [&](const std::string& label) {
    auto it = renamed.find(label);
    return it == renamed.end() ? label : it->second;
  };
  for (auto& k : *spec.mutable_kernels()) k = rename(k);
  if (!spec.baseline().empty()) spec.set_baseline(rename(spec.baseline()));
  google::protobuf::Map<std::string, v1::KernelOverride> overrides;
  for (const auto& [label, o] : spec.kernel_overrides()) overrides[rename(label)] = o;
  *spec.mutable_kernel_overrides() = overrides;
  spec.clear_kernel_sources();
  for (const auto& [name, source] : resolved) (*spec.mutable_kernel_sources())[name] = source;
  return resolved;
}

absl::StatusOr<std::vector<BuildRequest>> PlanBuilds(
    const std::map<std::string, v1::KernelSource>& sources, const v1::JobSpec& spec,
    const std::vector<BoardSummary>& boards) {
  std::vector<BuildRequest> builds;
  if (sources.empty()) return builds;
  auto listed = [](const auto& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  std::set<std::string> arches, builder_arches;
  for (const BoardSummary& b : boards) {
    for (const auto& a : b.build_arches) builder_arches.insert(a);
    if (!b.boots_built_kernels) continue;
    if (!listed(spec.arches(), b.arch) || !listed(spec.boards(), b.name)) continue;
    arches.insert(b.arch);
  }
  if (arches.empty()) {
    std::string first = sources.begin()->first;
    for (const auto& k : spec.kernels()) {
      if (sources.count(k)) {
        first = k;
        break;
      }
    }
    return Invalid(absl::StrCat("kernels.", KernelLabel::Parse(first).name),
                   "no eligible board boots kernels that jobs bring (agent.yaml built_kernels)");
  }
  for (const std::string& label : spec.kernels()) {  // in the job's order
    auto it = sources.find(label);
    if (it == sources.end()) continue;
    const v1::KernelSource& source = it->second;
    if (!source.image().empty()) {
      // A prebuilt image boots one arch: every eligible board must be of it, and any builder
      // fetches it.
      const std::string field = absl::StrCat("kernels.", KernelLabel::Parse(label).name);
      if (arches.size() != 1 || *arches.begin() != source.image_arch()) {
        return Invalid(
            field + ".arch",
            absl::StrCat("the image boots ", source.image_arch(),
                         " but the job's eligible boards are ", absl::StrJoin(arches, ", "),
                         ": restrict the job with `arches: [", source.image_arch(), "]`"));
      }
      if (builder_arches.empty()) {
        return Invalid(field + ".image",
                       "no builder is registered to fetch the image (agent.yaml builder:)");
      }
      builds.push_back({label, source.image_arch(), KernelSourceToJson(source)});
      continue;
    }
    for (const std::string& arch : arches) {
      if (!builder_arches.count(arch)) {
        return Invalid(absl::StrCat("kernels.", KernelLabel::Parse(label).name),
                       absl::StrCat("no builder builds for ", arch, " (builders build for: ",
                                    builder_arches.empty() ? "none registered"
                                                           : absl::StrJoin(builder_arches, ", "),
                                    "); restrict the job with `arches`"));
      }
      builds.push_back({label, arch, KernelSourceToJson(source)});
    }
  }
  return builds;
}

v1::JobSpec WithoutFileContents(v1::JobSpec spec) {
  for (auto& [label, source] : *spec.mutable_kernel_sources()) {
    for (auto& f : *source.mutable_fragments()) f.clear_content();
    for (auto& f : *source.mutable_series()) f.clear_content();
  }
  return spec;
}

}  // namespace faultline::controller
