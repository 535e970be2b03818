#pragma once
// The agent's result spool: every result is written to the board's disk (durably) before
// it is sent, and removed only once the controller has acknowledged it or refused it for
// good. After a crash, a reboot or a long partition the agent sends what the spool holds
// before it says hello (a hello releases the board's runs, and a result must reach the
// controller while its attempt is still the current one). Uploads are idempotent on the
// controller, so a result sent twice is stored once.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "faultline/v1/agent.pb.h"

namespace faultline::agent {

class ResultSpool {
 public:
  explicit ResultSpool(std::string dir) : dir_(std::move(dir)) {}

  // One file per (run, attempt): a re-put of the same attempt replaces it.
  absl::StatusOr<std::string> Put(const v1::ReportResultRequest& result);
  absl::Status Remove(const std::string& name);
  // Names of the spooled results, oldest run first.
  absl::StatusOr<std::vector<std::string>> List() const;
  // DATA_LOSS for a file that does not parse (it is then set aside as NAME.bad).
  absl::StatusOr<v1::ReportResultRequest> Load(const std::string& name);

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace faultline::agent
