#pragma once
// Whole-file reads and writes: what kbuild's steps share (a file's sha256: common/sha256.h).
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace faultline::kbuild {

// The metadata file in every artifact directory (builder.h: ArtifactMeta, ReadArtifact).
inline constexpr char kMetaFile[] = "artifact.meta";

absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, absl::string_view text);

}  // namespace faultline::kbuild
