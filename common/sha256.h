#pragma once
// SHA-256 (OpenSSL), for content addresses, token hashes, build keys and S3 signatures: the
// only place in the tree that calls OpenSSL's SHA-256 (scripts/check-house.sh holds it), and
// the tree's one hex encoder.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace faultline {

// Incremental: Update() any number of times, then Hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  std::string Hex();

 private:
  EVP_MD_CTX* ctx_;
};

std::string Sha256Hex(std::string_view data);
// The 32 bytes themselves, and HMAC-SHA256 (S3's request signatures).
std::string Sha256Digest(std::string_view data);
std::string HmacSha256(std::string_view key, std::string_view data);
// A file's sha256 in hex, read in 1 MiB pieces; its size in *bytes when given. A missing file
// is NOT_FOUND; every error names the path.
absl::StatusOr<std::string> Sha256OfFile(const std::string& path, uint64_t* bytes = nullptr);

// Bytes as lowercase hex, two digits each.
std::string LowerHex(std::string_view bytes);

// 64 lowercase hex characters (a sha256 as faultline writes it; safe as a file name).
bool IsSha256Hex(std::string_view text);

}  // namespace faultline
