#include "kbuild/files.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace faultline::kbuild {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::Status WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path, uint64_t* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  Sha256 h;
  std::vector<char> buffer(1 << 20);
  *bytes = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    h.Update(buffer.data(), static_cast<size_t>(n));
    *bytes += static_cast<uint64_t>(n);
  }
  return h.Hex();
}

}  // namespace faultline::kbuild
