#pragma once
// Change points over each series' history of per-job medians (nightly jobs of a schedule,
// or any study repeated under one name): found with the E-divisive detector in core, stored
// once, then tracked by state (open, acknowledged, fixed, invalid).
#include "absl/status/statusor.h"
#include "services/controller/storage/interfaces.h"
#include "stats/changepoint.h"

namespace faultline::controller {

// Scans every series with enough history; returns how many change points were new.
absl::StatusOr<int> DetectHistoryChangePoints(HistoryStore* store,
                                              const stats::ChangePointOptions& options = {});

}  // namespace faultline::controller
