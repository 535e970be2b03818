#pragma once
// Files for kbuild's tests (kbuild_test.cc, sandbox_test.cc): a stand-in tree's files
// written with their directories, and read back whole.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace faultline::kbuild::testing {

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `text` into `path` (its directories made), with `mode`.
inline void Put(const std::string& path, const std::string& text, int mode = 0644) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

}  // namespace faultline::kbuild::testing
