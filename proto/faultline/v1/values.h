#pragma once
// The API's vocabularies as types, for every client of the API (report/, the CLI, spec/,
// bisect/, the robot): a comparison's verdict and a build's state are enums on the wire
// (Comparison.outcome, Build.build_state). Their text fields (verdict, state) are kept for a
// release, written beside the enums for older clients; read here from a controller that
// predates the enums. This is the one place that knows the words: scripts/check-house.sh
// refuses a comparison of those fields with a literal anywhere else.
#include <string>
#include <string_view>

#include "faultline/v1/job.pb.h"

namespace faultline::v1 {

inline std::string_view VerdictName(Verdict v) {
  switch (v) {
    case VERDICT_INCONCLUSIVE:
      return "inconclusive";
    case VERDICT_NO_CHANGE:
      return "no-change";
    case VERDICT_IMPROVEMENT:
      return "improvement";
    case VERDICT_REGRESSION:
      return "regression";
    case VERDICT_COLLAPSE:
      return "collapse";
    default:
      return "";
  }
}

// VERDICT_UNSPECIFIED for a word it does not know (or none).
inline Verdict ParseVerdict(std::string_view name) {
  for (Verdict v : {VERDICT_INCONCLUSIVE, VERDICT_NO_CHANGE, VERDICT_IMPROVEMENT,
                    VERDICT_REGRESSION, VERDICT_COLLAPSE}) {
    if (name == VerdictName(v)) return v;
  }
  return VERDICT_UNSPECIFIED;
}

// The comparison's verdict: its outcome, else its text (a controller before the enum).
inline Verdict VerdictOf(const Comparison& c) {
  return c.outcome() != VERDICT_UNSPECIFIED ? c.outcome() : ParseVerdict(c.verdict());
}

// What a reader is shown: the verdict's word ("" when there is none).
inline std::string VerdictText(const Comparison& c) {
  return std::string(VerdictName(VerdictOf(c)));
}

// Sets both fields: the enum and, for clients of a release before it, the text.
inline void SetVerdict(Comparison* c, Verdict v) {
  c->set_outcome(v);
  c->set_verdict(std::string(VerdictName(v)));
}

// The candidate is slower (a regression, or a collapse).
inline bool SaysSlower(Verdict v) {
  return v == VERDICT_REGRESSION || v == VERDICT_COLLAPSE;
}
// The kernels differ, either way.
inline bool SaysDifferent(Verdict v) {
  return v == VERDICT_IMPROVEMENT || SaysSlower(v);
}

inline std::string_view BuildStateName(BuildState s) {
  switch (s) {
    case BUILD_STATE_QUEUED:
      return "queued";
    case BUILD_STATE_BUILDING:
      return "building";
    case BUILD_STATE_DONE:
      return "done";
    case BUILD_STATE_FAILED:
      return "failed";
    default:
      return "";
  }
}

inline BuildState ParseBuildState(std::string_view name) {
  for (BuildState s :
       {BUILD_STATE_QUEUED, BUILD_STATE_BUILDING, BUILD_STATE_DONE, BUILD_STATE_FAILED}) {
    if (name == BuildStateName(s)) return s;
  }
  return BUILD_STATE_UNSPECIFIED;
}

// The build's state: build_state, else its text (a controller before the enum).
inline BuildState BuildStateOf(const Build& b) {
  return b.build_state() != BUILD_STATE_UNSPECIFIED ? b.build_state() : ParseBuildState(b.state());
}

inline std::string BuildStateText(const Build& b) {
  return std::string(BuildStateName(BuildStateOf(b)));
}

inline void SetBuildState(Build* b, BuildState s) {
  b->set_build_state(s);
  b->set_state(std::string(BuildStateName(s)));
}

}  // namespace faultline::v1
