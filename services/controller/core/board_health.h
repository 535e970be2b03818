#pragma once
// A board's health around kernel switches. The controller orders a switch (the board is
// then `switching`), and the next hello tells whether it worked: a new boot on a kernel
// with the label asked for. Anything else makes the board `needs-check`: it gets no runs
// (they wait or go to other boards) until its agent says it is fine again, which an
// operator decides on the board. Never a run on the wrong kernel.
#include <optional>
#include <string>

#include "services/controller/core/domain.h"

namespace faultline::controller {

// A switch ordered and not yet confirmed by a hello.
struct SwitchInFlight {
  std::string label;
  std::string from_boot_id;
};

struct HealthVerdict {
  BoardHealth health = BoardHealth::kOk;  // ok or needs-check
  std::string reason;
  // The switch in flight never began (its agent restarted before the boot commands, e.g.
  // while fetching the image): not a failed boot; the dispatcher orders it again.
  bool switch_not_begun = false;
};

// The board's health after a hello (`hello`: what its agent reported, health ok or
// needs-check with a reason). A hello from the boot the switch was ordered from means the
// board did not reboot (needs-check), unless the agent reports unbooted switches itself
// and says it is healthy: then the switch never began.
HealthVerdict HealthAfterHello(const std::optional<SwitchInFlight>& in_flight,
                               const BoardSummary& hello);

}  // namespace faultline::controller
