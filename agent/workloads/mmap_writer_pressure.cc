// mmap-writer-pressure: swap-in readers and pageout threads, plus writer threads that
// mmap/munmap small regions in a loop so mmap_lock is taken for write while readers fault.
#include "agent/workloads/anon_region_workload.h"

namespace faultline::workloads {

std::unique_ptr<Workload> MakeMmapWriterPressure(const ResolvedKnobs& knobs,
                                                 const WorkloadOptions& options) {
  AnonRegionConfig config;
  config.region_size = knobs.at("region_size").number;
  config.readers = static_cast<uint32_t>(knobs.at("readers").number);
  config.pageout_threads = static_cast<uint32_t>(knobs.at("pageout_threads").number);
  config.writers = static_cast<uint32_t>(knobs.at("writers").number);
  config.writer_map_size = knobs.at("writer_map_size").number;
  config.nonzero_fill = knobs.at("fill").text == "nonzero";
  return MakeAnonRegionWorkload(config, options);
}

}  // namespace faultline::workloads
