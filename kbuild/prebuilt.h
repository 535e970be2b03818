#pragma once
// Prebuilt kernels, as LAVA takes them: a boot image named by URL and sha256. The builder
// fetches it once into its cache, checks the sha256, the size and that the image is a boot
// image of the arch the job names, and reads its release (uname -r) from the image itself;
// from there it travels as a built kernel does (stored by the controller, fetched and
// verified by the boards).
//
// Cache: <cache>/images/<sha256>/ (artifact.meta and the image), written under a temporary
// name and renamed whole, as built kernels are.
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kbuild/builder.h"

namespace faultline::kbuild {

struct PrebuiltRequest {
  std::string url;      // http://, https:// or file:// (a path on the builder)
  std::string sha256;   // of the image, 64 hex: required
  std::string arch;     // x86_64 | aarch64 | riscv64
  std::string release;  // its uname -r; "": read from the image
  uint64_t max_bytes = 256ull << 20;
};

// What a boot image says of itself.
struct ImageInfo {
  std::string arch;     // x86_64 (a bzImage), aarch64 or riscv64 (an Image)
  std::string format;   // "x86 bzImage", "arm64 Image", "riscv Image"
  std::string release;  // "" when the image does not say
};

// Reads the boot protocol header (x86: "HdrS" at 0x202 and the kernel_version string it
// points to; arm64: "ARM\x64" at 0x38; riscv: "RSC\x05" at 0x38) and, for the uncompressed
// arm64 and riscv Images, the release from the "Linux version " banner. INVALID_ARGUMENT
// for anything else (a compressed Image.gz, an EFI zboot image, a vmlinux ELF).
absl::StatusOr<ImageInfo> InspectImage(const std::string& path);

// Fetches (or finds in the cache) the image `request` names. Errors say what was wrong:
// INVALID_ARGUMENT for a bad URL, sha256 or arch, an image whose sha256 differs (both
// named), one over max_bytes, one of another arch or format, a release that differs from
// the image's; UNAVAILABLE when the fetch itself failed (curl's message).
absl::StatusOr<Artifact> FetchImage(const std::string& cache, const PrebuiltRequest& request,
                                    const std::function<void(const std::string&)>& progress = {});

}  // namespace faultline::kbuild
