#pragma once
// faultline-workload --mmap-lock-waits: every mmap_lock acquisition of the benchmark's
// threads over the measured interval, with its wait (agent/sys/lock_wait_tracer.h), as the
// seed series reports them. Opened on every thread once they run, enabled after the
// start-of-interval snapshot and drained by a reader thread of its own (not traced) while
// the run goes on. Results:
//   counters     mmap_lock_wait.{read,write}.{count,failed,without_start,total_us,
//                us_0_1,...,us_1000000_inf}, mmap_lock_wait.unpaired, .lost_records, and
//                where the kernel has lock:contention_begin/end the true contention,
//                mmap_lock_contention.{read,write}.{count,total_us,max_us}
//   environment  mmap_lock_wait.unsupported   why nothing was traced (no tracepoints, no
//                                             tracefs, perf refused): the run goes on
//                mmap_lock_wait.threads       threads traced
//                mmap_lock_contention.unsupported  why contention was not traced
#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "agent/sys/lock_wait_tracer.h"
#include "agent/workloads/periodic_drain.h"
#include "agent/workloads/probe.h"

namespace faultline::workloads {

class LockWaitTracing final : public Probe {
 public:
  // `scratch_dir`: where tracefs may be mounted for the look-up of the tracepoints.
  explicit LockWaitTracing(std::string scratch_dir) : scratch_dir_(std::move(scratch_dir)) {}
  LockWaitTracing(const LockWaitTracing&) = delete;
  LockWaitTracing& operator=(const LockWaitTracing&) = delete;
  ~LockWaitTracing() override;

  void ThreadsStarted() override;
  void MeasurementStarted() override;
  void MeasurementEnded() override;

  // Adds the counters, or the reason nothing was traced (never fails the run).
  bool AddFindings(const ProbeFindings& out, std::string* error) const override;

 private:
  std::string scratch_dir_;
  std::optional<sys::LockWaitTracer> tracer_;
  sys::LockWaitAggregator waits_;
  PeriodicDrain reader_;  // after what it drains: stopped before that goes
  size_t threads_ = 0;
  bool measured_ = false;
  std::string unsupported_;
  std::string contention_unsupported_;
};

}  // namespace faultline::workloads
