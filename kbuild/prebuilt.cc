#include "kbuild/prebuilt.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/read_file.h"
#include "common/sha256.h"
#include "kbuild/files.h"
#include "kbuild/process.h"

namespace faultline::kbuild {
namespace fs = std::filesystem;
namespace {

uint32_t Le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// The first word of a NUL- or space-terminated string at `at`: a release.
std::string ReleaseAt(const std::string& b, size_t at) {
  std::string out;
  for (size_t i = at; i < b.size() && out.size() < 128; ++i) {
    const char c = b[i];
    if (c == '\0' || c == ' ' || c == '\n') break;
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return "";
    out.push_back(c);
  }
  return out;
}

// The release in the "Linux version <release> (" banner (linux_banner), if any.
std::string BannerRelease(const std::string& b) {
  static const std::string kBanner = "Linux version ";
  for (size_t at = b.find(kBanner); at != std::string::npos; at = b.find(kBanner, at + 1)) {
    std::string r = ReleaseAt(b, at + kBanner.size());
    const size_t end = at + kBanner.size() + r.size();
    // The banner itself, not a message that mentions it ("Linux version %s").
    if (!r.empty() && r[0] != '%' && end + 1 < b.size() && b[end] == ' ' && b[end + 1] == '(') {
      return r;
    }
  }
  return "";
}

bool ValidUrl(const std::string& url) {
  if (url.empty() || url.size() > 2048) return false;
  for (char c : url) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return false;
  }
  return absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://") ||
         absl::StartsWith(url, "file:///");
}

}  // namespace

absl::StatusOr<ImageInfo> InspectImage(const std::string& path) {
  absl::StatusOr<std::string> b = ReadFile(path);
  if (!b.ok()) return b.status();
  ImageInfo info;
  if (b->size() >= 0x240 && b->compare(0x202, 4, "HdrS") == 0) {
    info.arch = "x86_64";
    info.format = "x86 bzImage";
    // kernel_version (boot protocol 2.00+): the string's offset minus 0x200.
    const uint16_t kv = static_cast<uint16_t>(static_cast<unsigned char>((*b)[0x20e]) |
                                              (static_cast<unsigned char>((*b)[0x20f]) << 8));
    if (kv != 0 && kv + 0x200u < b->size()) info.release = ReleaseAt(*b, kv + 0x200u);
    return info;
  }
  if (b->size() >= 0x40 && Le32(*b, 0x38) == 0x644d5241) {  // "ARM\x64"
    info.arch = "aarch64";
    info.format = "arm64 Image";
  } else if (b->size() >= 0x40 && b->compare(0x38, 4, "RSC\x05") == 0) {
    info.arch = "riscv64";
    info.format = "riscv Image";
  } else {
    std::string what = "unknown";
    if (b->compare(0, 4,
                   "\x7f"
                   "ELF") == 0)
      what = "an ELF file (a vmlinux, not a boot image)";
    if (b->compare(0, 2, "\x1f\x8b") == 0) what = "gzip data (an Image.gz: give the Image)";
    if (b->compare(0, 2, "MZ") == 0) what = "a PE/EFI file without a known kernel header";
    return absl::InvalidArgumentError(absl::StrCat(
        "image: not a boot image faultline knows (x86 bzImage, arm64 or riscv Image): ", what));
  }
  info.release = BannerRelease(*b);
  return info;
}

