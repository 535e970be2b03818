#include "agent/sys/pstore.h"

#include <filesystem>
#include <system_error>

#include "agent/sys/file_io.h"

namespace faultline::sys {
namespace fs = std::filesystem;

std::string PreviousBootLog(const std::string& dir, size_t max_bytes) {
  std::error_code ec;
  fs::path newest;
  fs::file_time_type newest_time;
  int newest_rank = -1;  // console records before kernel logs
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const int rank = name.rfind("console-", 0) == 0 ? 1 : name.rfind("dmesg-", 0) == 0 ? 0 : -1;
    if (rank < 0 || !entry.is_regular_file(ec)) continue;
    const fs::file_time_type t = entry.last_write_time(ec);
    if (rank > newest_rank || (rank == newest_rank && t > newest_time)) {
      newest = entry.path();
      newest_time = t;
      newest_rank = rank;
    }
  }
  if (newest_rank < 0) return "";
  std::string error;
  std::optional<std::string> text = ReadFileToString(newest.string(), &error);
  if (!text) return "";
  std::string out = text->size() > max_bytes ? text->substr(text->size() - max_bytes) : *text;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (c != '\n' && c != '\t' && (u < 0x20 || u > 0x7e)) c = '?';
  }
  return out;
}

}  // namespace faultline::sys
