#include "agent/sys/stack_sampler.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "agent/sys/file_io.h"
#include "agent/sys/perf_counters.h"

namespace faultline::sys {
namespace {

int PerfEventOpen(struct perf_event_attr* attr, pid_t pid) {
  return static_cast<int>(::syscall(SYS_perf_event_open, attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

// Reads a u64 at `offset` of the ring's data area, wrapping around its end.
uint64_t ReadU64(const unsigned char* data, uint64_t size, uint64_t offset) {
  unsigned char bytes[sizeof(uint64_t)];
  for (size_t i = 0; i < sizeof(bytes); ++i) bytes[i] = data[(offset + i) & (size - 1)];
  uint64_t value = 0;
  std::memcpy(&value, bytes, sizeof(value));
  return value;
}

}  // namespace

KernelSymbols KernelSymbols::Parse(std::string_view text) {
  std::vector<std::pair<uint64_t, std::string>> symbols;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    char type = 0;
    unsigned long long address = 0;
    char name[256] = {};
    if (std::sscanf(line.c_str(), "%llx %c %255s", &address, &type, name) != 3) continue;
    if (std::strchr("tTwW", type) == nullptr || address == 0) continue;
    symbols.emplace_back(address, name);
  }
  std::stable_sort(symbols.begin(), symbols.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  KernelSymbols out;
  for (auto& [address, name] : symbols) {
    out.addresses_.push_back(address);
    out.names_.push_back(std::move(name));
  }
  return out;
}

std::optional<KernelSymbols> KernelSymbols::Load(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = path + ": " + ErrnoMessage(errno);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  KernelSymbols symbols = Parse(text.str());
  if (symbols.size() == 0) {
    *error = path + ": no text symbol with an address (kptr_restrict hides them from this user?)";
    return std::nullopt;
  }
  return symbols;
}

namespace {

// Calls line(address, type, name) for each well-formed line of a kallsyms/System.map file.
template <typename F>
bool ScanSymbols(const std::string& path, std::string* error, F&& line) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    *error = path + ": " + ErrnoMessage(errno);
    return false;
  }
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), f) != nullptr) {
    char type = 0;
    unsigned long long address = 0;
    char name[256] = {};
    if (std::sscanf(buffer, "%llx %c %255s", &address, &type, name) != 3) continue;
    if (std::strchr("tTwW", type) == nullptr || address == 0) continue;
    line(static_cast<uint64_t>(address), name);
  }
  std::fclose(f);
  return true;
}

}  // namespace

std::optional<KernelSymbols> KernelSymbols::LoadFor(const std::string& path,
                                                    std::vector<uint64_t> addresses,
                                                    std::string* error) {
  std::vector<uint64_t> starts;
  if (!ScanSymbols(path, error, [&](uint64_t a, const char*) { starts.push_back(a); })) {
    return std::nullopt;
  }
  if (starts.empty()) {
    *error = path + ": no text symbol with an address (kptr_restrict hides them from this user?)";
    return std::nullopt;
  }
  std::sort(starts.begin(), starts.end());
  std::vector<uint64_t> needed;
  for (uint64_t a : addresses) {
    auto it = std::upper_bound(starts.begin(), starts.end(), a);
    if (it != starts.begin()) needed.push_back(*(it - 1));
  }
  std::vector<uint64_t>().swap(starts);
  std::sort(needed.begin(), needed.end());
  needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
  KernelSymbols out;
  std::vector<std::pair<uint64_t, std::string>> found;
  if (!ScanSymbols(path, error, [&](uint64_t a, const char* name) {
        if (std::binary_search(needed.begin(), needed.end(), a)) found.emplace_back(a, name);
      })) {
    return std::nullopt;
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [a, name] : found) {
    if (!out.addresses_.empty() && out.addresses_.back() == a) {  // an alias: the last, as Parse
      out.names_.back() = std::move(name);
      continue;
    }
    out.addresses_.push_back(a);
    out.names_.push_back(std::move(name));
  }
  return out;
}

std::string_view KernelSymbols::Name(uint64_t address) const {
  auto it = std::upper_bound(addresses_.begin(), addresses_.end(), address);
  if (it == addresses_.begin()) return {};
  return names_[static_cast<size_t>(it - addresses_.begin()) - 1];
}

