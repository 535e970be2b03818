#pragma once
// The robot's intake: the list archive read on from where it was, each patch mail kept (a
// bad one kept apart as bytes with its reason), and each posted series assembled and decided
// once (robot/choose.h: whole, and touching mm or opted in). A decided series is stored
// assembled — its mbox and its patches' Message-IDs — so the rooms after it never rebuild
// it from raw mails.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "robot/series.h"
#include "services/controller/robot/options.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class RobotIntake {
 public:
  RobotIntake(const Stores& stores, const RobotOptions& options)
      : stores_(stores), options_(options) {}

  struct Read {
    std::vector<std::pair<std::string, int>> touched;  // (thread root, version) with new mails
    std::vector<std::string> own;  // Message-IDs of the robot's own mails seen in the archive
  };
  // Reads this pass's share of the archive (options' limits) and keeps its mails.
  absl::StatusOr<Read> ReadArchive(RobotPass& pass);
  // Decides every whole series of a thread root and version not decided yet.
  absl::Status Decide(const std::string& root, int version, RobotPass& pass);

 private:
  Stores stores_;
  const RobotOptions& options_;
};

// A stored series' mails assembled again from the kept raw mails (the reply to a series that
// does not apply quotes its hunk; series decided before their mbox was stored).
absl::StatusOr<robot::Series> LoadSeriesMails(RobotStore& store, const SeriesRecord& series);

}  // namespace faultline::controller
