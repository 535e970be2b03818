#pragma once
// The board's cache of kernel images the controller hands it: bounded, surviving restarts,
// content-addressed by sha256 (lowercase hex), fetched resumably and verified before use.
//
// Layout of the directory: DIR/<sha> is a verified artifact (nothing else ever gets that
// name: a download is renamed to it only after its hash matched), DIR/<sha>.meta its
// metadata (key=value lines), DIR/<sha>.partial a download under way or interrupted. A
// board's link to the controller can drop in the middle of a 50 MB image, and the board can
// reboot; the .partial is fsync'd as it grows, so the next agent life resumes it from its
// size instead of starting over. The cache is bounded (boards have small disks): after each
// fetch the least recently used files (by mtime; Find touches it) are evicted.
//
// One caller at a time (the agent's kernel-switch flow); not for concurrent use.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sha256.h"  // IsSha256Hex, Sha256OfFile

namespace faultline::agent {

// Where artifacts come from (the controller's download stream; a fake in the unit tests).
class ArtifactSource {
 public:
  virtual ~ArtifactSource() = default;
  // Streams an artifact from `offset` to its end; calls sink for each chunk in order.
  // A failure part-way (e.g. UNAVAILABLE: the connection dropped) returns that error after
  // the chunks already delivered. An error from the sink ends the stream with that error.
  virtual absl::Status Read(const std::string& sha256, uint64_t offset,
                            const std::function<absl::Status(absl::string_view)>& sink) = 0;
};

// The labels one image keeps (the newest): its bisection labels, a few nights of a
// schedule whose branch did not move.
inline constexpr size_t kMaxLabelsPerImage = 16;

struct CachedArtifact {
  std::string sha256;
  std::string path;  // the verified file
  uint64_t bytes = 0;
  std::string release;  // metadata given at Fetch (uname -r of the kernel inside)
  std::string label;    // metadata given at Fetch (the first label it was fetched under)
  // Every label it was fetched under: two labels can name one image (a bisection's commit
  // whose tree is another's, e.g. a change and its revert), and a board running it runs both.
  std::vector<std::string> labels;
};

class ArtifactCache {
 public:
  // Creates `dir` when missing (Fetch reports it if that failed).
  ArtifactCache(std::string dir, uint64_t max_bytes);

  // The verified artifact if present, and marks it recently used (touches its mtime).
  // nullopt for an invalid sha256 too.
  std::optional<CachedArtifact> Find(const std::string& sha256);

  // Fetches sha256 (expected size `bytes`) unless present. Data goes to DIR/<sha>.partial,
  // fsync'd as it grows; an existing .partial is resumed from its size (the source is asked
  // from that offset). A source error is returned as is and the .partial kept for the next
  // try. At the end the whole file's sha256 is checked: a mismatch, or more than `bytes`,
  // deletes the .partial and returns DATA_LOSS. On success the file is renamed to DIR/<sha>,
  // its metadata written to DIR/<sha>.meta, the directory fsync'd, and the cache trimmed to
  // max_bytes by evicting the least recently used files, never the one just fetched.
  // An abandoned .partial of another artifact counts against max_bytes and is evicted the
  // same way. Eviction is best-effort: a file that cannot be removed stays until the next
  // Fetch. `progress` (optional) gets (bytes so far, total) as the download grows.
  // INVALID_ARGUMENT for a sha256 that is not 64 lowercase hex characters (it becomes a file
  // name) and for metadata containing a newline (it would break the .meta lines).
  absl::StatusOr<CachedArtifact> Fetch(
      const std::string& sha256, uint64_t bytes, const std::string& release,
      const std::string& label, ArtifactSource& source,
      const std::function<void(uint64_t, uint64_t)>& progress = {});

  // Every verified artifact with metadata (for the agent's hello: the kernels it can boot
  // without fetching), one entry per label it was fetched under, sorted by label. Does not
  // count as use.
  std::vector<CachedArtifact> List() const;

  const std::string& dir() const { return dir_; }

 private:
  // Evicts least recently used files until the cache fits max_bytes_; `keep` stays.
  void Trim(const std::string& keep);

  std::string dir_;
  uint64_t max_bytes_;
};

}  // namespace faultline::agent
