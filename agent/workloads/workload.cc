#include "agent/workloads/workload.h"

namespace faultline::workloads {

std::unique_ptr<Workload> MakeWorkload(std::string_view benchmark, const ResolvedKnobs& knobs,
                                       const WorkloadOptions& options) {
  if (benchmark == "filemap-thrash") return MakeFilemapThrash(knobs, options);
  if (benchmark == "swap-in") return MakeSwapIn(knobs, options);
  if (benchmark == "mmap-writer-pressure") return MakeMmapWriterPressure(knobs, options);
  if (benchmark == "shmem-folio-fault") return MakeShmemFolioFault(knobs, options);
  return nullptr;
}

}  // namespace faultline::workloads
