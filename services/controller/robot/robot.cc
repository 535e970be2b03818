#include "services/controller/robot/robot.h"

#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "services/controller/core/lifecycle.h"

namespace faultline::controller {

bool PassDeadline::Past(const char* step) const {
  if (NowMs(clock_) <= end_ms_) return false;
  log::warn("event=robot_pass_deadline step={} pass_seconds={} note=\"the rest next pass\"", step,
            seconds_);
  return true;
}

absl::StatusOr<RobotPass> SeriesRobot::RunOnce() {
  if (stores_.robot == nullptr) return absl::FailedPreconditionError("no robot store");
  RobotPass pass;
  const PassDeadline deadline(clock_, options_.pass_seconds);
  const bool replies = outbox_.replies();
  if (replies) {
    if (absl::Status s = outbox_.SettleInterrupted(); !s.ok()) return s;
  }
  absl::StatusOr<RobotIntake::Read> read = intake_.ReadArchive(pass);
  if (!read.ok()) return read.status();
  // A step that fails for one series is logged and counted; the other series go on (the
  // failed one is tried again next pass).
  auto isolated = [&](const std::string& what, const std::string& id, const absl::Status& s) {
    if (s.ok()) return;
    ++pass.errors;
    log::warn("event=robot_series_step_failed step={} id=\"{}\" error=\"{}\"", what, id,
              std::string(s.message()));
  };
  if (replies) {
    for (const std::string& id : read->own) isolated("archived", id, outbox_.NoteArchived(id));
  }
  for (const auto& [root, version] : read->touched) {
    isolated("decide", root, intake_.Decide(root, version, pass));
  }
  for (SeriesState state : {SeriesState::kChosen, SeriesState::kSubmitted}) {
    // Chosen series are submitted series_per_pass at a time, oldest first: a flood of
    // series waits its turn instead of filling the queue in one pass.
    absl::StatusOr<std::vector<SeriesRecord>> open = stores_.robot->ListSeries(
        state, state == SeriesState::kChosen ? options_.series_per_pass : 100);
    if (!open.ok()) return open.status();
    for (SeriesRecord& series : *open) {
      const std::string id = series.id;
      isolated(state == SeriesState::kChosen ? "submit" : "measured", id,
               state == SeriesState::kChosen ? jobs_.Submit(std::move(series), pass)
                                             : jobs_.CheckMeasured(std::move(series), pass));
    }
  }
  if (replies) {
    for (SeriesState state : {SeriesState::kMeasured, SeriesState::kDoesNotApply}) {
      absl::StatusOr<std::vector<SeriesRecord>> answerable = stores_.robot->ListSeries(state, 100);
      if (!answerable.ok()) return answerable.status();
      for (const SeriesRecord& series : *answerable)
        isolated("reply", series.id, outbox_.QueueReply(series));
    }
    if (options_.replies.culprits) {
      if (absl::Status s = outbox_.QueueCulpritMails(); !s.ok()) return s;
    }
    if (absl::Status s = outbox_.SendQueuedReplies(deadline, pass); !s.ok()) return s;
  }
  if (absl::Status s = outbox_.PostDueChecks(deadline, pass); !s.ok()) return s;
  return pass;
}

}  // namespace faultline::controller
