// shmem-folio-fault (the finish_fault seed): a memfd is populated as one large folio (PMD
// sized when shmem THP allows it), a small VMA is mapped over its start, and each iteration
// touches every page of that VMA and zaps the page table with MADV_DONTNEED. How many pages
// one fault maps (one, or the whole folio range inside the VMA) is what the seed measures.
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "agent/sys/file_io.h"
#include "agent/sys/mapped_region.h"
#include "agent/sys/thp.h"
#include "agent/sys/unique_fd.h"
#include "agent/workloads/workload.h"
#include "common/units.h"

namespace faultline::workloads {
namespace {

using sys::MappedRegion;
using sys::UniqueFd;

uint64_t NowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool IsPowerOfTwo(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

// Maps `length` bytes of `fd` at an address aligned to `alignment` (the seed asserts the
// 2M mapping is PMD aligned and the 64K one 64K aligned): reserve more, map over it with
// MAP_FIXED, give back the slack.
MappedRegion MapAligned(int fd, size_t length, size_t alignment, size_t page, int* map_errno) {
  if (alignment <= page || !IsPowerOfTwo(alignment)) {
    return MappedRegion::Map(length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, map_errno);
  }
  const size_t reserve_length = length + alignment;
  void* reserve = ::mmap(nullptr, reserve_length, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserve == MAP_FAILED) {
    *map_errno = errno;
    return MappedRegion();
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(reserve);
  const uintptr_t aligned = (base + alignment - 1) & ~(static_cast<uintptr_t>(alignment) - 1);
  void* at = ::mmap(reinterpret_cast<void*>(aligned), length, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, fd, 0);
  if (at == MAP_FAILED) {
    *map_errno = errno;
    ::munmap(reserve, reserve_length);
    return MappedRegion();
  }
  if (aligned > base) ::munmap(reserve, aligned - base);
  const uintptr_t end = aligned + length, reserve_end = base + reserve_length;
  if (reserve_end > end) ::munmap(reinterpret_cast<void*>(end), reserve_end - end);
  return MappedRegion::Adopt(static_cast<unsigned char*>(at), length);
}

// Time spent in the touch loop and iterations done, per thread, on its own cache lines.
struct alignas(kCounterAlignment) FaultTime {
  std::atomic<uint64_t> ns{0};
  std::atomic<uint64_t> iterations{0};
};

class ShmemFolioFault : public Workload {
 public:
  ShmemFolioFault(const ResolvedKnobs& knobs, const WorkloadOptions& options)
      : options_(options),
        threads_(static_cast<uint32_t>(knobs.at("threads").number)),
        shmem_size_(knobs.at("shmem_size").number),
        vma_size_(knobs.at("vma_size").number),
        thp_(knobs.at("thp").text),
        write_(knobs.at("access").text == "write"),
        touch_pages_(knobs.at("touch_pages").number),
        timing_(knobs.at("fault_timing").text == "on"),
        times_(threads_) {}

  bool Prepare(const std::atomic<bool>& interrupted, std::string* error) override {
    const uint64_t page = options_.page_size;
    shmem_size_ = (shmem_size_ + page - 1) / page * page;
    vma_size_ = (vma_size_ + page - 1) / page * page;
    if (vma_size_ > shmem_size_) {
      *error = "vma_size (" + FormatSize(vma_size_) + ") must not exceed shmem_size (" +
               FormatSize(shmem_size_) + ")";
      return false;
    }
    const uint64_t vma_pages = vma_size_ / page;
    if (touch_pages_ == 0 || touch_pages_ > vma_pages) touch_pages_ = vma_pages;
    shmem_enabled_path_ = sys::ShmemEnabledPathFor(shmem_size_);
    if (thp_ == "force") {
      if (shmem_enabled_path_.empty()) {
        *error = "thp=force: no shmem_enabled setting for " + FormatSize(shmem_size_) +
                 " folios on this kernel (use thp=advise or a shmem_size of the PMD size, " +
                 FormatSize(sys::ThpPmdSize()) + ")";
        return false;
      }
      std::string why;
      auto forced = sys::ScopedSysfsChoice::Set(shmem_enabled_path_, "always", &why);
      if (!forced) {
        *error = "thp=force: setting " + shmem_enabled_path_ + " to always: " + why +
                 " (needs root; or use thp=advise)";
        return false;
      }
      forced_ = std::make_unique<sys::ScopedSysfsChoice>(std::move(*forced));
    }
    for (uint32_t i = 0; i < threads_; ++i) {
      if (interrupted.load()) {
        *error = "interrupted";
        return false;
      }
      if (!PrepareThread(error)) return false;
    }
    if (auto smaps = sys::ReadSmapsFor(big_maps_.front().data())) {
      auto field = [&](const char* name) {
        auto it = smaps->find(name);
        return it == smaps->end() ? uint64_t{0} : it->second;
      };
      pmd_mapped_kb_ = field("ShmemPmdMapped") + field("FilePmdMapped");
      rss_kb_ = field("Rss");
    }
    return true;
  }

  std::vector<ThreadGroup> ThreadGroups() override {
    return {{"", threads_,
             [this](uint32_t index, RoundCounter& counter, const std::atomic<bool>& stop,
                    std::string* error) {
               return timing_ ? Loop<true>(index, counter, stop, error)
                              : Loop<false>(index, counter, stop, error);
             }}};
  }

  void MeasurementStarted() override { start_ = Snapshot(); }
  void MeasurementEnded() override { end_ = Snapshot(); }

  void AddCounters(std::map<std::string, double>* counters) const override {
    const double iterations = static_cast<double>(end_.iterations - start_.iterations);
    const double elapsed_ns = static_cast<double>(end_.wall_ns - start_.wall_ns);
    if (iterations <= 0) return;
    // Wall time per iteration of one thread (touch + MADV_DONTNEED): threads run in parallel.
    (*counters)["ns_per_iteration"] = elapsed_ns * threads_ / iterations;
    if (timing_) {
      const double fault_ns = static_cast<double>(end_.fault_ns - start_.fault_ns);
      (*counters)["fault_ns_total"] = fault_ns;
      (*counters)["fault_ns_per_iteration"] = fault_ns / iterations;
    }
  }

  void DescribeEnvironment(std::map<std::string, std::string>* environment) const override {
    auto& env = *environment;
    env["shmem.size_bytes"] = std::to_string(shmem_size_);
    env["shmem.vma_bytes"] = std::to_string(vma_size_);
    env["shmem.touch_pages"] = std::to_string(touch_pages_);
    env["shmem.pmd_mapped_kb"] = std::to_string(pmd_mapped_kb_);
    env["shmem.rss_kb"] = std::to_string(rss_kb_);
    env["shmem.pmd_folio"] = pmd_mapped_kb_ * 1024 >= shmem_size_ ? "true" : "false";
    if (!shmem_enabled_path_.empty()) {
      env["shmem.enabled_path"] = shmem_enabled_path_;
      if (forced_) env["shmem.enabled_before_force"] = forced_->previous();
    }
  }

 private:
  struct Totals {
    uint64_t fault_ns = 0;
    uint64_t iterations = 0;
    uint64_t wall_ns = 0;
  };

  Totals Snapshot() const {
    Totals t;
    for (const auto& time : times_) {
      t.fault_ns += time.ns.load(std::memory_order_relaxed);
      t.iterations += time.iterations.load(std::memory_order_relaxed);
    }
    t.wall_ns = NowNs();
    return t;
  }

  bool PrepareThread(std::string* error) {
    UniqueFd fd(::memfd_create("faultline-shmem-folio", MFD_CLOEXEC));
    if (!fd) {
      *error = "memfd_create: " + sys::ErrnoMessage(errno);
      return false;
    }
    if (::ftruncate(fd.get(), static_cast<off_t>(shmem_size_)) != 0) {
      *error = "ftruncate memfd to " + FormatSize(shmem_size_) + ": " + sys::ErrnoMessage(errno);
      return false;
    }
    int map_errno = 0;
    MappedRegion big =
        MapAligned(fd.get(), shmem_size_, shmem_size_, options_.page_size, &map_errno);
    if (!big.valid()) {
      *error = "mmap of the " + FormatSize(shmem_size_) + " memfd: " + sys::ErrnoMessage(map_errno);
      return false;
    }
    if (thp_ != "force") {
      // Best effort: without CONFIG_TRANSPARENT_HUGEPAGE this is EINVAL, and small folios
      // are what the board gives.
      ::madvise(big.data(), big.size(), thp_ == "never" ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
    }
    // The seed writes c[0] so the first fault allocates the whole folio; writing every page
    // also fills the page cache when the folio comes out small.
    for (size_t offset = 0; offset < big.size(); offset += options_.page_size)
      big.data()[offset] = 0;
    MappedRegion small = MapAligned(fd.get(), vma_size_, vma_size_, options_.page_size, &map_errno);
    if (!small.valid()) {
      *error = "mmap of the " + FormatSize(vma_size_) + " VMA: " + sys::ErrnoMessage(map_errno);
      return false;
    }
    memfds_.push_back(std::move(fd));
    big_maps_.push_back(std::move(big));
    small_maps_.push_back(std::move(small));
    return true;
  }

  template <bool kTimed>
  // Out of line: a profile's user frame names the loop (user_symbols.h).
  [[gnu::noinline]] bool Loop(uint32_t index, RoundCounter& counter, const std::atomic<bool>& stop,
                              std::string* error) {
    unsigned char* const base = small_maps_[index].data();
    const size_t length = small_maps_[index].size();
    const size_t step = options_.page_size;
    const size_t touched = static_cast<size_t>(touch_pages_) * step;
    FaultTime& time = times_[index];
    unsigned sum = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t t0 = 0;
      if constexpr (kTimed) t0 = NowNs();
      if (write_) {
        for (size_t offset = 0; offset < touched; offset += step) {
          *reinterpret_cast<volatile unsigned char*>(base + offset) = 3;
        }
      } else {
        for (size_t offset = 0; offset < touched; offset += step) {
          sum += *reinterpret_cast<const volatile unsigned char*>(base + offset);
        }
      }
      if constexpr (kTimed) {
        time.ns.store(time.ns.load(std::memory_order_relaxed) + (NowNs() - t0),
                      std::memory_order_relaxed);
      }
      if (::madvise(base, length, MADV_DONTNEED) != 0) {
        *error = "madvise(MADV_DONTNEED): " + sys::ErrnoMessage(errno);
        return false;
      }
      time.iterations.store(time.iterations.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
      counter.AddPages(touch_pages_);
      counter.Increment();
    }
    sink_.store(sum, std::memory_order_relaxed);
    return true;
  }

  WorkloadOptions options_;
  uint32_t threads_;
  uint64_t shmem_size_;
  uint64_t vma_size_;
  std::string thp_;
  bool write_;
  uint64_t touch_pages_;
  bool timing_;
  std::vector<FaultTime> times_;
  std::string shmem_enabled_path_;
  std::unique_ptr<sys::ScopedSysfsChoice> forced_;
  // Declared after forced_ so they are unmapped before the setting is restored.
  std::vector<UniqueFd> memfds_;
  std::vector<MappedRegion> big_maps_;
  std::vector<MappedRegion> small_maps_;
  uint64_t pmd_mapped_kb_ = 0;
  uint64_t rss_kb_ = 0;
  Totals start_, end_;
  static inline std::atomic<unsigned> sink_{0};
};

}  // namespace

std::unique_ptr<Workload> MakeShmemFolioFault(const ResolvedKnobs& knobs,
                                              const WorkloadOptions& options) {
  return std::make_unique<ShmemFolioFault>(knobs, options);
}

}  // namespace faultline::workloads
