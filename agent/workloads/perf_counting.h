#pragma once
// faultline-workload --events: perf counters over the measured interval, as the harness's
// hooks see it. The counters are opened (disabled) on every thread once the benchmark's
// threads run, enabled right after the start-of-interval snapshot and disabled at the end,
// so neither the opening nor the snapshots are counted. Results:
//   counters     perf.<event>              the count, summed over the process's threads
//   environment  perf.unsupported.<event>  why it was not counted (hw:* without a PMU)
//                perf.scaled.<event>       "true": multiplexed, scaled by enabled/running
//                perf.threads              threads counted
#include <map>
#include <optional>
#include <string>

#include "agent/sys/perf_counters.h"
#include "agent/workloads/probe.h"

namespace faultline::workloads {

class PerfCounting final : public Probe {
 public:
  explicit PerfCounting(sys::ResolvedPerfEvents events) : events_(std::move(events)) {}

  // The harness's hooks; a failure is kept for AddResults (a hook cannot stop the run).
  void ThreadsStarted() override;
  void MeasurementStarted() override;
  void MeasurementEnded() override;

  // Adds the counts and notes; false with *error ("--events: ", naming the event) if
  // counting failed.
  bool AddFindings(const ProbeFindings& out, std::string* error) const override;

 private:
  bool Collect(std::map<std::string, double>* counters,
               std::map<std::string, std::string>* environment, std::string* error) const;
  void Keep(const std::string& error) {
    if (error_.empty()) error_ = error;
  }

  sys::ResolvedPerfEvents events_;
  std::optional<sys::PerfCounterSession> session_;
  bool started_ = false;
  bool ended_ = false;
  std::string error_;
};

}  // namespace faultline::workloads
