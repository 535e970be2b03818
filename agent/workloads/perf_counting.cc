#include "agent/workloads/perf_counting.h"

namespace faultline::workloads {

void PerfCounting::ThreadsStarted() {
  if (events_.events.empty() || session_) return;
  std::string error;
  session_ = sys::PerfCounterSession::Open(events_.events, &error);
  if (!session_) Keep(error);
}

void PerfCounting::MeasurementStarted() {
  if (!session_) return;
  std::string error;
  if (!session_->Enable(&error)) Keep(error);
  started_ = true;
}

void PerfCounting::MeasurementEnded() {
  if (!session_ || !started_) return;
  std::string error;
  if (!session_->Disable(&error)) Keep(error);
  ended_ = true;
}

bool PerfCounting::AddFindings(const ProbeFindings& out, std::string* error) const {
  if (Collect(out.counters, out.environment, error)) return true;
  *error = "--events: " + *error;
  return false;
}

bool PerfCounting::Collect(std::map<std::string, double>* counters,
                           std::map<std::string, std::string>* environment,
                           std::string* error) const {
  for (const auto& [event, why] : events_.unsupported) {
    (*environment)["perf.unsupported." + event] = why;
  }
  for (const auto& [event, how] : events_.notes) (*environment)["perf.how." + event] = how;
  if (events_.events.empty()) return true;
  if (!error_.empty()) {
    *error = error_;
    return false;
  }
  if (!session_ || !ended_) {
    *error = "the counters were not opened and stopped around the measured interval";
    return false;
  }
  auto counts = session_->Read(error);
  if (!counts) return false;
  for (const auto& count : *counts) {
    if (count.never_counted) {
      (*environment)["perf.unsupported." + count.event] =
          "never on the PMU during the measured interval (multiplexed out)";
      continue;
    }
    (*counters)["perf." + count.event] = count.value;
    if (count.scaled) (*environment)["perf.scaled." + count.event] = "true";
  }
  (*environment)["perf.threads"] = std::to_string(session_->threads());
  return true;
}

}  // namespace faultline::workloads
