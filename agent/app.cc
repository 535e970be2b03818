#include "agent/app.h"

#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <thread>

#include "agent/assignment_check.h"
#include "agent/config.h"
#include "agent/kernel_switch.h"
#include "agent/rpc/agent_client.h"
#include "agent/runner/runner.h"
#include "agent/sys/board_facts.h"
#include "agent/sys/cgroup.h"
#include "agent/sys/environment.h"
#include "agent/sys/file_io.h"
#include "agent/sys/zram_swap.h"
#include "google/protobuf/util/json_util.h"
#include "services/common/benchmarks.h"
#include "services/common/log.h"
#include "services/common/tls.h"
#include "services/common/units.h"

namespace faultline::agent {
namespace {

constexpr const char* kAgentVersion = "0.1.0";

v1::Board BoardFromFacts(const AgentConfig& config, const sys::BoardFacts& facts) {
  v1::Board b;
  b.set_name(config.board);
  b.set_arch(facts.arch);
  b.set_cpu_model(facts.cpu_model);
  b.set_cpu_count(facts.cpu_count);
  b.set_memory_bytes(facts.memory_bytes);
  b.set_page_size(static_cast<uint32_t>(facts.page_size));
  b.set_cgroup_version(facts.cgroup_version.empty() ? 0 : std::stoi(facts.cgroup_version));
  for (const auto& s : facts.swap_devices) {
    auto* d = b.add_swap_devices();
    d->set_path(s.path);
    d->set_size_bytes(s.size_bytes);
    d->set_type(s.type);
  }
  b.set_running_kernel_release(facts.kernel_release);
  b.set_running_kernel_label(RunningKernelLabel(config, facts.kernel_release));
  for (const auto& label : RunningKernelLabels(config, facts.kernel_release)) {
    b.add_running_kernel_labels(label);
  }
  for (const auto& k : config.kernels) {
    auto* e = b.add_kernels();
    e->set_label(k.label);
    e->set_release(k.release);
    e->set_boot_method(k.boot);
  }
  for (const auto& [k, v] : config.labels) (*b.mutable_labels())[k] = v;
  b.set_agent_version(kAgentVersion);
  b.set_virt_accel(sys::DetectVirtAccel());
  return b;
}

std::optional<uint64_t> LimitFromWire(const std::string& text) {
  if (text.empty() || text == "max") return std::nullopt;
  return ParseUnsigned(text);
}

std::string DefaultWorkloadBinary(const std::string& argv0) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::filesystem::path dir = ec ? std::filesystem::path(argv0).parent_path() : self.parent_path();
  return (dir / "faultline-workload").string();
}

}  // namespace

