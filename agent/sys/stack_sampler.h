#pragma once
// Call-stack sampling of this process's threads (issue #46's first layer): perf_event_open(2)
// in sampling mode, raw syscall, no perf binary. One event per thread of /proc/self/task on a
// clock (the software cpu-clock where there is no PMU, as under qemu TCG; hw cycles where the
// caller asks and the board has one), kernel and user call chains, a ring buffer per thread
// (per-task events of different threads cannot share one: PERF_EVENT_IOC_SET_OUTPUT refuses)
// that Drain() reads. Kernel frames are named by
// KernelSymbols (/proc/kallsyms, or the System.map of the kernel the run booted); the user
// part by its leaf, named by UserSymbols ("faultline-workload:Touch": where the thread was in
// user space; deeper user frames would need frame pointers the benchmarks and libc lack).
//
// The folded form is Brendan Gregg's: "root;caller;leaf COUNT" per distinct stack, root first.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sys/mapped_region.h"
#include "agent/sys/unique_fd.h"
#include "agent/sys/user_symbols.h"

namespace faultline::sys {

// Kernel function names by address, from /proc/kallsyms or a System.map ("ADDR TYPE NAME
// [module]" per line). Only text symbols (t/T/w/W) are kept.
class KernelSymbols {
 public:
  static std::optional<KernelSymbols> Load(const std::string& path, std::string* error);
  // Only the symbols that name `addresses` (read in two streaming passes: the text symbols'
  // addresses, then the names needed): a few hundred KiB at most, for a process whose
  // memory is measured (a run's memory cgroup) where the whole table (tens of MiB) is not.
  static std::optional<KernelSymbols> LoadFor(const std::string& path,
                                              std::vector<uint64_t> addresses, std::string* error);
  static KernelSymbols Parse(std::string_view text);
  // The function containing `address` ("handle_mm_fault"), or "" when it lies before the
  // first symbol or all addresses were hidden (kptr_restrict: every address 0).
  std::string_view Name(uint64_t address) const;
  size_t size() const { return addresses_.size(); }

 private:
  std::vector<uint64_t> addresses_;  // sorted
  std::vector<std::string> names_;
};

// One sample's call chain as the kernel recorded it: kernel frames (leaf first), then user
// frames (leaf first).
struct CallChain {
  std::vector<uint64_t> kernel;
  std::vector<uint64_t> user;
};

// What a ring buffer held: the samples' call chains and the records the kernel lost.
struct DrainedSamples {
  std::vector<CallChain> chains;
  uint64_t lost = 0;
};

// Parses the records between tail and head of a perf ring buffer's data area (`data`, a
// power-of-two `size`), wrapping around its end: PERF_RECORD_SAMPLE with sample_type
// IP|TID|CALLCHAIN and PERF_RECORD_LOST. Exposed for tests.
DrainedSamples ParseRingRecords(const unsigned char* data, uint64_t size, uint64_t tail,
                                uint64_t head);

// Folds chains into "root;...;leaf" -> count: kernel frames named by `symbols` (an address it
// cannot name as "0x<hex>"), the user part as one frame below them: its leaf named by `user`
// ("OBJECT:FUNCTION"), or "[user]" without it.
void FoldChains(const std::vector<CallChain>& chains, const KernelSymbols& symbols,
                std::map<std::string, uint64_t>* folded, const UserSymbols* user = nullptr);

struct StackSamplerOptions {
  uint32_t frequency_hz = 99;  // samples per second per thread
  bool pmu = false;            // hw cycles instead of the software cpu-clock
  uint32_t ring_pages = 64;    // data pages of each thread's ring buffer (a power of two)
};

class StackSampler {
 public:
  // Opens a disabled sampling event on every thread of this process; nullopt with *error
  // ("perf_event_open: ...") when the kernel refuses (no permission, no PMU with pmu=true).
  static std::optional<StackSampler> Open(const StackSamplerOptions& options, std::string* error);
  StackSampler(StackSampler&&) noexcept = default;
  StackSampler& operator=(StackSampler&&) noexcept = default;

  bool Enable();
  bool Disable();
  // Takes what the ring buffer holds now (call it often enough that it does not fill:
  // samples that do not fit are counted in `lost`).
  DrainedSamples Drain();
  size_t threads() const { return threads_.size(); }

 private:
  StackSampler() = default;
  struct Thread {
    UniqueFd fd;
    MappedRegion ring;
  };
  std::vector<Thread> threads_;
  uint64_t data_size_ = 0;
  uint64_t page_ = 4096;
};

}  // namespace faultline::sys
