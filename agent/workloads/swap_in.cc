// swap-in: readers fault a swapped-out anonymous region back in while pageout threads
// push it out with MADV_PAGEOUT; one round = one reader pass over the whole region.
#include "agent/workloads/anon_region_workload.h"

namespace faultline::workloads {

std::unique_ptr<Workload> MakeSwapIn(const ResolvedKnobs& knobs, const WorkloadOptions& options) {
  AnonRegionConfig config;
  config.region_size = knobs.at("region_size").number;
  config.readers = static_cast<uint32_t>(knobs.at("readers").number);
  config.pageout_threads = static_cast<uint32_t>(knobs.at("pageout_threads").number);
  config.nonzero_fill = knobs.at("fill").text == "nonzero";
  return MakeAnonRegionWorkload(config, options);
}

}  // namespace faultline::workloads
