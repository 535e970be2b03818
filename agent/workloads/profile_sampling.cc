#include "agent/workloads/profile_sampling.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string_view>

#include "agent/sys/user_symbols.h"
#include "common/profile_names.h"

namespace faultline::workloads {
namespace {

constexpr auto kDrainEvery = std::chrono::milliseconds(20);
// Frames in fewer samples are left out (the 200 most sampled kept): a frame as small as the
// per-VMA lock's lookup under TCG (0.3% of a 1 s run's samples) is in the comparison.
constexpr double kMinFrameShare = 0.001;
constexpr size_t kMaxFrames = 200;
constexpr size_t kMaxFoldedBytes = 64 << 10;

}  // namespace

void ProfileCounters(const std::map<std::string, uint64_t>& folded, uint64_t lost,
                     std::map<std::string, double>* counters) {
  uint64_t samples = 0, user = 0;
  std::map<std::string, uint64_t> total, self;
  for (const auto& [stack, n] : folded) {
    samples += n;
    std::vector<std::string_view> frames;
    for (size_t at = 0; at <= stack.size();) {
      const size_t end = std::min(stack.find(';', at), stack.size());
      frames.push_back(std::string_view(stack).substr(at, end - at));
      at = end + 1;
    }
    // Samples in user mode: the stack is its user frame alone. "[user]" (unnamed) is no frame.
    if (frames.size() == 1 && sys::IsUserFrameName(frames.front())) user += n;
    if (!frames.empty() && frames.front() == "[user]") frames.erase(frames.begin());
    if (frames.empty()) continue;
    std::set<std::string_view> seen;  // a recursive frame counts once per stack
    for (std::string_view f : frames) {
      if (seen.insert(f).second) total[std::string(f)] += n;
    }
    self[std::string(frames.back())] += n;
  }
  (*counters)["profile.samples"] = static_cast<double>(samples);
  (*counters)["profile.lost"] = static_cast<double>(lost);
  (*counters)["profile.user"] = static_cast<double>(user);
  std::vector<std::pair<uint64_t, std::string>> ranked;
  for (const auto& [frame, n] : total) {
    if (static_cast<double>(n) >= kMinFrameShare * static_cast<double>(samples)) {
      ranked.emplace_back(n, frame);
    }
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (ranked.size() > kMaxFrames) ranked.resize(kMaxFrames);
  for (const auto& [n, frame] : ranked) {
    (*counters)[std::string(kProfileTotalPrefix) + frame] = static_cast<double>(n);
    if (auto it = self.find(frame); it != self.end()) {
      (*counters)[std::string(kProfileSelfPrefix) + frame] = static_cast<double>(it->second);
    }
  }
}

std::string FoldedText(const std::map<std::string, uint64_t>& folded, size_t max_bytes) {
  std::vector<std::pair<uint64_t, const std::string*>> ranked;
  for (const auto& [stack, n] : folded) ranked.emplace_back(n, &stack);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  std::string out;
  for (const auto& [n, stack] : ranked) {
    std::string line = *stack + " " + std::to_string(n) + "\n";
    if (out.size() + line.size() > max_bytes) break;
    out += line;
  }
  return out;
}

ProfileSampling::~ProfileSampling() {
  reader_.Stop();
}

void ProfileSampling::ThreadsStarted() {
  if (sampler_ || !unsupported_.empty()) return;
  std::string error;
  sampler_ = sys::StackSampler::Open({.frequency_hz = frequency_hz_, .pmu = pmu_}, &error);
  if (!sampler_) unsupported_ = error;
}

void ProfileSampling::DrainOnce() {
  sys::DrainedSamples drained = sampler_->Drain();
  std::lock_guard<std::mutex> lock(mu_);
  lost_ += drained.lost;
  for (sys::CallChain& chain : drained.chains) {
    if (chain.kernel.empty() && chain.user.empty()) continue;
    // The user part by its leaf (where the thread was in user space); 0: none.
    const uint64_t user = chain.user.empty() ? 0 : std::max<uint64_t>(chain.user.front(), 1);
    ++raw_[{std::move(chain.kernel), user}];
  }
}

void ProfileSampling::MeasurementStarted() {
  if (!sampler_) return;
  sampler_->Drain();  // nothing before the interval counts
  if (!sampler_->Enable()) {
    unsupported_ = "PERF_EVENT_IOC_ENABLE refused";
    sampler_.reset();
    return;
  }
  reader_.Start(kDrainEvery, [this] { DrainOnce(); });
}

void ProfileSampling::MeasurementEnded() {
  if (!sampler_) return;
  const bool disabled = sampler_->Disable();
  reader_.Stop();
  if (!disabled) {
    unsupported_ = "PERF_EVENT_IOC_DISABLE refused";
    return;
  }
  DrainOnce();
  std::vector<uint64_t> addresses, user_addresses;
  for (const auto& [key, n] : raw_) {
    addresses.insert(addresses.end(), key.first.begin(), key.first.end());
    if (key.second != 0) user_addresses.push_back(key.second);
  }
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  std::string error;
  std::optional<sys::KernelSymbols> symbols =
      sys::KernelSymbols::LoadFor("/proc/kallsyms", std::move(addresses), &error);
  if (!symbols) {
    unsupported_ = error;
    return;
  }
  const sys::UserSymbols user_symbols = sys::UserSymbols::LoadFor(std::move(user_addresses));
  for (const auto& [key, n] : raw_) {
    sys::CallChain chain;
    chain.kernel = key.first;
    if (key.second != 0) chain.user = {key.second};
    std::map<std::string, uint64_t> one;
    sys::FoldChains({chain}, *symbols, &one, &user_symbols);
    for (const auto& [stack, count] : one) folded_[stack] += n;
  }
  raw_.clear();
  measured_ = true;
}

bool ProfileSampling::AddFindings(const ProbeFindings& out, std::string* /*error*/) const {
  std::map<std::string, double>* counters = out.counters;
  std::map<std::string, std::string>* environment = out.environment;
  if (!unsupported_.empty() || !measured_) {
    (*environment)["profile.unsupported"] =
        unsupported_.empty() ? "the measured interval did not end" : unsupported_;
    return true;
  }
  ProfileCounters(folded_, lost_, counters);
  *out.folded_stacks = FoldedText(folded_, kMaxFoldedBytes);
  (*environment)["profile.threads"] = std::to_string(sampler_->threads());
  return true;
}

}  // namespace faultline::workloads
