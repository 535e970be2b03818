#pragma once
// The API's vocabularies as types, for every client of the API (report/, the CLI, spec/,
// bisect/, the robot): a comparison's verdict, a build's state and a bisection's state,
// phase, marks and step roles are enums on the wire. Their text fields (verdict, state,
// phase, marks, ...) are kept for a release, written beside the enums for older clients;
// read here from a controller (or a stored document) that predates the enums. This is the
// one place that knows the words: scripts/check-house.sh refuses a comparison of those
// fields with a literal anywhere else.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "faultline/v1/job.pb.h"

namespace faultline::v1 {
namespace values_internal {

// Each value of an enum with its word; the unspecified value has none.
template <typename E>
using Words = std::pair<E, std::string_view>;

template <typename E, size_t N>
constexpr std::string_view WordOf(const Words<E> (&words)[N], E value) {
  for (const auto& [v, word] : words) {
    if (v == value) return word;
  }
  return "";
}

// The value whose word is `word`; `none` (the unspecified value) for an unknown word.
template <typename E, size_t N>
constexpr E ValueOf(const Words<E> (&words)[N], std::string_view word, E none) {
  for (const auto& [v, w] : words) {
    if (w == word) return v;
  }
  return none;
}

inline constexpr Words<Verdict> kVerdicts[] = {
    {VERDICT_INCONCLUSIVE, "inconclusive"}, {VERDICT_NO_CHANGE, "no-change"},
    {VERDICT_IMPROVEMENT, "improvement"},   {VERDICT_REGRESSION, "regression"},
    {VERDICT_COLLAPSE, "collapse"},
};
inline constexpr Words<BuildState> kBuildStates[] = {
    {BUILD_STATE_QUEUED, "queued"},
    {BUILD_STATE_BUILDING, "building"},
    {BUILD_STATE_DONE, "done"},
    {BUILD_STATE_FAILED, "failed"},
};
inline constexpr Words<BisectionState> kBisectionStates[] = {
    {BISECTION_STATE_RUNNING, "running"},
    {BISECTION_STATE_DONE, "done"},
    {BISECTION_STATE_FAILED, "failed"},
    {BISECTION_STATE_CANCELLED, "cancelled"},
};
inline constexpr Words<BisectPhase> kBisectPhases[] = {
    {BISECT_PHASE_ENDPOINTS, "endpoints"},
    {BISECT_PHASE_BISECTING, "bisecting"},
    {BISECT_PHASE_CONFIRMING, "confirming"},
    {BISECT_PHASE_REVERTING, "reverting"},
    {BISECT_PHASE_DONE, "done"},
    {BISECT_PHASE_FAILED, "failed"},
};
inline constexpr Words<BisectMark> kBisectMarks[] = {
    {BISECT_MARK_UNTESTED, "untested"}, {BISECT_MARK_GOOD, "good"},     {BISECT_MARK_BAD, "bad"},
    {BISECT_MARK_UNKNOWN, "unknown"},   {BISECT_MARK_BROKEN, "broken"},
};
inline constexpr Words<BisectRole> kBisectRoles[] = {
    {BISECT_ROLE_ENDPOINTS, "endpoints"},
    {BISECT_ROLE_STEP, "step"},
    {BISECT_ROLE_CONFIRM, "confirm"},
    {BISECT_ROLE_REVERT, "revert"},
};

// The typed field when it is set, else the word of an older writer read back.
template <typename E, size_t N>
E TypedOr(E typed, const Words<E> (&words)[N], std::string_view word) {
  return typed != E{} ? typed : ValueOf(words, word, E{});
}

}  // namespace values_internal

// Each vocabulary's words ("" for the unspecified value) and back (the unspecified value
// for a word it does not know, or none).
inline std::string_view VerdictName(Verdict v) {
  return values_internal::WordOf(values_internal::kVerdicts, v);
}
inline Verdict ParseVerdict(std::string_view w) {
  return values_internal::ValueOf(values_internal::kVerdicts, w, VERDICT_UNSPECIFIED);
}
inline std::string_view BuildStateName(BuildState s) {
  return values_internal::WordOf(values_internal::kBuildStates, s);
}
inline BuildState ParseBuildState(std::string_view w) {
  return values_internal::ValueOf(values_internal::kBuildStates, w, BUILD_STATE_UNSPECIFIED);
}
inline std::string_view BisectionStateName(BisectionState s) {
  return values_internal::WordOf(values_internal::kBisectionStates, s);
}
inline BisectionState ParseBisectionState(std::string_view w) {
  return values_internal::ValueOf(values_internal::kBisectionStates, w,
                                  BISECTION_STATE_UNSPECIFIED);
}
inline std::string_view BisectPhaseName(BisectPhase p) {
  return values_internal::WordOf(values_internal::kBisectPhases, p);
}
inline BisectPhase ParseBisectPhase(std::string_view w) {
  return values_internal::ValueOf(values_internal::kBisectPhases, w, BISECT_PHASE_UNSPECIFIED);
}
inline std::string_view BisectMarkName(BisectMark m) {
  return values_internal::WordOf(values_internal::kBisectMarks, m);
}
inline BisectMark ParseBisectMark(std::string_view w) {
  return values_internal::ValueOf(values_internal::kBisectMarks, w, BISECT_MARK_UNSPECIFIED);
}
inline std::string_view BisectRoleName(BisectRole r) {
  return values_internal::WordOf(values_internal::kBisectRoles, r);
}
inline BisectRole ParseBisectRole(std::string_view w) {
  return values_internal::ValueOf(values_internal::kBisectRoles, w, BISECT_ROLE_UNSPECIFIED);
}

// ---- Comparison ----

// The comparison's verdict: its outcome, else its text (a controller before the enum).
inline Verdict VerdictOf(const Comparison& c) {
  return values_internal::TypedOr(c.outcome(), values_internal::kVerdicts, c.verdict());
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

// ---- Build ----

// The build's state: build_state, else its text (a controller before the enum).
inline BuildState BuildStateOf(const Build& b) {
  return values_internal::TypedOr(b.build_state(), values_internal::kBuildStates, b.state());
}

inline std::string BuildStateText(const Build& b) {
  return std::string(BuildStateName(BuildStateOf(b)));
}

inline void SetBuildState(Build* b, BuildState s) {
  b->set_build_state(s);
  b->set_state(std::string(BuildStateName(s)));
}

// ---- Bisection ----

inline BisectionState BisectionStateOf(const Bisection& b) {
  return values_internal::TypedOr(b.bisection_state(), values_internal::kBisectionStates,
                                  b.state());
}
inline BisectPhase BisectPhaseOf(const Bisection& b) {
  return values_internal::TypedOr(b.bisect_phase(), values_internal::kBisectPhases, b.phase());
}
// Commit i's mark (i < marks_size()): commit_marks when the writer sent them, else marks.
inline BisectMark CommitMarkOf(const Bisection& b, int i) {
  const BisectMark typed =
      b.commit_marks_size() == b.marks_size() ? b.commit_marks(i) : BISECT_MARK_UNSPECIFIED;
  return values_internal::TypedOr(typed, values_internal::kBisectMarks, b.marks(i));
}
// The culprit against its parent: BAD when confirmed.
inline BisectMark ConfirmationOf(const Bisection& b) {
  return values_internal::TypedOr(b.confirmed(), values_internal::kBisectMarks, b.confirmation());
}
// The bad end with the culprit reverted: GOOD when the revert restores good.
inline BisectMark RevertOf(const Bisection& b) {
  return values_internal::TypedOr(b.reverted(), values_internal::kBisectMarks, b.revert());
}
inline BisectRole RoleOf(const BisectStep& s) {
  return values_internal::TypedOr(s.step_role(), values_internal::kBisectRoles, s.role());
}
inline BisectMark OutcomeOf(const BisectStep& s) {
  return values_internal::TypedOr(s.step_outcome(), values_internal::kBisectMarks, s.outcome());
}
// A broken step whose kernel did not build (not one whose runs failed). A step stored
// before the field says so in its note's first line, as the controller wrote it then:
// "kernel LABEL: build N (ARCH) failed: ...".
inline bool BuildFailedOf(const BisectStep& s) {
  if (s.has_build_failed()) return s.build_failed();
  if (OutcomeOf(s) != BISECT_MARK_BROKEN) return false;
  const std::string_view head = std::string_view(s.note()).substr(0, s.note().find('\n'));
  return head.find(": build ") != std::string_view::npos &&
         head.find(") failed: ") != std::string_view::npos;
}

// Setters of both fields (the type, and the word for clients of a release before it).
inline void SetBisectionState(Bisection* b, BisectionState s) {
  b->set_bisection_state(s);
  b->set_state(std::string(BisectionStateName(s)));
}
inline void SetBisectPhase(Bisection* b, BisectPhase p) {
  b->set_bisect_phase(p);
  b->set_phase(std::string(BisectPhaseName(p)));
}
inline void AddCommitMark(Bisection* b, BisectMark m) {
  b->add_commit_marks(m);
  b->add_marks(std::string(BisectMarkName(m)));
}
inline void SetConfirmation(Bisection* b, BisectMark m) {
  b->set_confirmed(m);
  b->set_confirmation(std::string(BisectMarkName(m)));
}
inline void SetRevert(Bisection* b, BisectMark m) {
  b->set_reverted(m);
  b->set_revert(std::string(BisectMarkName(m)));
}
inline void SetRole(BisectStep* s, BisectRole r) {
  s->set_step_role(r);
  s->set_role(std::string(BisectRoleName(r)));
}
inline void SetOutcome(BisectStep* s, BisectMark m) {
  s->set_step_outcome(m);
  s->set_outcome(std::string(BisectMarkName(m)));
}

// The change point a bisection was started from (0: none): the field, else the origin a
// controller before it wrote ("change point 7").
inline int64_t ChangePointOf(const BisectRequest& r) {
  if (r.change_point() != 0) return r.change_point();
  constexpr std::string_view kWords = "change point ";
  const std::string& o = r.origin();
  if (o.size() <= kWords.size() || o.compare(0, kWords.size(), kWords) != 0) return 0;
  int64_t id = 0;
  for (size_t i = kWords.size(); i < o.size(); ++i) {
    if (o[i] < '0' || o[i] > '9' || id > (INT64_MAX - 9) / 10) return 0;
    id = id * 10 + (o[i] - '0');
  }
  return id;
}
inline void SetChangePoint(BisectRequest* r, int64_t id) {
  r->set_change_point(id);
  r->set_origin("change point " + std::to_string(id));
}

}  // namespace faultline::v1