DrainedSamples ParseRingRecords(const unsigned char* data, uint64_t size, uint64_t tail,
                                uint64_t head) {
  DrainedSamples out;
  constexpr uint64_t kHeader = sizeof(struct perf_event_header);
  while (head - tail >= kHeader) {
    struct perf_event_header header {};
    const uint64_t word = ReadU64(data, size, tail);
    std::memcpy(&header, &word, sizeof(header));
    if (header.size < kHeader || header.size > head - tail) break;  // torn: stop here
    const uint64_t body = tail + kHeader;
    if (header.type == PERF_RECORD_LOST && header.size >= kHeader + 16) {
      out.lost += ReadU64(data, size, body + 8);  // id, lost
    } else if (header.type == PERF_RECORD_SAMPLE && header.size >= kHeader + 24) {
      // ip, pid/tid, nr, ips[nr]
      const uint64_t nr = ReadU64(data, size, body + 16);
      if (header.size >= kHeader + 24 + 8 * nr) {
        CallChain chain;
        std::vector<uint64_t>* part = nullptr;
        for (uint64_t i = 0; i < nr; ++i) {
          const uint64_t ip = ReadU64(data, size, body + 24 + 8 * i);
          if (ip >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) {  // a context marker
            part = ip == static_cast<uint64_t>(PERF_CONTEXT_KERNEL) ? &chain.kernel
                   : ip == static_cast<uint64_t>(PERF_CONTEXT_USER) ? &chain.user
                                                                    : nullptr;
            continue;
          }
          if (part != nullptr) part->push_back(ip);
        }
        out.chains.push_back(std::move(chain));
      }
    }
    tail += header.size;
  }
  return out;
}

void FoldChains(const std::vector<CallChain>& chains, const KernelSymbols& symbols,
                std::map<std::string, uint64_t>* folded, const UserSymbols* user) {
  for (const CallChain& chain : chains) {
    std::string stack;
    if (!chain.user.empty()) stack = user ? user->Name(chain.user.front()) : "[user]";
    // Root first: the kernel chain is leaf first.
    for (auto it = chain.kernel.rbegin(); it != chain.kernel.rend(); ++it) {
      std::string_view name = symbols.Name(*it);
      char hex[24];
      if (name.empty()) {
        std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(*it));
        name = hex;
      }
      if (!stack.empty()) stack += ';';
      stack += name;
    }
    if (stack.empty()) continue;
    ++(*folded)[stack];
  }
}

std::optional<StackSampler> StackSampler::Open(const StackSamplerOptions& options,
                                               std::string* error) {
  if (options.ring_pages == 0 || (options.ring_pages & (options.ring_pages - 1)) != 0) {
    *error = "ring_pages: a power of two";
    return std::nullopt;
  }
  std::vector<pid_t> tids = ThreadsOfThisProcess(error);
  if (tids.empty()) {
    if (error->empty()) *error = "/proc/self/task lists no thread";
    return std::nullopt;
  }
  StackSampler sampler;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (pid_t tid : tids) {
    struct perf_event_attr attr {};
    attr.size = sizeof(attr);
    attr.type = options.pmu ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
    attr.config = options.pmu ? static_cast<uint64_t>(PERF_COUNT_HW_CPU_CYCLES)
                              : static_cast<uint64_t>(PERF_COUNT_SW_CPU_CLOCK);
    attr.freq = 1;
    attr.sample_freq = options.frequency_hz;
    attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN;
    attr.disabled = 1;
    attr.exclude_hv = 1;
    attr.wakeup_events = 0;
    UniqueFd fd(PerfEventOpen(&attr, tid));
    if (!fd) {
      if (errno == ESRCH) continue;  // the thread is gone
      *error =
          "perf_event_open (sampling, thread " + std::to_string(tid) + "): " + ErrnoMessage(errno);
      return std::nullopt;
    }
    int map_errno = 0;
    const size_t length = static_cast<size_t>(page) * (1 + options.ring_pages);
    MappedRegion ring =
        MappedRegion::Map(length, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0, &map_errno);
    if (!ring.valid()) {
      *error = "mmap of the sample ring: " + ErrnoMessage(map_errno);
      return std::nullopt;
    }
    sampler.data_size_ = static_cast<uint64_t>(page) * options.ring_pages;
    sampler.page_ = static_cast<uint64_t>(page);
    sampler.threads_.push_back({std::move(fd), std::move(ring)});
  }
  if (sampler.threads_.empty()) {
    *error = "no thread to sample";
    return std::nullopt;
  }
  return sampler;
}

bool StackSampler::Enable() {
  bool ok = true;
  for (const Thread& t : threads_) ok = ::ioctl(t.fd.get(), PERF_EVENT_IOC_ENABLE, 0) == 0 && ok;
  return ok;
}

bool StackSampler::Disable() {
  bool ok = true;
  for (const Thread& t : threads_) ok = ::ioctl(t.fd.get(), PERF_EVENT_IOC_DISABLE, 0) == 0 && ok;
  return ok;
}

DrainedSamples StackSampler::Drain() {
  DrainedSamples out;
  for (Thread& t : threads_) {
    auto* meta = reinterpret_cast<struct perf_event_mmap_page*>(t.ring.data());
    const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    const uint64_t tail = meta->data_tail;
    // data_offset and data_size are 0 on kernels before 4.1: the data follows the first page.
    const unsigned char* data =
        t.ring.data() + (meta->data_offset != 0 ? meta->data_offset : page_);
    const uint64_t size = meta->data_size != 0 ? meta->data_size : data_size_;
    DrainedSamples one = ParseRingRecords(data, size, tail, head);
    __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
    out.lost += one.lost;
    for (CallChain& c : one.chains) out.chains.push_back(std::move(c));
  }
  return out;
}

}  // namespace faultline::sys
