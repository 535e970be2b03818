#include "agent/app.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/artifact_cache.h"
#include "agent/clock.h"
#include "agent/config.h"
#include "agent/kernel_switch.h"
#include "agent/rpc/agent_client.h"
#include "agent/rpc/build_client.h"
#include "agent/rpc/result_spool.h"
#include "agent/run_executor.h"
#include "agent/sys/board_facts.h"
#include "agent/sys/cgroup.h"
#include "agent/sys/environment.h"
#include "agent/sys/file_io.h"
#include "agent/sys/pstore.h"
#include "agent/sys/zram_swap.h"
#include "agent/url_source.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/units.h"

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

std::string DefaultWorkloadBinary(const std::string& argv0) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::filesystem::path dir = ec ? std::filesystem::path(argv0).parent_path() : self.parent_path();
  return (dir / "faultline-workload").string();
}

// The agent's bearer token (token_file, trailing newline dropped); "" without one.
std::optional<std::string> ReadToken(const std::string& path) {
  if (path.empty()) return std::string();
  std::string error;
  auto text = sys::ReadFileToString(path, &error);
  if (!text) {
    log::error(
        "event=no_token error=\"{}\" fix=\"put this board's token in {} (mode 0600; "
        "faultline-controller tokens create --role agent --board NAME) or set token_file in "
        "the agent's config\"",
        error, path);
    return std::nullopt;
  }
  std::string token = *text;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  return token;
}

