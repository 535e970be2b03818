#pragma once
// The frames that changed (issue #46, docs/profiles.md): a comparison's profile.total.* and
// profile.self.* counters, samples per round of the frame on the runs' call stacks, whose
// change is significant (q ≤ α after Benjamini–Hochberg over the comparison's counters),
// as a table of their own in every report format. Pure formatting, like comparison.h.
#include <string>
#include <string_view>
#include <vector>

#include "common/profile_names.h"
#include "faultline/v1/job.pb.h"
#include "report/format.h"
#include "report/table.h"

namespace faultline::report {

using faultline::IsFrameCounter;  // profile.total.<frame>, profile.self.<frame>

struct ChangedFrame {
  std::string frame;   // "lock_mm_and_find_vma", "[user]"
  std::string stacks;  // "total" (samples whose stack holds it) or "self" (at the leaf)
  const v1::CounterComparison* counter;
};
// The significant ones in the comparison's order (largest change first); `compared` gets
// how many frames were compared (total and self of one frame count once).
std::vector<ChangedFrame> ChangedFrames(const v1::Comparison& comparison, int* compared);

// | Frame | Stacks | A | B | Change | 95% CI |: A and B head the medians per round. Change
// is the ratio ("+192%") or, where some run did not keep the frame, the difference per
// round ("+0.41").
Table FrameTable(const std::vector<ChangedFrame>& frames, const std::string& a,
                 const std::string& b);
// "Frames that changed at writers=2 (call-stack samples per round, q ≤ 0.05; 2 changes
// among 76 frames):" (a frame's total and self are two changes).
// `where`: " at writers=2", ", board x" or "".
std::string FramesTitle(const std::vector<ChangedFrame>& frames, int compared,
                        const std::string& where, double alpha);

// The text/markdown section of one comparison: title and table; "" when nothing was
// profiled; the title alone ("... no significant change among 76 frames") when none changed.
std::string RenderFrames(const v1::Comparison& comparison, const std::string& where,
                         ReportFormat format, double alpha);

}  // namespace faultline::report
