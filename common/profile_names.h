#pragma once
// How a profiled run's frames are named as counters, for the agent that writes them
// (agent/workloads/profile_sampling.h), the controller that compares them
// (services/controller/core/counters.h) and the reports that table them (report/frames.h).
#include <string_view>

namespace faultline {

inline constexpr std::string_view kProfileTotalPrefix = "profile.total.";  // + frame
inline constexpr std::string_view kProfileSelfPrefix = "profile.self.";    // + frame

// profile.total.<frame> or profile.self.<frame> (a frame named): one frame's samples.
inline bool IsFrameCounter(std::string_view name) {
  return (name.starts_with(kProfileTotalPrefix) && name.size() > kProfileTotalPrefix.size()) ||
         (name.starts_with(kProfileSelfPrefix) && name.size() > kProfileSelfPrefix.size());
}

}  // namespace faultline
