#include "agent/workloads/anon_region_workload.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "agent/sys/file_io.h"
#include "agent/sys/mapped_region.h"
#include "common/units.h"

// Older libc headers lack it; the value is the kernel's ABI (Linux 5.4+).
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

namespace faultline::workloads {
namespace {

using sys::MappedRegion;

class AnonRegionWorkload : public Workload {
 public:
  AnonRegionWorkload(const AnonRegionConfig& config, const WorkloadOptions& options)
      : config_(config), options_(options) {
    // Whole pages only: MADV_PAGEOUT and the one-byte-per-page readers work in pages.
    const uint64_t page = options_.page_size;
    region_bytes_ = (config_.region_size + page - 1) / page * page;
    writer_bytes_ = (config_.writer_map_size + page - 1) / page * page;
  }

  bool Prepare(const std::atomic<bool>& interrupted, std::string* error) override {
    int map_errno = 0;
    region_ = MappedRegion::MapAnonymous(region_bytes_, &map_errno);
    if (!region_.valid()) {
      *error = "mmap of a " + FormatSize(region_bytes_) +
               " anonymous region: " + sys::ErrnoMessage(map_errno);
      return false;
    }
    return config_.nonzero_fill ? FillNonZero(interrupted, error) : FillZero(interrupted, error);
  }

  std::vector<ThreadGroup> ThreadGroups() override {
    std::vector<ThreadGroup> groups;
    groups.push_back({"", config_.readers,
                      [this](uint32_t, RoundCounter& counter, const std::atomic<bool>& stop,
                             std::string*) { return ReadLoop(counter, stop); }});
    if (config_.pageout_threads > 0) {
      groups.push_back({"pageout_rounds", config_.pageout_threads,
                        [this](uint32_t, RoundCounter& counter, const std::atomic<bool>& stop,
                               std::string* error) { return PageoutLoop(counter, stop, error); },
                        "pageout_pages"});
    }
    if (config_.writers > 0) {
      groups.push_back({"writer_rounds", config_.writers,
                        [this](uint32_t, RoundCounter& counter, const std::atomic<bool>& stop,
                               std::string* error) { return WriterLoop(counter, stop, error); }});
    }
    return groups;
  }

  void DescribeEnvironment(std::map<std::string, std::string>* environment) const override {
    (*environment)["region_bytes"] = std::to_string(region_bytes_);
  }

 private:
  // Touching in chunks lets a SIGTERM during a multi-GiB fill end it early.
  static constexpr size_t kFillChunk = 16 << 20;
  static constexpr size_t kPagesPerProgressStep = 64;

  bool FillZero(const std::atomic<bool>& interrupted, std::string* error) {
    for (size_t offset = 0; offset < region_bytes_; offset += kFillChunk) {
      if (interrupted.load()) return Interrupted(error);
      std::memset(region_.data() + offset, 0, std::min(kFillChunk, region_bytes_ - offset));
    }
    return true;
  }

  // Every 64-bit word differs within a page: zram stores same-filled pages (any repeated
  // word, not just zeros) without compressing them, which would hide the real swap-in path.
  bool FillNonZero(const std::atomic<bool>& interrupted, std::string* error) {
    const size_t words_per_page = options_.page_size / sizeof(uint64_t);
    auto* words = reinterpret_cast<uint64_t*>(region_.data());
    const size_t pages = region_bytes_ / options_.page_size;
    for (size_t page = 0; page < pages; ++page) {
      if (page % 4096 == 0 && interrupted.load()) return Interrupted(error);
      for (size_t w = 0; w < words_per_page; ++w) {
        uint64_t x = (page << 20) ^ (w * 0x9E3779B97F4A7C15ull);
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        words[page * words_per_page + w] = x | 1;
      }
    }
    return true;
  }

  static bool Interrupted(std::string* error) {
    *error = "interrupted";
    return false;
  }

  // Out of line: a profile's user frame names the loop (user_symbols.h).
  [[gnu::noinline]] bool ReadLoop(RoundCounter& counter, const std::atomic<bool>& stop) const {
    const volatile unsigned char* bytes = region_.data();
    const size_t step = options_.page_size;
    unsigned sum = 0;
    // Progress is published per chunk of pages: one relaxed store per 64 touches.
    const size_t chunk = kPagesPerProgressStep * step;
    while (!stop.load(std::memory_order_relaxed)) {
      for (size_t begin = 0; begin < region_bytes_; begin += chunk) {
        const size_t end = std::min(region_bytes_, begin + chunk);
        for (size_t offset = begin; offset < end; offset += step) sum += bytes[offset];
        counter.AddPages((end - begin) / step);
      }
      counter.Increment();
    }
    sink_.store(sum, std::memory_order_relaxed);
    return true;
  }

  // A round pages the whole region out, in chunks of kPageoutChunkPages: one call over 64M
  // compresses 16,384 pages into zram and can outlast a measured interval on a loaded
  // machine (0 rounds although pages went out), and a chunk lets `stop` end a pass early.
  static constexpr size_t kPageoutChunkPages = 512;
  [[gnu::noinline]] bool PageoutLoop(RoundCounter& counter, const std::atomic<bool>& stop,
                                     std::string* error) const {
    const size_t chunk = kPageoutChunkPages * options_.page_size;
    while (!stop.load(std::memory_order_relaxed)) {
      for (size_t begin = 0; begin < region_bytes_;) {
        if (stop.load(std::memory_order_relaxed)) return true;
        const size_t length = std::min(chunk, region_bytes_ - begin);
        if (::madvise(region_.data() + begin, length, MADV_PAGEOUT) != 0) {
          if (errno == EINTR || errno == EAGAIN) continue;
          *error = errno == EINVAL ? "madvise(MADV_PAGEOUT) not supported (needs Linux 5.4+)"
                                   : "madvise(MADV_PAGEOUT): " + sys::ErrnoMessage(errno);
          return false;
        }
        counter.AddPages(length / options_.page_size);
        begin += length;
      }
      counter.Increment();
    }
    return true;
  }

  // mmap and munmap both take mmap_lock for write; touching one page makes the mapping real.
  [[gnu::noinline]] bool WriterLoop(RoundCounter& counter, const std::atomic<bool>& stop,
                                    std::string* error) const {
    while (!stop.load(std::memory_order_relaxed)) {
      int map_errno = 0;
      MappedRegion map = MappedRegion::MapAnonymous(writer_bytes_, &map_errno);
      if (!map.valid()) {
        *error = "mmap (writer thread): " + sys::ErrnoMessage(map_errno);
        return false;
      }
      map.data()[0] = 1;
      map.Unmap();
      counter.Increment();
    }
    return true;
  }

  AnonRegionConfig config_;
  WorkloadOptions options_;
  size_t region_bytes_ = 0;
  size_t writer_bytes_ = 0;
  MappedRegion region_;
  static inline std::atomic<unsigned> sink_{0};
};

}  // namespace

std::unique_ptr<Workload> MakeAnonRegionWorkload(const AnonRegionConfig& config,
                                                 const WorkloadOptions& options) {
  return std::make_unique<AnonRegionWorkload>(config, options);
}

}  // namespace faultline::workloads
