#include "agent/artifact_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace faultline::agent {
namespace {

constexpr char kPartialSuffix[] = ".partial";
constexpr char kMetaSuffix[] = ".meta";
// A download is fsync'd every this many bytes (and when it stops): an fsync per chunk would
// dominate on a board's SD card, and a power cut loses at most this much of the download.
constexpr uint64_t kSyncEveryBytes = 4 << 20;

absl::Status Errno(const std::string& what) {
  const int e = errno;
  const std::string message = absl::StrCat(what, ": ", std::strerror(e));
  return e == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("write " + path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status SyncDirectory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Errno("open " + dir);
  if (::fsync(fd.get()) != 0) return Errno("fsync " + dir);
  return absl::OkStatus();
}

// Written to a temporary file, fsync'd and renamed: the .meta is whole or absent.
absl::Status WriteMeta(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Errno("open " + tmp);
    if (absl::Status s = WriteAll(fd.get(), content, tmp); !s.ok()) return s;
    if (::fsync(fd.get()) != 0) return Errno("fsync " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename " + tmp);
  return absl::OkStatus();
}

std::string MetaText(const std::string& release, const std::vector<std::string>& labels,
                     uint64_t bytes) {
  std::string out = absl::StrCat("release=", release, "\n");
  for (const std::string& label : labels) absl::StrAppend(&out, "label=", label, "\n");
  absl::StrAppend(&out, "bytes=", bytes, "\n");
  return out;
}

// The artifact at DIR/<sha> with its .meta, if the .meta is there and `require_meta`.
std::optional<CachedArtifact> Load(const std::string& dir, const std::string& sha256,
                                   bool require_meta) {
  CachedArtifact a;
  a.sha256 = sha256;
  a.path = absl::StrCat(dir, "/", sha256);
  struct stat st {};
  if (::stat(a.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  a.bytes = static_cast<uint64_t>(st.st_size);
  std::optional<std::string> meta = ReadFileToString(a.path + kMetaSuffix, nullptr);
  if (!meta.has_value()) {
    if (require_meta) return std::nullopt;
    return a;
  }
  for (absl::string_view line : absl::StrSplit(*meta, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "release=")) a.release = std::string(line.substr(8));
    if (absl::StartsWith(line, "label=")) a.labels.emplace_back(line.substr(6));
  }
  if (!a.labels.empty()) a.label = a.labels.front();
  return a;
}

// Marks a file recently used.
void Touch(const std::string& path) {
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
}

}  // namespace

ArtifactCache::ArtifactCache(std::string dir, uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
}

std::optional<CachedArtifact> ArtifactCache::Find(const std::string& sha256) {
  if (!IsSha256Hex(sha256)) return std::nullopt;
  std::optional<CachedArtifact> a = Load(dir_, sha256, /*require_meta=*/false);
  if (a) Touch(a->path);
  return a;
}

absl::StatusOr<CachedArtifact> ArtifactCache::Fetch(
    const std::string& sha256, uint64_t bytes, const std::string& release, const std::string& label,
    ArtifactSource& source, const std::function<void(uint64_t, uint64_t)>& progress) {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact sha256 must be 64 lowercase hex characters, got \"", sha256, "\""));
  }
  if (absl::StrContains(release, '\n') || absl::StrContains(label, '\n')) {
    return absl::InvalidArgumentError("artifact release and label must be single lines");
  }
  const std::string path = absl::StrCat(dir_, "/", sha256);
  const std::string meta = path + kMetaSuffix;
  if (std::optional<CachedArtifact> present = Find(sha256)) {
    // A crash between the rename and the .meta leaves a verified file without metadata.
    if (::access(meta.c_str(), F_OK) != 0) {
      if (absl::Status s = WriteMeta(meta, MetaText(release, {label}, present->bytes)); !s.ok()) {
        return s;
      }
      present->release = release;
      present->label = label;
      present->labels = {label};
    } else if (std::find(present->labels.begin(), present->labels.end(), label) ==
               present->labels.end()) {
      // The same image under another label: the board must know it by that label too.
      // The oldest labels go past kMaxLabelsPerImage: a nightly schedule on a branch that
      // does not move fetches one image under a new label every night.
      present->labels.push_back(label);
      if (present->labels.size() > kMaxLabelsPerImage) {
        present->labels.erase(present->labels.begin(),
                              present->labels.end() - static_cast<long>(kMaxLabelsPerImage));
        present->label = present->labels.front();
      }
      if (absl::Status s =
              WriteMeta(meta, MetaText(present->release, present->labels, present->bytes));
          !s.ok()) {
        return s;
      }
    }
    return *present;
  }

  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", dir_, ": ", ec.message()));
  const std::string partial = path + kPartialSuffix;
  auto drop_partial = [&partial] { ::unlink(partial.c_str()); };
  {
    Fd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Errno("open " + partial);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Errno("stat " + partial);
    uint64_t offset = static_cast<uint64_t>(st.st_size);
    if (offset > bytes) {
      drop_partial();
      return absl::DataLossError(absl::StrCat(partial, " has ", offset, " bytes, more than the ",
                                              bytes, " expected; removed"));
    }
    if (progress) progress(offset, bytes);
    if (offset < bytes) {
      uint64_t unsynced = 0;
      // The sink's own error wins over what the source makes of it.
      absl::Status sink_error;
      absl::Status read = source.Read(sha256, offset, [&](absl::string_view chunk) -> absl::Status {
        if (chunk.size() > bytes - offset) {
          sink_error = absl::DataLossError(
              absl::StrCat("artifact ", sha256, " is longer than the ", bytes, " bytes expected"));
          return sink_error;
        }
        sink_error = WriteAll(fd.get(), chunk, partial);
        if (!sink_error.ok()) return sink_error;
        offset += chunk.size();
        unsynced += chunk.size();
        if (unsynced >= kSyncEveryBytes) {
          if (::fsync(fd.get()) != 0) return sink_error = Errno("fsync " + partial);
          unsynced = 0;
        }
        if (progress) progress(offset, bytes);
        return absl::OkStatus();
      });
      // What arrived is kept for the next try, whatever stopped the stream.
      const absl::Status synced =
          ::fsync(fd.get()) == 0 ? absl::OkStatus() : Errno("fsync " + partial);
      if (absl::IsDataLoss(sink_error)) {
        drop_partial();
        return sink_error;
      }
      if (!sink_error.ok()) return sink_error;
      if (!read.ok()) return read;
      if (!synced.ok()) return synced;
    }
  }

