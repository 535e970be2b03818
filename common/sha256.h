#pragma once
// SHA-256 in lowercase hex (OpenSSL), for content addresses, token hashes and build keys.
#include <cstddef>
#include <string>
#include <string_view>

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

// 64 lowercase hex characters (a sha256 as faultline writes it; safe as a file name).
bool IsSha256Hex(std::string_view text);

}  // namespace faultline
