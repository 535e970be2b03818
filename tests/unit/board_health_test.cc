// The controller's verdict on a board after a hello that may settle a kernel switch.
#include "services/controller/core/board_health.h"
#include "services/controller/core/lifecycle.h"

#include <gtest/gtest.h>

namespace faultline::controller {
namespace {

BoardSummary Hello(std::vector<std::string> running, std::string boot_id,
                   BoardHealth health = BoardHealth::kOk, std::string reason = "") {
  BoardSummary b;
  b.name = "x1";
  b.running_kernel_labels = std::move(running);
  b.boot_id = std::move(boot_id);
  b.health = health;
  b.health_reason = std::move(reason);
  return b;
}

TEST(HealthAfterHello, NoSwitchInFlightTakesTheAgentsWord) {
  EXPECT_EQ(HealthAfterHello(std::nullopt, Hello({"vanilla"}, "b1")).health, BoardHealth::kOk);
  HealthVerdict h =
      HealthAfterHello(std::nullopt, Hello({}, "b1", BoardHealth::kNeedsCheck, "grub fell back"));
  EXPECT_EQ(h.health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(h.reason, "grub fell back");
}

TEST(HealthAfterHello, ASwitchMustComeBackFromANewBootOnTheLabel) {
  SwitchInFlight s{"patched", "b1"};
  EXPECT_EQ(HealthAfterHello(s, Hello({"patched"}, "b2")).health, BoardHealth::kOk);
  EXPECT_EQ(HealthAfterHello(s, Hello({"patched", "patched-again"}, "b2")).health,
            BoardHealth::kOk);

  HealthVerdict same_boot = HealthAfterHello(s, Hello({"vanilla"}, "b1"));
  EXPECT_EQ(same_boot.health, BoardHealth::kNeedsCheck);
  EXPECT_NE(same_boot.reason.find("did not reboot"), std::string::npos) << same_boot.reason;

  HealthVerdict wrong = HealthAfterHello(s, Hello({"vanilla"}, "b2"));
  EXPECT_EQ(wrong.health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(wrong.reason, "switch to 'patched': the board came back running [vanilla]");

  HealthVerdict unknown = HealthAfterHello(s, Hello({}, "b2"));
  EXPECT_EQ(unknown.reason,
            "switch to 'patched': the board came back running no configured kernel");

  // The agent's own finding wins over the controller's.
  HealthVerdict agent =
      HealthAfterHello(s, Hello({"patched"}, "b2", BoardHealth::kNeedsCheck, "disk full"));
  EXPECT_EQ(agent.health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(agent.reason, "disk full");
}

// An agent that reports unbooted switches itself: healthy on the same boot means the
// switch never began (it restarted while fetching the image): ordered again, not a failure.
TEST(HealthAfterHello, ASameBootHelloFromAnAgentThatReportsUnbootedSwitchesIsNotAFailure) {
  SwitchInFlight s{"patched", "b1"};
  BoardSummary restarted = Hello({"vanilla"}, "b1");
  restarted.reports_unbooted_switches = true;
  HealthVerdict v = HealthAfterHello(s, restarted);
  EXPECT_EQ(v.health, BoardHealth::kOk);
  EXPECT_TRUE(v.switch_not_begun);
  EXPECT_EQ(v.reason, "");

  // Its own needs-check (the boot commands ran, no reboot) still wins.
  BoardSummary failed = Hello({"vanilla"}, "b1", BoardHealth::kNeedsCheck, "no reboot in 60s");
  failed.reports_unbooted_switches = true;
  HealthVerdict f = HealthAfterHello(s, failed);
  EXPECT_EQ(f.health, BoardHealth::kNeedsCheck);
  EXPECT_FALSE(f.switch_not_begun);

  // A new boot on another kernel is a failed switch whatever the agent reports.
  BoardSummary other = Hello({"vanilla"}, "b2");
  other.reports_unbooted_switches = true;
  HealthVerdict o = HealthAfterHello(s, other);
  EXPECT_EQ(o.health, BoardHealth::kNeedsCheck);
  EXPECT_FALSE(o.switch_not_begun);

  // Without the capability (an older agent) the same-boot hello stays a failure.
  EXPECT_FALSE(HealthAfterHello(s, Hello({"vanilla"}, "b1")).switch_not_begun);
}

// The stored spellings are what the database's CHECK constraints, the metrics' labels and
// the lab scripts use: every state reads back as itself and nothing else parses.
TEST(StateSpellings, EveryStateRoundTripsAndUnknownTextIsRefused) {
  for (BoardHealth h : {BoardHealth::kOk, BoardHealth::kSwitching, BoardHealth::kNeedsCheck}) {
    EXPECT_EQ(ParseBoardHealth(ToString(h)), h);
  }
  EXPECT_EQ(ToString(BoardHealth::kNeedsCheck), "needs-check");
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled}) {
    EXPECT_EQ(ParseJobState(ToString(s)), s);
  }
  for (RunState s : {RunState::kQueued, RunState::kAssigned, RunState::kRunning,
                     RunState::kSucceeded, RunState::kFailed, RunState::kCancelled}) {
    EXPECT_EQ(ParseRunState(ToString(s)), s);
  }
  for (ChangePointState s : {ChangePointState::kOpen, ChangePointState::kAcknowledged,
                             ChangePointState::kFixed, ChangePointState::kInvalid}) {
    EXPECT_EQ(ParseChangePointState(ToString(s)), s);
  }
  EXPECT_EQ(ParseBoardHealth("needs_check"), std::nullopt);
  EXPECT_EQ(ParseBoardHealth("OK"), std::nullopt);
  EXPECT_EQ(ParseRunState(""), std::nullopt);
}

}  // namespace
}  // namespace faultline::controller
