#include "services/controller/orchestration/history.h"

#include "services/controller/core/report.h"

namespace faultline::controller {

absl::StatusOr<int> DetectHistoryChangePoints(HistoryStore* store,
                                              const stats::ChangePointOptions& options) {
  auto histories = store->SeriesHistories(2 * std::max(2, options.min_segment));
  if (!histories.ok()) return histories.status();
  std::vector<ChangePointRecord> found;
  for (const auto& h : *histories) {
    for (const auto& cp : stats::DetectChangePoints(h.medians, options)) {
      ChangePointRecord r;
      r.study = h.key.study;
      r.benchmark = h.key.benchmark;
      r.config = ConfigLabel(h.key.cell);
      r.arch = h.key.arch;
      r.board = h.key.board;
      r.kernel = h.key.kernel;
      r.job_id = h.job_ids[cp.index];
      r.previous_job_id = h.job_ids[cp.index - 1];  // index > 0 by the detector's contract
      r.mean_before = cp.mean_before;
      r.mean_after = cp.mean_after;
      r.relative_change = cp.relative_change;
      r.p_value = cp.p_value;
      found.push_back(std::move(r));
    }
  }
  if (found.empty()) return 0;
  return store->RecordChangePoints(found);
}

}  // namespace faultline::controller
