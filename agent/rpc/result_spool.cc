#include "agent/rpc/result_spool.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "agent/durable_file.h"
#include "common/read_file.h"

namespace faultline::agent {
namespace {

constexpr char kSuffix[] = ".result";

bool SafeAttempt(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

}  // namespace

absl::StatusOr<std::string> ResultSpool::Put(const v1::ReportResultRequest& result) {
  if (result.run_id() <= 0 || !SafeAttempt(result.attempt_id())) {
    return absl::InvalidArgumentError("a result without a valid run and attempt id");
  }
  // Zero-padded run id: names sort oldest run first.
  char run[32];
  std::snprintf(run, sizeof(run), "%020lld", static_cast<long long>(result.run_id()));
  std::string name = absl::StrCat("run-", run, "-", result.attempt_id(), kSuffix);
  std::string bytes;
  if (!result.SerializeToString(&bytes)) return absl::InternalError("serializing a result");
  absl::Status s = WriteFileDurably(dir_, name, bytes);
  if (!s.ok()) return s;
  return name;
}

absl::Status ResultSpool::Remove(const std::string& name) {
  return RemoveFileDurably(dir_, name);
}

absl::StatusOr<std::vector<std::string>> ResultSpool::List() const {
  std::vector<std::string> names;
  std::error_code ec;
  if (!std::filesystem::exists(dir_, ec)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > sizeof(kSuffix) - 1 &&
        name.compare(name.size() - (sizeof(kSuffix) - 1), std::string::npos, kSuffix) == 0) {
      names.push_back(name);
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir_, ": ", ec.message()));
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<v1::ReportResultRequest> ResultSpool::Load(const std::string& name) {
  auto bytes = ReadFile(dir_ + "/" + name);
  if (!bytes.ok()) return bytes.status();
  v1::ReportResultRequest result;
  if (!result.ParseFromString(*bytes) || result.run_id() <= 0) {
    std::error_code ec;
    std::filesystem::rename(dir_ + "/" + name, dir_ + "/" + name + ".bad", ec);
    return absl::DataLossError(
        absl::StrCat(dir_, "/", name, " does not hold a result (set aside as .bad)"));
  }
  return result;
}

}  // namespace faultline::agent
