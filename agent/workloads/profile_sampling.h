#pragma once
// faultline-workload --profile-hz N [--profile-pmu]: the benchmark's threads' call stacks
// sampled N times a second each over the measured interval (agent/sys/stack_sampler.h),
// kernel frames named from this kernel's /proc/kallsyms (the kernel the run booted). Opened
// on every thread once they run, enabled with the measured interval and drained by a reader
// thread of its own (not sampled). Results:
//   counters     profile.samples, profile.lost, profile.user (samples in user mode) and, for
//                each frame in at least 0.1% of the samples (at most 200 frames; kernel
//                frames by name, the user leaf as "OBJECT:FUNCTION", sys/user_symbols.h),
//                profile.total.<frame> (samples with the frame anywhere in the stack) and
//                profile.self.<frame> (at the leaf). The controller compares them per round
//                like every counter: a frame's CPU time per unit of work, which does not
//                move when another frame does (a share would).
// Kernel frames are named after the interval (KernelSymbols::LoadFor: only the symbols
// needed), so the run's memory cgroup does not pay for the kernel's symbol table.
//   stacks       the folded stacks (the result's folded_stacks), "root;...;leaf COUNT" a
//                line, most samples first, at most 64 KiB
//   environment  profile.unsupported   why nothing was sampled (perf refused, no symbols):
//                                      the run goes on
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/sys/stack_sampler.h"
#include "agent/workloads/periodic_drain.h"
#include "agent/workloads/probe.h"

namespace faultline::workloads {

class ProfileSampling final : public Probe {
 public:
  ProfileSampling(uint32_t frequency_hz, bool pmu) : frequency_hz_(frequency_hz), pmu_(pmu) {}
  ProfileSampling(const ProfileSampling&) = delete;
  ProfileSampling& operator=(const ProfileSampling&) = delete;
  ~ProfileSampling() override;

  void ThreadsStarted() override;
  void MeasurementStarted() override;
  void MeasurementEnded() override;

  // Adds the counters and folded stacks, or why nothing was sampled (never fails the run).
  bool AddFindings(const ProbeFindings& out, std::string* error) const override;

 private:
  void DrainOnce();

  uint32_t frequency_hz_;
  bool pmu_;
  std::optional<sys::StackSampler> sampler_;
  std::mutex mu_;  // raw_, lost_: the reader thread and the end of the interval
  // Samples by kernel chain (leaf first) and the user part's leaf address (0: none); named
  // once the interval ended (the symbols needed are read then, a few hundred KiB: the run's
  // memory cgroup measures this process).
  std::map<std::pair<std::vector<uint64_t>, uint64_t>, uint64_t> raw_;
  std::map<std::string, uint64_t> folded_;
  uint64_t lost_ = 0;
  PeriodicDrain reader_;
  bool measured_ = false;
  std::string unsupported_;
};

// The counters and the folded text of a run's folded stacks (exposed for tests).
void ProfileCounters(const std::map<std::string, uint64_t>& folded, uint64_t lost,
                     std::map<std::string, double>* counters);
std::string FoldedText(const std::map<std::string, uint64_t>& folded, size_t max_bytes);

}  // namespace faultline::workloads
