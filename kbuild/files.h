#pragma once
// Whole-file writes and the artifact's metadata file (reads: common/read_file.h; a file's
// sha256: common/sha256.h).
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace faultline::kbuild {

// The metadata file in every artifact directory (builder.h: ArtifactMeta, ReadArtifact).
inline constexpr char kMetaFile[] = "artifact.meta";

absl::Status WriteFile(const std::string& path, absl::string_view text);

}  // namespace faultline::kbuild
