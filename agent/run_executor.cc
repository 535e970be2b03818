#include "agent/run_executor.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "agent/assignment_check.h"
#include "agent/sys/zram_swap.h"
#include "common/benchmarks.h"
#include "common/log.h"
#include "common/units.h"
#include "faultline/v1/run_options.h"
#include "google/protobuf/util/json_util.h"

namespace faultline::agent {
namespace {

RunReport Failed(std::string reason) {
  RunReport report;
  report.failure_reason = std::move(reason);
  return report;
}

class ZramSwapDevice : public SwapDevice {
 public:
  explicit ZramSwapDevice(sys::ZramSwap zram)
      : zram_(std::move(zram)), path_(zram_.device_path()) {}
  const std::string& path() const override { return path_; }
  bool Stop(std::string* error) override { return zram_.Stop(error); }

 private:
  sys::ZramSwap zram_;
  std::string path_;
};

}  // namespace

runner::WorkloadOutcome SystemWorkloadHost::RunWorkload(const runner::WorkloadInvocation& inv) {
  return runner::RunWorkload(inv);
}

uint64_t SystemWorkloadHost::FreeBytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::unique_ptr<SwapDevice> SystemWorkloadHost::ProvisionSwap(uint64_t bytes, std::string* error) {
  sys::ZramSwapOptions options;
  options.disksize_bytes = bytes;
  auto started = sys::ZramSwap::Start(options, error);
  if (!started) return nullptr;
  return std::make_unique<ZramSwapDevice>(std::move(*started));
}

uint32_t LeaseBoundedGraceSeconds(const v1::Assignment& a, uint32_t grace) {
  const uint64_t busy = a.duration_seconds() + (a.warmup_ms() + 999) / 1000 + kLeaseMarginSeconds;
  if (a.lease_seconds() > busy) {
    return static_cast<uint32_t>(std::min<uint64_t>(grace, a.lease_seconds() - busy));
  }
  return grace;
}

RunExecutor::RunExecutor(RunExecutorOptions options, ControllerLink& controller, WorkloadHost& host,
                         ResultSpool* spool, Clock& clock)
    : options_(std::move(options)),
      controller_(controller),
      host_(host),
      spool_(spool),
      clock_(clock) {}

RunReport RunExecutor::Run(const v1::Assignment& a, std::atomic<bool>* cancel) {
  // Never run on another kernel than the one assigned (the controller should not ask).
  const auto& running = options_.running_kernel_labels;
  if (std::find(running.begin(), running.end(), a.kernel()) == running.end()) {
    return Failed("wrong kernel: assigned '" + a.kernel() + "', board runs " +
                  options_.kernel_release);
  }
  // The board's own bounds, whatever the controller says.
  AssignmentFacts facts;
  facts.benchmark = a.benchmark();
  facts.params.insert(a.params().begin(), a.params().end());
  facts.duration_seconds = a.duration_seconds();
  facts.memory_max = a.limits().memory_max();
  const v1::RunOptions options = v1::RunOptionsOf(a);
  facts.events.assign(options.events().begin(), options.events().end());
  const auto& unknown = a.options().GetReflection()->GetUnknownFields(a.options());
  for (int i = 0; i < unknown.field_count(); ++i) {
    facts.unknown_run_options.push_back(unknown.field(i).number());
  }
  BoardCapacity capacity;
  capacity.memory_bytes = options_.memory_bytes;
  capacity.work_dir_free_bytes = host_.FreeBytes(options_.work_dir);
  if (std::string why = CheckAssignment(facts, capacity); !why.empty()) {
    log::warn("event=assignment_refused run={} reason=\"{}\"", a.run_id(), why);
    return Failed("refused by the agent: " + why);
  }
  runner::WorkloadInvocation inv;
  inv.workload_binary = options_.workload_binary;
  inv.benchmark = a.benchmark();
  inv.params.insert(a.params().begin(), a.params().end());
  inv.duration_seconds = a.duration_seconds();
  inv.warmup = std::chrono::milliseconds(a.warmup_ms());
  inv.run_options = v1::RunOptionsToJson(options);
  inv.work_dir = options_.work_dir;
  inv.limits.memory_max = a.limits().memory_max();
  if (a.limits().has_memory_high()) inv.limits.memory_high = a.limits().memory_high();
  if (a.limits().has_swap_max()) inv.limits.swap_max = a.limits().swap_max();
  inv.cgroup_backend = options_.cgroup_backend;
  inv.run_id = std::to_string(a.run_id());
  inv.cancel = cancel;
  inv.grace_seconds = LeaseBoundedGraceSeconds(a, options_.grace_seconds);

  // Boards that opt in get a zram swap device for each run that needs swap, removed right
  // after (a run never inherits another run's swapped pages).
  std::unique_ptr<SwapDevice> swap;
  std::string swap_note;
  const BenchmarkSpec* bench = FindBenchmark(a.benchmark());
  if (options_.zram_swap_bytes > 0 && bench != nullptr && bench->requires_swap) {
    std::string error;
    swap = host_.ProvisionSwap(options_.zram_swap_bytes, &error);
    if (!swap) {
      log::warn("event=zram_swap_failed run={} error=\"{}\"", a.run_id(), error);
      return Failed("zram_swap: " + error);
    }
    swap_note = swap->path() + " " + FormatSize(options_.zram_swap_bytes) +
                " (provisioned by the agent for this run)";
  }
  runner::WorkloadOutcome outcome = host_.RunWorkload(inv);
  if (swap) {
    std::string error;
    if (!swap->Stop(&error)) {
      log::warn("event=zram_swap_cleanup_failed run={} error=\"{}\"", a.run_id(), error);
    }
  }

  RunReport report;
  report.succeeded = outcome.succeeded;
  report.failure_reason = outcome.failure_reason;
  if (!outcome.result_json.empty()) {
    google::protobuf::util::JsonParseOptions parse;
    parse.ignore_unknown_fields = true;
    auto s =
        google::protobuf::util::JsonStringToMessage(outcome.result_json, &report.result, parse);
    if (!s.ok() && report.succeeded) {
      report.succeeded = false;
      report.failure_reason = "unreadable workload output: " + s.ToString();
    }
  } else if (report.succeeded) {
    report.succeeded = false;
    report.failure_reason = "the workload printed no result";
  }
  auto& environment = *report.result.mutable_environment();
  for (const auto& [k, v] : outcome.applied_limits) environment[k] = v;
  for (const auto& [k, v] : outcome.memcg_events) {
    (*report.result.mutable_counters())["memcg_event." + k] = static_cast<double>(v);
  }
  if (!swap_note.empty()) environment["swap.provisioned"] = swap_note;
  environment["kernel.label"] = a.kernel();
  environment["kernel.release"] = options_.kernel_release;
  return report;
}

void RunExecutor::Heartbeats(const v1::Assignment& a, const std::atomic<bool>& stopping,
                             const std::atomic<bool>& done, std::atomic<bool>* cancel,
                             std::atomic<bool>* lease_lost) {
  v1::HeartbeatRequest req;
  req.set_board(options_.board);
  req.set_run_id(a.run_id());
  req.set_attempt_id(a.attempt_id());
  while (true) {
    clock_.WaitFor(controller_.heartbeat_interval(), [&] { return stopping || done; });
    if (done) return;
    if (stopping) {
      cancel->store(true);  // the agent is going away: the run with it
      return;
    }
    switch (controller_.Heartbeat(req)) {
      case LeaseStatus::kRenewed:
      case LeaseStatus::kUnreachable:  // logged by the link; the lease may still hold
        break;
      case LeaseStatus::kLost:
        log::info("event=run_cancel_requested run={}", a.run_id());
        lease_lost->store(true);
        cancel->store(true);
        return;
    }
  }
}

void RunExecutor::Execute(const v1::Assignment& a, const std::atomic<bool>& stopping) {
  log::info("event=run_started run={} job={} benchmark={} duration={}s", a.run_id(), a.job_id(),
            a.benchmark(), a.duration_seconds());
  std::atomic<bool> cancel{stopping.load()};
  std::atomic<bool> done{false};
  std::atomic<bool> lease_lost{false};
  std::thread heartbeats([&] { Heartbeats(a, stopping, done, &cancel, &lease_lost); });
  RunReport report = Run(a, &cancel);
  done = true;
  clock_.Wake();
  heartbeats.join();
  if (lease_lost && report.succeeded) {
    // Finished as the controller ended the attempt: not a result the controller may keep.
    report.succeeded = false;
    report.failure_reason = "cancelled";
  }

  v1::ReportResultRequest req;
  req.set_board(options_.board);
  req.set_run_id(a.run_id());
  req.set_attempt_id(a.attempt_id());
  req.set_succeeded(report.succeeded);
  req.set_failure_reason(report.failure_reason);
  *req.mutable_result() = std::move(report.result);
  Deliver(req, stopping);
}

void RunExecutor::Deliver(const v1::ReportResultRequest& req, const std::atomic<bool>& stopping) {
  std::string spooled;
  if (spool_ != nullptr) {
    auto name = spool_->Put(req);
    if (name.ok()) {
      spooled = *name;
    } else {
      log::error("event=spool_write_failed run={} error=\"{}\"", req.run_id(),
                 std::string(name.status().message()));
    }
  }
  // Logged once the result is on disk: from here on a crash loses nothing.
  log::info("event=run_finished run={} succeeded={} throughput={:.2f} reason=\"{}\"", req.run_id(),
            req.succeeded(), req.result().throughput_rounds_per_second(), req.failure_reason());

  // Keep trying until the controller has it or refuses it; the controller's lease decides
  // how long an attempt stays valid.
  int failures = 0;
  while (controller_.Report(req) == Delivery::kFailed) {
    if (stopping) return;  // the spool keeps it for the next life
    const auto delay = BackoffDelay(++failures, options_.min_backoff, options_.max_backoff);
    clock_.WaitFor(delay, [&] { return stopping.load(); });
  }
  if (!spooled.empty()) {
    if (absl::Status s = spool_->Remove(spooled); !s.ok()) {
      log::warn("event=spool_remove_failed file={} error=\"{}\"", spooled,
                std::string(s.message()));
    }
  }
}

}  // namespace faultline::agent