  absl::StatusOr<std::string> actual = Sha256OfFile(partial);
  if (!actual.ok()) return actual.status();
  if (*actual != sha256) {
    struct stat st {};
    const uint64_t got = ::stat(partial.c_str(), &st) == 0 ? st.st_size : 0;
    drop_partial();
    return absl::DataLossError(absl::StrCat("artifact sha256 mismatch: expected ", sha256, ", got ",
                                            *actual, " (", got, " of ", bytes,
                                            " bytes); download removed"));
  }
  if (::rename(partial.c_str(), path.c_str()) != 0) return Errno("rename " + partial);
  Touch(path);  // a resumed download may have been written long ago
  if (absl::Status s = WriteMeta(meta, MetaText(release, {label}, bytes)); !s.ok()) return s;
  if (absl::Status s = SyncDirectory(dir_); !s.ok()) return s;
  Trim(sha256);

  CachedArtifact a;
  a.sha256 = sha256;
  a.path = path;
  a.bytes = bytes;
  a.release = release;
  a.label = label;
  a.labels = {label};
  return a;
}

std::vector<CachedArtifact> ArtifactCache::List() const {
  std::vector<CachedArtifact> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsSha256Hex(name)) continue;
    if (std::optional<CachedArtifact> a = Load(dir_, name, /*require_meta=*/true)) {
      for (const std::string& label : a->labels) {
        CachedArtifact one = *a;
        one.label = label;
        out.push_back(std::move(one));
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const CachedArtifact& a, const CachedArtifact& b) {
    return std::tie(a.label, a.sha256) < std::tie(b.label, b.sha256);
  });
  return out;
}

void ArtifactCache::Trim(const std::string& keep) {
  struct File {
    std::string name;  // <sha> or <sha>.partial
    struct timespec mtime;
    uint64_t bytes;
  };
  std::vector<File> files;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    absl::string_view sha = name;
    if (absl::EndsWith(sha, kPartialSuffix)) sha.remove_suffix(std::strlen(kPartialSuffix));
    if (!IsSha256Hex(std::string_view(sha.data(), sha.size()))) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    total += static_cast<uint64_t>(st.st_size);
    if (name != keep) files.push_back({name, st.st_mtim, static_cast<uint64_t>(st.st_size)});
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return std::tie(a.mtime.tv_sec, a.mtime.tv_nsec, a.name) <
           std::tie(b.mtime.tv_sec, b.mtime.tv_nsec, b.name);
  });
  bool removed = false;
  for (const File& f : files) {
    if (total <= max_bytes_) break;
    const std::string path = absl::StrCat(dir_, "/", f.name);
    if (::unlink(path.c_str()) != 0) continue;
    // The artifact goes first: a .meta left by a crash here is ignored (List needs both).
    if (IsSha256Hex(f.name)) ::unlink((path + kMetaSuffix).c_str());
    total -= f.bytes;
    removed = true;
  }
  if (removed) SyncDirectory(dir_).IgnoreError();
}

}  // namespace faultline::agent
