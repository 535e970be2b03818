#include "kbuild/files.h"

#include <fstream>

#include "absl/strings/str_cat.h"

namespace faultline::kbuild {

absl::Status WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace faultline::kbuild
