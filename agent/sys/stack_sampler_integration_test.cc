// Real call-stack sampling: this process faults pages in while sampled on the cpu-clock;
// the folded stacks name the kernel's fault path from /proc/kallsyms.
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "agent/sys/stack_sampler.h"

namespace faultline::sys {
namespace {

TEST(StackSamplerIntegration, FaultingThreadsShowTheKernelFaultPath) {
  std::string error;
  std::optional<KernelSymbols> symbols = KernelSymbols::Load("/proc/kallsyms", &error);
  if (!symbols) GTEST_SKIP() << "no kernel symbols: " << error;
  std::optional<StackSampler> sampler = StackSampler::Open({.frequency_hz = 4000}, &error);
  if (!sampler && (error.find("Permission") != std::string::npos ||
                   error.find("not permitted") != std::string::npos)) {
    GTEST_SKIP() << "sampling is not allowed here: " << error;
  }
  ASSERT_TRUE(sampler.has_value()) << error;
  ASSERT_TRUE(sampler->Enable());
  // Fault 4 MiB in and out until enough samples are in (bounded work, not a wait).
  constexpr size_t kBytes = 4 << 20;
  std::vector<CallChain> chains;
  uint64_t lost = 0;
  for (int round = 0; round < 20000 && chains.size() < 400; ++round) {
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED) << std::strerror(errno);
    for (size_t off = 0; off < kBytes; off += 4096) static_cast<volatile char*>(p)[off] = 1;
    ::munmap(p, kBytes);
    DrainedSamples drained = sampler->Drain();
    lost += drained.lost;
    for (auto& c : drained.chains) chains.push_back(std::move(c));
  }
  ASSERT_TRUE(sampler->Disable());
  ASSERT_GE(chains.size(), 400u) << "samples taken in 20000 rounds of faults";
  std::map<std::string, uint64_t> folded;
  FoldChains(chains, *symbols, &folded);
  uint64_t fault_path = 0, total = 0;
  for (const auto& [stack, n] : folded) {
    total += n;
    if (stack.find("handle_mm_fault") != std::string::npos) fault_path += n;
  }
  EXPECT_EQ(total, chains.size() - std::count_if(chains.begin(), chains.end(), [](const auto& c) {
                     return c.kernel.empty() && c.user.empty();
                   }));
  std::vector<std::pair<uint64_t, std::string>> top;
  for (const auto& [stack, n] : folded) top.emplace_back(n, stack);
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < top.size() && i < 3; ++i) {
    std::cout << "top stack " << i + 1 << ": " << top[i].second << " " << top[i].first << "\n";
  }
  EXPECT_GT(fault_path, total / 20)
      << "the fault path in at least 5% of " << total << " samples; lost " << lost;
  EXPECT_LT(lost, chains.size()) << "the ring, drained every round, keeps most samples";
}

}  // namespace
}  // namespace faultline::sys
