#include "services/controller/core/board_health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace faultline::controller {

HealthVerdict HealthAfterHello(const std::optional<SwitchInFlight>& in_flight,
                               const BoardSummary& hello) {
  if (hello.health == BoardHealth::kNeedsCheck) {
    return {BoardHealth::kNeedsCheck, hello.health_reason.empty()
                                          ? std::string("reported by the agent")
                                          : hello.health_reason};
  }
  if (!in_flight) return {BoardHealth::kOk, ""};
  if (!hello.boot_id.empty() && hello.boot_id == in_flight->from_boot_id) {
    if (hello.reports_unbooted_switches) {
      HealthVerdict not_begun;
      not_begun.switch_not_begun = true;
      return not_begun;
    }
    return {BoardHealth::kNeedsCheck, absl::StrCat("switch to '", in_flight->label,
                                                   "': the agent said hello from the same boot (",
                                                   hello.boot_id, "): the board did not reboot")};
  }
  const auto& running = hello.running_kernel_labels;
  if (std::find(running.begin(), running.end(), in_flight->label) == running.end()) {
    return {BoardHealth::kNeedsCheck,
            absl::StrCat("switch to '", in_flight->label, "': the board came back running ",
                         running.empty() ? std::string("no configured kernel")
                                         : absl::StrCat("[", absl::StrJoin(running, ", "), "]"))};
  }
  return {BoardHealth::kOk, ""};
}

}  // namespace faultline::controller