int RunAgent(const AgentOptions& options, const std::string& argv0) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  sys::BoardFacts facts = sys::CollectBoardFacts();
  auto config = LoadAgentConfig(options.config_path, facts.kernel_release);
  if (!config.ok()) {
    log::error("event=bad_config error=\"{}\"", std::string(config.status().message()));
    return 2;
  }
  SwitchState switch_state(config->state_dir);
  if (options.clear_needs_check) {
    absl::Status cleared = switch_state.ClearNeedsCheck();
    if (!cleared.ok()) {
      log::error("event=clear_needs_check_failed error=\"{}\"", std::string(cleared.message()));
      return 1;
    }
    log::info("event=needs_check_cleared board={}", config->board);
    return 0;
  }
  auto identity = ReadBootIdentity(*config);
  if (!identity.ok()) {
    log::error("event=no_boot_identity error=\"{}\"", std::string(identity.status().message()));
    return 2;
  }
  if (identity->release != facts.kernel_release) {
    // A simulated board (release_file): its release is what this agent serves.
    facts.kernel_release = identity->release;
    config = LoadAgentConfig(options.config_path, facts.kernel_release);
    if (!config.ok()) return 2;
  }
  std::string switched_to;
  auto needs_check = SettleSwitchOnStart(switch_state, *identity, &switched_to);
  if (!needs_check.ok()) {
    log::error("event=switch_state_unusable dir={} error=\"{}\"", config->state_dir,
               std::string(needs_check.status().message()));
    return 2;
  }
  if (!switched_to.empty()) {
    log::info("event=kernel_switch_verified label={} release={} boot_id={}", switched_to,
              identity->release, identity->boot_id);
  }
  if (needs_check->has_value()) {
    log::error("event=needs_check reason=\"{}\" note=\"no runs until cleared with "
               "faultline-agent --config FILE --clear-needs-check\"",
               **needs_check);
  }
  std::string workload = !options.workload_binary.empty() ? options.workload_binary
                         : !config->workload_binary.empty() ? config->workload_binary
                                                            : DefaultWorkloadBinary(argv0);
  if (access(workload.c_str(), X_OK) != 0) {
    log::error("event=no_workload_binary path={}", workload);
    return 2;
  }
  std::string error;
  sys::CgroupBackendOptions cgroup_options;
  cgroup_options.v2_parent = config->cgroup_parent;
  auto backend = sys::DetectCgroupBackend(cgroup_options, &error);
  if (!backend) {
    log::error("event=no_memory_cgroup error=\"{}\"", error);
    return 2;
  }
  // Runs of a previous agent life that crashed are gone: remove their cgroups.
  if (auto removed = sys::RemoveStaleRunCgroups(*backend, &error); removed && *removed > 0) {
    log::warn("event=stale_cgroups_removed count={}", *removed);
  }
  // A zram swap device of a previous agent life that died mid-run: take it down again.
  if (config->zram_swap_bytes > 0) {
    std::string zram_error;
    if (!sys::RemoveStaleZramSwap(sys::ZramSwapOptions().device, &zram_error)) {
      log::warn("event=stale_zram_swap error=\"{}\"", zram_error);
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(config->work_dir, ec);

  v1::Board board = BoardFromFacts(*config, facts);
  board.set_boot_id(identity->boot_id);
  if (board.running_kernel_label().empty()) {
    log::warn("event=unknown_running_kernel release={} note=\"no configured kernel has this "
              "release; the agent will get no runs\"",
              facts.kernel_release);
  }
  log::info("event=agent_starting board={} arch={} cpus={} memory={} page_size={} cgroup=v{} "
            "kernel={} ({})",
            board.name(), board.arch(), board.cpu_count(), FormatSize(board.memory_bytes()),
            board.page_size(), board.cgroup_version(), board.running_kernel_label(),
            facts.kernel_release);

  RunFunction run = [&](const v1::Assignment& a, std::atomic<bool>* cancel) {
    // Never run on another kernel than the one assigned (the controller should not ask).
    const auto running = RunningKernelLabels(*config, facts.kernel_release);
    if (std::find(running.begin(), running.end(), a.kernel()) == running.end()) {
      RunReport refused;
      refused.failure_reason = "wrong kernel: assigned '" + a.kernel() + "', board runs " +
                               facts.kernel_release;
      return refused;
    }
    // The board's own bounds, whatever the controller says.
    AssignmentFacts facts_of_run;
    facts_of_run.benchmark = a.benchmark();
    facts_of_run.params.insert(a.params().begin(), a.params().end());
    facts_of_run.duration_seconds = a.duration_seconds();
    facts_of_run.memory_max = a.memcg().memory_max();
    BoardCapacity capacity;
    capacity.memory_bytes = facts.memory_bytes;
    struct statvfs fs {};
    if (::statvfs(config->work_dir.c_str(), &fs) == 0) {
      capacity.work_dir_free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    }
    if (std::string why = CheckAssignment(facts_of_run, capacity); !why.empty()) {
      log::warn("event=assignment_refused run={} reason=\"{}\"", a.run_id(), why);
      RunReport refused;
      refused.failure_reason = "refused by the agent: " + why;
      return refused;
    }
    runner::WorkloadInvocation inv;
    inv.workload_binary = workload;
    inv.benchmark = a.benchmark();
    inv.params.insert(a.params().begin(), a.params().end());
    inv.duration_seconds = a.duration_seconds();
    inv.work_dir = config->work_dir;
    inv.limits.memory_max = LimitFromWire(a.memcg().memory_max());
    inv.limits.memory_high = LimitFromWire(a.memcg().memory_high());
    inv.limits.swap_max = LimitFromWire(a.memcg().swap_max());
    inv.cgroup_backend = *backend;
    inv.run_id = std::to_string(a.run_id());
    inv.cancel = cancel;
    // The hard timeout ends before the lease the controller granted (minus a margin), so a
    // lapsed lease never has a twin still running here.
    {
      uint64_t warmup_ms = 0;
      if (auto it = a.params().find("warmup"); it != a.params().end()) {
        warmup_ms = static_cast<uint64_t>(ParseDuration(it->second).value_or(std::chrono::milliseconds(0)).count());
      }
      const uint64_t busy = a.duration_seconds() + (warmup_ms + 999) / 1000 + 5;
      if (a.lease_seconds() > busy) {
        inv.grace_seconds = static_cast<uint32_t>(std::min<uint64_t>(inv.grace_seconds, a.lease_seconds() - busy));
      }
    }
    // Boards that opt in get a zram swap device for each run that needs swap, removed
    // right after (a run never inherits another run's swapped pages).
    std::unique_ptr<sys::ZramSwap> zram;
    std::string zram_note;
    const BenchmarkSpec* bench = FindBenchmark(a.benchmark());
    if (config->zram_swap_bytes > 0 && bench != nullptr && bench->requires_swap) {
      sys::ZramSwapOptions zram_options;
      zram_options.disksize_bytes = config->zram_swap_bytes;
      std::string zram_error;
      auto started = sys::ZramSwap::Start(zram_options, &zram_error);
      if (!started) {
        log::warn("event=zram_swap_failed run={} error=\"{}\"", a.run_id(), zram_error);
        RunReport failed;
        failed.succeeded = false;
        failed.failure_reason = "zram_swap: " + zram_error;
        return failed;
      }
      zram = std::make_unique<sys::ZramSwap>(std::move(*started));
      zram_note = zram->device_path() + " " + FormatSize(config->zram_swap_bytes) +
                  " (provisioned by the agent for this run)";
    }
    runner::WorkloadOutcome outcome = runner::RunWorkload(inv);
    if (zram) {
      std::string zram_error;
      if (!zram->Stop(&zram_error)) {
        log::warn("event=zram_swap_cleanup_failed run={} error=\"{}\"", a.run_id(), zram_error);
      }
    }

    RunReport report;
    report.succeeded = outcome.succeeded;
    report.failure_reason = outcome.failure_reason;
    if (!outcome.result_json.empty()) {
      google::protobuf::util::JsonParseOptions parse;
      parse.ignore_unknown_fields = true;
      auto s = google::protobuf::util::JsonStringToMessage(outcome.result_json, &report.result, parse);
      if (!s.ok() && report.succeeded) {
        report.succeeded = false;
        report.failure_reason = "unreadable workload output: " + s.ToString();
      }
    } else if (report.succeeded) {
      report.succeeded = false;
      report.failure_reason = "the workload printed no result";
    }
    for (const auto& [k, v] : outcome.applied_limits) (*report.result.mutable_environment())[k] = v;
    for (const auto& [k, v] : outcome.memcg_events) {
      (*report.result.mutable_counters())["memcg_event." + k] = static_cast<double>(v);
    }
    if (!zram_note.empty()) (*report.result.mutable_environment())["swap.provisioned"] = zram_note;
    (*report.result.mutable_environment())["kernel.label"] = a.kernel();
    (*report.result.mutable_environment())["kernel.release"] = facts.kernel_release;
    return report;
  };

  std::string token;
  if (!config->token_file.empty()) {
    auto text = sys::ReadFileToString(config->token_file, &error);
    if (!text) {
      log::error("event=no_token error=\"{}\"", error);
      return 2;
    }
    token = *text;
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
      token.pop_back();
    }
  }
  auto tls = ClientCredentials({config->tls_ca, config->tls_cert, config->tls_key});
  if (!tls.ok()) {
    log::error("event=tls_unreadable error=\"{}\"", std::string(tls.status().message()));
    return 2;
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = *tls;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 10'000);
  auto channel = grpc::CreateCustomChannel(options.controller, credentials, args);
  AgentClientOptions client_options;
  client_options.board = board;
  client_options.spool_dir = config->state_dir + "/spool";
  client_options.token = token;
  SwitchFunction kernel_switch = [&](const v1::KernelSwitch& order,
                                     const std::atomic<bool>* stopping) -> std::string {
    auto needs_check = [&](const std::string& reason) {
      if (absl::Status s = switch_state.MarkNeedsCheck(reason); !s.ok()) {
        log::error("event=needs_check_unrecorded error=\"{}\"", std::string(s.message()));
      }
      return reason;
    };
    const KernelEntry* entry = FindKernel(*config, order.label());
    if (entry == nullptr) {
      return needs_check("asked to switch to kernel '" + order.label() + "', which is not configured");
    }
    std::string cmdline_error;
    std::string cmdline = sys::ReadFileToString("/proc/cmdline", &cmdline_error).value_or("");
    auto commands = BootCommands(*entry, cmdline, SystemdIsInit());
    if (!commands.ok()) return needs_check(std::string(commands.status().message()));
    PendingSwitch pending;
    pending.label = entry->label;
    pending.release = entry->release;
    pending.boot_id_before = identity->boot_id;
    pending.requested_at_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    if (absl::Status s = switch_state.SavePending(pending); !s.ok()) {
      return needs_check("recording the switch to '" + entry->label + "': " + std::string(s.message()));
    }
    const std::vector<std::pair<std::string, std::string>> env = {
        {"FAULTLINE_BOARD", config->board},
        {"FAULTLINE_KERNEL_LABEL", entry->label},
        {"FAULTLINE_KERNEL_RELEASE", entry->release},
        {"FAULTLINE_AGENT_PID", std::to_string(::getpid())}};
    for (const auto& argv : *commands) {
      std::string joined;
      for (const auto& a : argv) joined += (joined.empty() ? "" : " ") + a;
      log::info("event=boot_command label={} command=\"{}\"", entry->label, joined);
      std::string error;
      int rc = RunBootCommand(argv, env, &error);
      if (rc != 0) {
        (void)switch_state.ClearPending();
        return needs_check("switch to '" + entry->label + "': `" + joined + "` " +
                           (rc < 0 ? error : "exited with " + std::to_string(rc)));
      }
    }
    // The board is going down now; the next agent life verifies the boot.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(config->switch_timeout_seconds);
    while (!stopping->load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (stopping->load()) return "";
    (void)switch_state.ClearPending();
    return needs_check("the boot commands for '" + entry->label + "' succeeded but the board " +
                       "did not reboot within " + std::to_string(config->switch_timeout_seconds) +
                       " s");
  };
  HealthFunction health = [&]() { return switch_state.NeedsCheck().value_or(""); };
  AgentClient client(client_options, channel, run, kernel_switch, health);

  std::thread signals([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    log::info("event=agent_stopping signal={}", signal);
    client.Stop();
  });
  int rc = client.Serve();
  signals.join();
  return rc;
}

}  // namespace faultline::agent
