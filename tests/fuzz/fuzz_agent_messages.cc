// libFuzzer: what crosses the network between agents and the controller, through the code
// that handles it on each side. The first byte picks the message:
//   0 HelloRequest        controller: BoardFromProto, then HealthAfterHello (with and
//                         without a kernel switch in flight)
//   1 ReportResultRequest controller: ResultFromProto (also what the agent's spool holds)
//   2 Assignment          agent: CheckAssignment against a board (nothing runs unchecked)
//   3 AcquireWorkResponse agent: a kernel switch order resolved against its own config
//   4 agent.yaml text     agent: ParseAgentConfig (the board's config file)
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/assignment_check.h"
#include "agent/config.h"
#include "agent/kernel_switch.h"
#include "faultline/v1/agent.pb.h"
#include "services/controller/convert/convert.h"
#include "services/controller/core/board_health.h"

using namespace faultline;

namespace {

const agent::AgentConfig& Config() {
  static const agent::AgentConfig config = [] {
    auto c = agent::ParseAgentConfig(R"(
board: fuzz-board
kernels:
  - {label: vanilla, release: running}
  - {label: patched, release: 6.9.0, boot: kexec, kernel: /boot/vmlinuz-6.9.0}
  - {label: grub, release: 6.8.0, boot: grub-reboot, grub_entry: "Debian 6.8"}
  - {label: lab, release: 6.7.0, boot: command, command: [/usr/local/bin/lab-boot]}
)",
                                     "6.1.0");
    if (!c.ok()) std::abort();
    return *c;
  }();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 16)) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0: {
      v1::HelloRequest req;
      if (!req.ParseFromString(rest)) return 0;
      controller::BoardRecord board = controller::BoardFromProto(req.board());
      auto ok = controller::HealthAfterHello(std::nullopt, board.summary);
      auto switched = controller::HealthAfterHello(
          controller::SwitchInFlight{"patched", req.board().boot_id()}, board.summary);
      if (ok.health == controller::BoardHealth::kSwitching)
        std::abort();  // a hello never leaves it switching
      if (switched.health == controller::BoardHealth::kSwitching) std::abort();
      // A hello from the same boot never settles a switch as done.
      if (!req.board().boot_id().empty() && switched.health == controller::BoardHealth::kOk)
        std::abort();
      break;
    }
    case 1: {
      v1::ReportResultRequest req;
      if (!req.ParseFromString(rest)) return 0;
      controller::ResultRecord r = controller::ResultFromProto(req.result());
      if (r.counters_json.empty() || r.environment_json.empty()) std::abort();
      break;
    }
    case 2: {
      v1::Assignment a;
      if (!a.ParseFromString(rest)) return 0;
      agent::AssignmentFacts facts;
      facts.benchmark = a.benchmark();
      facts.params.insert(a.params().begin(), a.params().end());
      facts.duration_seconds = a.duration_seconds();
      facts.memory_max = a.limits().memory_max();
      const std::string why = agent::CheckAssignment(facts, {8ull << 30, 100ull << 30});
      if (why.empty() &&
          (facts.duration_seconds == 0 || facts.duration_seconds > agent::kMaxRunSeconds)) {
        std::abort();
      }
      break;
    }
    case 3: {
      v1::AcquireWorkResponse resp;
      if (!resp.ParseFromString(rest) || !resp.has_switch_kernel()) return 0;
      const agent::KernelEntry* entry = agent::FindKernel(Config(), resp.switch_kernel().label());
      if (entry == nullptr) return 0;  // the agent refuses unknown labels
      auto commands = agent::BootCommands(*entry, "root=/dev/sda1 ro");
      // Whatever the controller sends, only the configured programs can run.
      if (commands.ok()) {
        for (const auto& argv : *commands) {
          const std::string& program = argv.at(0);
          if (program != "kexec" && program != "systemctl" && program != "grub-reboot" &&
              program != "/usr/local/bin/lab-boot") {
            std::abort();
          }
        }
      }
      break;
    }
    case 4: {
      auto config = agent::ParseAgentConfig(rest, "6.1.0");
      if (!config.ok() && config.status().message().empty()) std::abort();
      break;
    }
  }
  return 0;
}