// The agent writes its switch records and result spool under state_dir and run files
// under work_dir: refuse to start, saying which and why, when it cannot (a unit whose
// ProtectSystem=strict leaves only its StateDirectory= and CacheDirectory= writable).
bool WritableDirectory(const char* field, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string probe = dir + "/.faultline-write-test";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    log::error(
        "event=bad_config field={} dir={} error=\"{}\" fix=\"make {} writable for root, or "
        "set {} in the agent's config to a directory that is (faultline-agent.service may "
        "write only /var/lib/faultline-agent and /var/cache/faultline-agent; others need "
        "ReadWritePaths= in systemctl edit faultline-agent)\"",
        field, dir, ec ? ec.message() : std::strerror(err), dir, field);
    return false;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

std::shared_ptr<grpc::Channel> ControllerChannel(const std::string& address,
                                                 const AgentConfig& config) {
  auto tls = ClientCredentials({config.tls_ca, config.tls_cert, config.tls_key});
  if (!tls.ok()) {
    log::error("event=tls_unreadable error=\"{}\"", std::string(tls.status().message()));
    return nullptr;
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 10'000);
  auto target = ControllerTarget(address);
  if (!target.ok()) {
    log::error("event=bad_controller error=\"{}\"", std::string(target.status().message()));
    return nullptr;
  }
  SetTlsServerName(address, config.tls_server_name, &args);
  return grpc::CreateCustomChannel(*target, *tls, args);
}

// The memory cgroup backend, after removing what a previous agent life that died mid-run
// left behind (run cgroups, the zram swap device).
std::optional<sys::CgroupBackend> PrepareRuns(const AgentConfig& config) {
  std::string error;
  sys::CgroupBackendOptions cgroup_options;
  cgroup_options.v2_parent = config.cgroup_parent;
  auto backend = sys::DetectCgroupBackend(cgroup_options, &error);
  if (!backend) {
    log::error("event=no_memory_cgroup error=\"{}\"", error);
    return std::nullopt;
  }
  if (auto removed = sys::RemoveStaleRunCgroups(*backend, &error); removed && *removed > 0) {
    log::warn("event=stale_cgroups_removed count={}", *removed);
  }
  if (config.zram_swap_bytes > 0) {
    std::string zram_error;
    if (!sys::RemoveStaleZramSwap(sys::ZramSwapOptions().device, &zram_error)) {
      log::warn("event=stale_zram_swap error=\"{}\"", zram_error);
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(config.work_dir, ec);
  return backend;
}

// Settles the switch a previous life ordered; false when the switch state is unusable.
// *needs_check_reason: why the board needs a check ("" when it does not).
bool SettleSwitch(KernelSwitcher& switcher, const AgentConfig& config, const BootIdentity& identity,
                  std::string* needs_check_reason) {
  std::string switched_to;
  auto needs_check = switcher.Settle(&switched_to);
  if (!needs_check.ok()) {
    log::error("event=switch_state_unusable dir={} error=\"{}\"", config.state_dir,
               std::string(needs_check.status().message()));
    return false;
  }
  if (!switched_to.empty()) {
    log::info("event=kernel_switch_verified label={} release={} boot_id={}", switched_to,
              identity.release, identity.boot_id);
  }
  if (needs_check->has_value()) {
    *needs_check_reason = **needs_check;
    log::error(
        "event=needs_check reason=\"{}\" note=\"no runs until cleared with "
        "faultline-agent --config FILE --clear-needs-check\"",
        **needs_check);
  }
  return true;
}

// The built kernel a switch order names, fetched into `cache` (resumed across attempts and
// agent lives) and verified: "" with its *path, or why it could not be.
std::string FetchBuiltKernel(const v1::KernelSwitch& order, ArtifactCache& cache,
                             BuildClient& build_client, const AgentConfig& config,
                             const std::atomic<bool>& stopping, std::string* path) {
  // Fetched (resumed across attempts and agent lives), verified, then bootable.
  const v1::BuiltKernel& built = order.built();
  // From the object store by its presigned URL when the controller keeps images there,
  // else streamed from the controller.
  BuildClient::Source from_controller(&build_client);
  UrlSource from_url(built.url(), config.built_kernels.url_ca);
  ArtifactSource& source = built.url().empty() ? static_cast<ArtifactSource&>(from_controller)
                                               : static_cast<ArtifactSource&>(from_url);
  absl::StatusOr<CachedArtifact> fetched = absl::UnavailableError("not tried");
  const auto started = std::chrono::steady_clock::now();
  for (int attempt = 1; attempt <= 5 && !stopping; ++attempt) {
    fetched = cache.Fetch(built.image_sha256(), built.image_bytes(), built.release(), order.label(),
                          source);
    if (fetched.ok() || fetched.status().code() == absl::StatusCode::kInvalidArgument) break;
    log::warn("event=kernel_fetch_retry label={} attempt={} error=\"{}\"", order.label(), attempt,
              std::string(fetched.status().message()));
    std::this_thread::sleep_for(std::chrono::seconds(attempt));
  }
  if (stopping) return "";
  if (!fetched.ok()) {
    return absl::StrCat("fetching kernel ", order.label(), " (build ", built.build_id(),
                        ") failed: ", fetched.status().message());
  }
  log::info("event=kernel_fetched label={} release={} bytes={} from={} seconds={:.1f}",
            order.label(), built.release(), fetched->bytes,
            built.url().empty() ? "controller" : "url",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  *path = fetched->path;
  return "";
}

// The board as this agent announces it in its hello.
v1::Board AnnouncedBoard(const AgentConfig& config, const sys::BoardFacts& facts,
                         const BootIdentity& identity, const std::string& needs_check_reason) {
  v1::Board board = BoardFromFacts(config, facts);
  board.set_boot_id(identity.boot_id);
  board.set_boots_built_kernels(config.built_kernels.enabled);
  // Settle() has turned a switch of this boot whose boot commands ran into needs-check:
  // healthy on the boot a switch was ordered from means that switch never began.
  board.set_reports_unbooted_switches(true);
  if (!needs_check_reason.empty()) {
    // What the kernel that did not come back left behind, for the controller's record.
    board.set_previous_boot_log(sys::PreviousBootLog(config.pstore_dir));
    if (!board.previous_boot_log().empty()) {
      log::info("event=previous_boot_log dir={} bytes={}", config.pstore_dir,
                board.previous_boot_log().size());
    }
  }
  for (const auto& arch : config.builder.arches) board.add_build_arches(arch);
  if (board.running_kernel_label().empty()) {
    log::warn(
        "event=unknown_running_kernel release={} note=\"no configured kernel has this "
        "release; the agent will get no runs\"",
        facts.kernel_release);
  }
  return board;
}

// The builder's sandbox as agent.yaml sets it (checked by the config's parser).
kbuild::SandboxOptions SandboxOptionsOf(const BuilderConfig& b) {
  kbuild::SandboxOptions sandbox;
  sandbox.mode = *kbuild::ParseSandboxMode(b.sandbox);  // checked by the config's parser
  sandbox.uid = b.sandbox_uid;
  sandbox.pass_env = b.sandbox_pass_env;
  sandbox.extra_readonly = b.sandbox_readonly;
  sandbox.limits = {.memory_bytes = b.limits.memory,
                    .pids = b.limits.pids,
                    .cpus = b.limits.cpus,
                    .wall = std::chrono::seconds(b.limits.wall_seconds),
                    .step_wall = std::chrono::seconds(b.limits.step_wall_seconds),
                    .log_bytes = b.limits.log,
                    .file_bytes = b.limits.file,
                    .disk_reserve_bytes = b.limits.disk_reserve,
                    .image_bytes = b.limits.image};
  return sandbox;
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
  if (!WritableDirectory("state_dir", config->state_dir) ||
      !WritableDirectory("work_dir", config->work_dir)) {
    return 2;
  }
  if (options.clear_needs_check) {
    absl::Status cleared = SwitchState(config->state_dir).ClearNeedsCheck();
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

  // Kernels jobs brought that this board fetched earlier: bootable (and recognised when
  // running) like configured ones.
  std::optional<ArtifactCache> built_cache;
  if (config->built_kernels.enabled) {
    built_cache.emplace(config->built_kernels.dir, config->built_kernels.max_bytes);
    for (const CachedArtifact& a : built_cache->List()) {
      if (FindKernel(*config, a.label) != nullptr) continue;
      config->kernels.push_back(BuiltKernelEntry(*config, a.label, a.release, a.path));
    }
  }

  SystemClock clock;
  SwitchContext boot;
  boot.identity = *identity;
  std::string cmdline_error;
  boot.running_cmdline = sys::ReadFileToString("/proc/cmdline", &cmdline_error).value_or("");
  boot.systemd_is_init = SystemdIsInit();
  boot.agent_pid = static_cast<int>(::getpid());
  SystemCommandRunner boot_commands;
  KernelSwitcher switcher(*config, boot, boot_commands, clock);
  std::string needs_check_reason;
  if (!SettleSwitch(switcher, *config, *identity, &needs_check_reason)) return 2;

  std::string workload = !options.workload_binary.empty()   ? options.workload_binary
                         : !config->workload_binary.empty() ? config->workload_binary
                                                            : DefaultWorkloadBinary(argv0);
  if (access(workload.c_str(), X_OK) != 0) {
    log::error("event=no_workload_binary path={}", workload);
    return 2;
  }
  auto backend = PrepareRuns(*config);
  if (!backend) return 2;

  const v1::Board board = AnnouncedBoard(*config, facts, *identity, needs_check_reason);
  log::info(
      "event=agent_starting board={} arch={} cpus={} memory={} page_size={} cgroup=v{} "
      "kernel={} ({})",
      board.name(), board.arch(), board.cpu_count(), FormatSize(board.memory_bytes()),
      board.page_size(), board.cgroup_version(), board.running_kernel_label(),
      facts.kernel_release);

  auto token = ReadToken(config->token_file);
  if (!token) return 2;
  auto channel = ControllerChannel(options.controller, *config);
  if (!channel) return 2;
  ResultSpool spool(config->state_dir + "/spool");
  AgentClientOptions client_options;
  client_options.board = board;
  client_options.spool = &spool;
  client_options.token = *token;
  AgentClient client(client_options, channel, clock);

  RunExecutorOptions run_options;
  run_options.board = config->board;
  run_options.workload_binary = workload;
  run_options.work_dir = config->work_dir;
  run_options.cgroup_backend = *backend;
  run_options.kernel_release = facts.kernel_release;
  run_options.running_kernel_labels = RunningKernelLabels(*config, facts.kernel_release);
  run_options.memory_bytes = facts.memory_bytes;
  run_options.zram_swap_bytes = config->zram_swap_bytes;
  SystemWorkloadHost host;
  RunExecutor executor(run_options, client, host, &spool, clock);

  // Each piece of work the controller hands out goes to its flow.
  WorkHandlers handlers;
  handlers.run = [&](const v1::Assignment& a, const std::atomic<bool>& stopping) {
    executor.Execute(a, stopping);
  };
  BuildClient build_client(channel, *token);
  handlers.kernel_switch = [&](const v1::KernelSwitch& order, const std::atomic<bool>& stopping) {
    if (order.has_built() && FindKernel(*config, order.label()) == nullptr) {
      if (!built_cache) return std::string("this board does not boot built kernels");
      std::string path;
      if (std::string failed =
              FetchBuiltKernel(order, *built_cache, build_client, *config, stopping, &path);
          !failed.empty() || stopping) {
        return failed;
      }
      config->kernels.push_back(
          BuiltKernelEntry(*config, order.label(), order.built().release(), path));
    }
    return switcher.Switch(order.label(), stopping);
  };
  handlers.health = [&] { return switcher.Health(); };

  std::atomic<bool> builder_stop{false};
  std::optional<std::thread> builder;
  if (!config->builder.arches.empty()) {
    builder.emplace([&] {
      const BuilderConfig& b = config->builder;
      RunBuilder(config->board, b.arches, b.cache, b.jobs, SandboxOptionsOf(b), build_client,
                 builder_stop);
    });
  }
  std::thread signals([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    log::info("event=agent_stopping signal={}", signal);
    builder_stop = true;
    client.Stop();
  });
  int rc = client.Serve(handlers);
  signals.join();
  if (builder) builder->join();
  return rc;
}

}  // namespace faultline::agent
