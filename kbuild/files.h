#pragma once
// Whole-file reads and writes and a file's sha256: what kbuild's steps share.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace faultline::kbuild {

// The metadata file in every artifact directory (builder.h: ArtifactMeta, ReadArtifact).
inline constexpr char kMetaFile[] = "artifact.meta";

absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, absl::string_view text);
// The file's sha256 in hex; its size in *bytes.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path, uint64_t* bytes);

}  // namespace faultline::kbuild
