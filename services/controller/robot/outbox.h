#pragma once
// The robot's outbox: what it says and to whom, each sent once. A measured series' reply in
// its thread (robot/verdict.h says what), the patchwork checks on its patches, and the mails
// to the authors of confirmed culprits of change-point bisections — queued in the store,
// then sent by the pass within its deadline: an SMTP or patchwork server that is slow or
// down costs a pass its tail, never a mail twice.
#include <string>

#include "absl/status/status.h"
#include "robot/reply.h"
#include "services/controller/robot/options.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

class RobotOutbox {
 public:
  RobotOutbox(const Stores& stores, const RobotOptions& options, const Clock* clock)
      : stores_(stores), options_(options), clock_(clock) {}

  bool replies() const { return !options_.replies.from.empty(); }

  // A reply left "sending" went out or not: the controller died between writing "sending"
  // and "sent". Never sent again (uncertain; the archive may tell).
  absl::Status SettleInterrupted();
  // The robot's own mail read back from the archive: it went out.
  absl::Status NoteArchived(const std::string& message_id);
  // The reply to a measured (or not applying) series, and its verdict checks: once each,
  // whatever a repeat of this does; the series is replied then.
  absl::Status QueueReply(const SeriesRecord& series);
  // The mails to the authors of confirmed culprits of bisections started from a change
  // point, queued once each (series_id "bisection/<id>", kind "culprit").
  absl::Status QueueCulpritMails();
  // Queues the check `kind` (pending | verdict) for every patch of the series: patchwork
  // shows the newest check of a context, the verdict replaces the pending one.
  absl::Status QueueChecks(const SeriesRecord& series, CheckKind kind, CheckState state,
                           const std::string& description) const;
  // Sends the queued replies (rate-limited) and posts the due checks (one patchwork refuses
  // is tried again later, up to 8 times) until `deadline`.
  absl::Status SendQueuedReplies(const PassDeadline& deadline, RobotPass& pass);
  absl::Status PostDueChecks(const PassDeadline& deadline, RobotPass& pass);

 private:
  absl::Status Deliver(const ReplyRecord& reply, bool* maybe_delivered) const;
  // From, Cc and Date of the robot's mails (now).
  robot::ReplyOptions MailOptions() const;
  int64_t NowMs() const { return PassDeadline::NowMs(clock_); }

  Stores stores_;
  const RobotOptions& options_;
  const Clock* clock_;  // null: the system's
};

}  // namespace faultline::controller