absl::StatusOr<Artifact> FetchImage(const std::string& cache, const PrebuiltRequest& request,
                                    const std::function<void(const std::string&)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  if (!ValidUrl(request.url)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "image: '", request.url.substr(0, 80), "' is not an http://, https:// or file:/// URL"));
  }
  if (!IsSha256Hex(request.sha256)) {
    return absl::InvalidArgumentError("image: sha256 must be 64 lowercase hex characters");
  }
  if (absl::StatusOr<ArchInfo> a = ArchFor(request.arch); !a.ok()) return a.status();
  const std::string final_dir = absl::StrCat(cache, "/images/", request.sha256);
  std::error_code ec;
  auto check = [&](const ImageInfo& info) -> absl::Status {
    if (info.arch != request.arch) {
      return absl::InvalidArgumentError(absl::StrCat("image: ", request.url, " is an ", info.format,
                                                     ", the job says ", request.arch));
    }
    if (!request.release.empty() && !info.release.empty() && info.release != request.release) {
      return absl::InvalidArgumentError(
          absl::StrCat("image: its release is ", info.release, ", the job says ", request.release));
    }
    if (request.release.empty() && info.release.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image: the ", info.format, " does not say its release: give `release` (its uname -r)"));
    }
    return absl::OkStatus();
  };
  if (absl::StatusOr<Artifact> found = ReadArtifact(final_dir); found.ok()) {
    uint64_t bytes = 0;
    absl::StatusOr<std::string> sha = Sha256OfFile(found->image, &bytes);
    absl::StatusOr<ImageInfo> info = InspectImage(found->image);
    if (sha.ok() && *sha == request.sha256 && info.ok()) {
      if (absl::Status s = check(*info); !s.ok()) return s;
      found->cached = true;
      found->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      say(absl::StrCat("found ", found->release, " in the cache (sha256 ",
                       request.sha256.substr(0, 12), ")"));
      return found;
    }
    fs::remove_all(final_dir, ec);  // damaged: fetch it again
  }
  fs::create_directories(cache + "/images", ec);
  // Of this call alone: the builder's lanes may fetch the same image at once.
  static std::atomic<int> next{0};
  const std::string tmp = absl::StrCat(final_dir, ".tmp-", ::getpid(), "-", next++);
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", ec.message()));
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code e;
      if (!dir.empty()) fs::remove_all(dir, e);
    }
  } cleanup{tmp};
  const std::string name = fs::path(request.url).filename().string();
  const std::string image =
      absl::StrCat(tmp, "/", name.empty() || name[0] == '.' ? "image" : name.substr(0, 128));
  say(absl::StrCat("fetch ", request.url));
  const auto fetch_started = std::chrono::steady_clock::now();
  absl::StatusOr<Finished> got =
      Run({{"curl", "--fail", "--silent", "--show-error", "--location", "--proto",
            "=http,https,file", "--retry", "3", "--connect-timeout", "30", "--max-filesize",
            absl::StrCat(request.max_bytes), "--output", image, request.url},
           "",
           {},
           ""});
  if (!got.ok()) {
    return absl::UnavailableError(absl::StrCat("image: cannot run curl: ", got.status().message()));
  }
  if (got->exit_code == 63) {
    return absl::InvalidArgumentError(absl::StrCat("image: ", request.url, " is over the limit of ",
                                                   request.max_bytes, " bytes"));
  }
  if (got->exit_code != 0) {
    return absl::UnavailableError(
        absl::StrCat("image: fetching ", request.url, " failed (curl exit ", got->exit_code,
                     "): ", std::string(absl::StripAsciiWhitespace(Tail(got->output, 3)))));
  }
  const double fetch_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fetch_started).count();
  Artifact a;
  absl::StatusOr<std::string> sha = Sha256OfFile(image, &a.image_bytes);
  if (!sha.ok()) return sha.status();
  if (a.image_bytes > request.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("image: ", request.url, " is ", a.image_bytes,
                                                   " bytes, over the limit of ", request.max_bytes,
                                                   " bytes"));
  }
  if (*sha != request.sha256) {
    return absl::InvalidArgumentError(absl::StrCat("image: the sha256 of ", request.url, " is ",
                                                   *sha, ", the job says ", request.sha256));
  }
  absl::StatusOr<ImageInfo> info = InspectImage(image);
  if (!info.ok()) return info.status();
  if (absl::Status s = check(*info); !s.ok()) return s;
  a.key = request.sha256;
  a.arch = request.arch;
  a.release = info->release.empty() ? request.release : info->release;
  a.image_sha256 = *sha;
  a.image = final_dir + "/" + fs::path(image).filename().string();
  a.build_seconds = fetch_seconds;
  if (absl::Status s = WriteFile(tmp + "/" + kMetaFile, ArtifactMeta(a)); !s.ok()) return s;
  fs::rename(tmp, final_dir, ec);
  if (ec && !fs::exists(final_dir + "/" + kMetaFile)) {
    return absl::InternalError(absl::StrCat("cannot store the image: ", ec.message()));
  }
  cleanup.dir = ec ? tmp : "";  // another fetch stored it first: keep theirs
  absl::StatusOr<Artifact> stored = ReadArtifact(final_dir);
  if (!stored.ok()) return stored.status();
  stored->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  say(absl::StrCat("fetched ", stored->release, " (", info->format, ", ", stored->image_bytes,
                   " bytes) in ", absl::StrCat(static_cast<int>(fetch_seconds * 1000)), " ms"));
  return stored;
}

}  // namespace faultline::kbuild
