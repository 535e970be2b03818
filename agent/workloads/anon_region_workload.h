#pragma once
// Shared by swap-in and mmap-writer-pressure: readers fault an anonymous region back in
// while pageout threads push it out with MADV_PAGEOUT, and (for mmap-writer-pressure)
// writer threads mmap/munmap to take mmap_lock for write.
#include <memory>

#include "agent/workloads/workload.h"

namespace faultline::workloads {

struct AnonRegionConfig {
  uint64_t region_size = 0;
  uint32_t readers = 0;
  uint32_t pageout_threads = 0;
  uint32_t writers = 0;
  uint64_t writer_map_size = 0;
  bool nonzero_fill = false;
};

std::unique_ptr<Workload> MakeAnonRegionWorkload(const AnonRegionConfig& config,
                                                 const WorkloadOptions& options);

}  // namespace faultline::workloads
