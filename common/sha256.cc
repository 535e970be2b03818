#include "common/sha256.h"

#include <openssl/evp.h>

namespace faultline {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
}
Sha256::~Sha256() {
  EVP_MD_CTX_free(ctx_);
}

void Sha256::Update(const void* data, size_t size) {
  EVP_DigestUpdate(ctx_, data, size);
}

std::string Sha256::Hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_DigestFinal_ex(ctx_, digest, &size);
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (unsigned i = 0; i < size; ++i) {
    out += kDigits[digest[i] >> 4];
    out += kDigits[digest[i] & 15];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.Hex();
}

bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace faultline
