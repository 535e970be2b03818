// The controller's verdict on a board after a hello that may settle a kernel switch.
#include "services/controller/core/board_health.h"

#include <gtest/gtest.h>

namespace faultline::controller {
namespace {

BoardSummary Hello(std::vector<std::string> running, std::string boot_id,
                   std::string health = "ok", std::string reason = "") {
  BoardSummary b;
  b.name = "x1";
  b.running_kernel_labels = std::move(running);
  b.boot_id = std::move(boot_id);
  b.health = std::move(health);
  b.health_reason = std::move(reason);
  return b;
}

TEST(HealthAfterHello, NoSwitchInFlightTakesTheAgentsWord) {
  EXPECT_EQ(HealthAfterHello(std::nullopt, Hello({"vanilla"}, "b1")).health, "ok");
  BoardHealth h = HealthAfterHello(std::nullopt, Hello({}, "b1", "needs-check", "grub fell back"));
  EXPECT_EQ(h.health, "needs-check");
  EXPECT_EQ(h.reason, "grub fell back");
}

TEST(HealthAfterHello, ASwitchMustComeBackFromANewBootOnTheLabel) {
  SwitchInFlight s{"patched", "b1"};
  EXPECT_EQ(HealthAfterHello(s, Hello({"patched"}, "b2")).health, "ok");
  EXPECT_EQ(HealthAfterHello(s, Hello({"patched", "patched-again"}, "b2")).health, "ok");

  BoardHealth same_boot = HealthAfterHello(s, Hello({"vanilla"}, "b1"));
  EXPECT_EQ(same_boot.health, "needs-check");
  EXPECT_NE(same_boot.reason.find("did not reboot"), std::string::npos) << same_boot.reason;

  BoardHealth wrong = HealthAfterHello(s, Hello({"vanilla"}, "b2"));
  EXPECT_EQ(wrong.health, "needs-check");
  EXPECT_EQ(wrong.reason, "switch to 'patched': the board came back running [vanilla]");

  BoardHealth unknown = HealthAfterHello(s, Hello({}, "b2"));
  EXPECT_EQ(unknown.reason, "switch to 'patched': the board came back running no configured kernel");

  // The agent's own finding wins over the controller's.
  BoardHealth agent = HealthAfterHello(s, Hello({"patched"}, "b2", "needs-check", "disk full"));
  EXPECT_EQ(agent.health, "needs-check");
  EXPECT_EQ(agent.reason, "disk full");
}

}  // namespace
}  // namespace faultline::controller
