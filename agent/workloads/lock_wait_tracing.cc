#include "agent/workloads/lock_wait_tracing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "agent/sys/perf_counters.h"

namespace faultline::workloads {
namespace {

// Ring buffers: 32 MiB over all threads, 16..512 pages each (a power of two). Measured on a
// 2-core VM (filemap-thrash, 2 readers + 1 munmap thread under a 24M memcg, ~500k events in
// 2 s): 128 pages a thread lost 450-770 records a run (the reader thread waits for a core);
// 512 pages lost none.
constexpr size_t kBufferBudgetBytes = 32u << 20;
constexpr size_t kMinPages = 16;
constexpr size_t kMaxPages = 512;
constexpr auto kDrainEvery = std::chrono::milliseconds(10);

size_t PagesPerThread(size_t threads) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t fit = kBufferBudgetBytes / page / std::max<size_t>(threads, 1);
  size_t pages = kMinPages;
  while (pages * 2 <= std::min(fit, kMaxPages)) pages *= 2;
  return pages;
}

}  // namespace

LockWaitTracing::~LockWaitTracing() {
  reader_.Stop();
}

void LockWaitTracing::ThreadsStarted() {
  if (tracer_ || !unsupported_.empty()) return;
  std::string error;
  auto tracefs = sys::TracefsRoot::Find(scratch_dir_, &error);
  if (!tracefs) {
    unsupported_ = error;
    return;
  }
  const std::vector<pid_t> tids = sys::ThreadsOfThisProcess(&error);
  if (tids.empty()) {
    unsupported_ = error;
    return;
  }
  tracer_ = sys::LockWaitTracer::Open(tracefs->path(), tids, PagesPerThread(tids.size()), &error,
                                      &contention_unsupported_);
  if (!tracer_) {
    unsupported_ = error;
    return;
  }
  if (tracer_->traces_contention()) waits_.TraceContention();
  threads_ = tids.size();
}

void LockWaitTracing::MeasurementStarted() {
  if (!tracer_) return;
  std::string error;
  if (!tracer_->Enable(&error)) {
    unsupported_ = error;
    tracer_.reset();
    return;
  }
  reader_.Start(kDrainEvery, [this] { tracer_->Drain(waits_); });
}

void LockWaitTracing::MeasurementEnded() {
  if (!tracer_) return;
  std::string error;
  const bool disabled = tracer_->Disable(&error);
  reader_.Stop();
  if (!disabled) {
    unsupported_ = error;
    return;
  }
  tracer_->Drain(waits_);
  measured_ = true;
}

bool LockWaitTracing::AddFindings(const ProbeFindings& out, std::string* /*error*/) const {
  std::map<std::string, double>* counters = out.counters;
  std::map<std::string, std::string>* environment = out.environment;
  if (!unsupported_.empty() || !measured_) {
    (*environment)["mmap_lock_wait.unsupported"] =
        unsupported_.empty() ? "the measured interval did not end" : unsupported_;
    return true;
  }
  for (const auto& [name, value] : waits_.Counters()) (*counters)[name] = value;
  (*environment)["mmap_lock_wait.threads"] = std::to_string(threads_);
  if (!contention_unsupported_.empty()) {
    (*environment)["mmap_lock_contention.unsupported"] = contention_unsupported_;
  }
  return true;
}

}  // namespace faultline::workloads
