#pragma once
// What a run measures besides its rounds: perf counters (--events), mmap_lock waits
// (--mmap-lock-waits) and call-stack samples (--profile-hz). Each is a Probe: the harness's
// hooks drive every probe the command asks for the same way — started in order once the
// benchmark's threads run and when the measured interval starts, ended in reverse order
// when it ends — and each adds what it found to the result. A new probe is a class and a
// line in MakeProbes; run_command.cc does not change.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/workloads/command_line.h"

namespace faultline::workloads {

// Where a probe's findings go: the run's counters, its environment notes (what was and was
// not measured, and why) and its call stacks.
struct ProbeFindings {
  std::map<std::string, double>* counters = nullptr;
  std::map<std::string, std::string>* environment = nullptr;
  std::string* folded_stacks = nullptr;
};

class Probe {
 public:
  virtual ~Probe() = default;
  // The benchmark's threads run (open per-thread things, disabled).
  virtual void ThreadsStarted() = 0;
  // The measured interval starts (after the start-of-interval snapshot) and ends.
  virtual void MeasurementStarted() = 0;
  virtual void MeasurementEnded() = 0;
  // Adds what it found, or why it found nothing (a note: the run goes on). False with
  // *error only when the run must fail (what the user asked for could not be measured).
  virtual bool AddFindings(const ProbeFindings& out, std::string* error) const = 0;
};

// The probes a command asks for, in the order they start. nullopt with *exit_code and
// *error (naming the option, e.g. "--events: ...") for what is refused before anything is
// set up (an unknown event, a tracepoint this kernel lacks).
std::optional<std::vector<std::unique_ptr<Probe>>> MakeProbes(const WorkloadCommand& command,
                                                              int* exit_code, std::string* error);

// Drives `probes` by the harness's hooks: each hook of every probe, ended in reverse.
class Probes {
 public:
  explicit Probes(std::vector<std::unique_ptr<Probe>> probes) : probes_(std::move(probes)) {}
  void ThreadsStarted() {
    for (auto& p : probes_) p->ThreadsStarted();
  }
  void MeasurementStarted() {
    for (auto& p : probes_) p->MeasurementStarted();
  }
  void MeasurementEnded() {
    for (auto it = probes_.rbegin(); it != probes_.rend(); ++it) (*it)->MeasurementEnded();
  }
  bool AddFindings(const ProbeFindings& out, std::string* error) const {
    for (const auto& p : probes_) {
      if (!p->AddFindings(out, error)) return false;
    }
    return true;
  }
  size_t size() const { return probes_.size(); }

 private:
  std::vector<std::unique_ptr<Probe>> probes_;
};

}  // namespace faultline::workloads
