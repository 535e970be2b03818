#pragma once
// What a benchmark supplies to the harness: preparation (files, regions) and thread
// groups. One small file per benchmark implements this.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/workloads/harness.h"
#include "common/benchmarks.h"

namespace faultline::workloads {

class Workload {
 public:
  virtual ~Workload() = default;
  // Creates files, maps and fills regions. Long loops check `interrupted` and give up
  // with "interrupted" when it is set.
  virtual bool Prepare(const std::atomic<bool>& interrupted, std::string* error) = 0;
  // Thread groups to run; valid until the workload is destroyed (bodies refer to it).
  virtual std::vector<ThreadGroup> ThreadGroups() = 0;
  // Facts worth keeping with the result ("work_dir", "region_bytes", ...).
  virtual void DescribeEnvironment(std::map<std::string, std::string>* environment) const {}
  // Called on the sampling thread right after the measured interval starts / ends, so a
  // workload can snapshot counters of its own (e.g. time spent faulting).
  virtual void MeasurementStarted() {}
  virtual void MeasurementEnded() {}
  // Counters of its own over the measured interval ("fault_ns_per_iteration", ...).
  virtual void AddCounters(std::map<std::string, double>* counters) const {}
};

struct WorkloadOptions {
  std::string work_dir = "/tmp";  // filemap-thrash creates its files here
  size_t page_size = 0;           // sysconf(_SC_PAGESIZE); never assumed to be 4096
};

using ResolvedKnobs = std::map<std::string, KnobValue>;

std::unique_ptr<Workload> MakeFilemapThrash(const ResolvedKnobs& knobs,
                                            const WorkloadOptions& options);
std::unique_ptr<Workload> MakeSwapIn(const ResolvedKnobs& knobs, const WorkloadOptions& options);
std::unique_ptr<Workload> MakeMmapWriterPressure(const ResolvedKnobs& knobs,
                                                 const WorkloadOptions& options);
std::unique_ptr<Workload> MakeShmemFolioFault(const ResolvedKnobs& knobs,
                                              const WorkloadOptions& options);

// By catalogue name; nullptr for an unknown benchmark.
std::unique_ptr<Workload> MakeWorkload(std::string_view benchmark, const ResolvedKnobs& knobs,
                                       const WorkloadOptions& options);

}  // namespace faultline::workloads
