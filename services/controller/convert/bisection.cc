#include "services/controller/convert/bisection.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "faultline/v1/values.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace faultline::controller {
namespace {

// The engine's values and the API's types, one for one.
template <typename E, typename T>
using Pairs = std::pair<E, T>;
constexpr Pairs<bisect::Role, v1::BisectRole> kRoles[] = {
    {bisect::Role::kEndpoints, v1::BISECT_ROLE_ENDPOINTS},
    {bisect::Role::kStep, v1::BISECT_ROLE_STEP},
    {bisect::Role::kConfirm, v1::BISECT_ROLE_CONFIRM},
    {bisect::Role::kRevert, v1::BISECT_ROLE_REVERT},
};
constexpr Pairs<bisect::Mark, v1::BisectMark> kMarks[] = {
    {bisect::Mark::kUntested, v1::BISECT_MARK_UNTESTED},
    {bisect::Mark::kGood, v1::BISECT_MARK_GOOD},
    {bisect::Mark::kBad, v1::BISECT_MARK_BAD},
    {bisect::Mark::kUnknown, v1::BISECT_MARK_UNKNOWN},
    {bisect::Mark::kBroken, v1::BISECT_MARK_BROKEN},
};
constexpr Pairs<bisect::Phase, v1::BisectPhase> kPhases[] = {
    {bisect::Phase::kEndpoints, v1::BISECT_PHASE_ENDPOINTS},
    {bisect::Phase::kBisecting, v1::BISECT_PHASE_BISECTING},
    {bisect::Phase::kConfirming, v1::BISECT_PHASE_CONFIRMING},
    {bisect::Phase::kReverting, v1::BISECT_PHASE_REVERTING},
    {bisect::Phase::kDone, v1::BISECT_PHASE_DONE},
    {bisect::Phase::kFailed, v1::BISECT_PHASE_FAILED},
};
constexpr Pairs<BisectionState, v1::BisectionState> kStates[] = {
    {BisectionState::kRunning, v1::BISECTION_STATE_RUNNING},
    {BisectionState::kDone, v1::BISECTION_STATE_DONE},
    {BisectionState::kFailed, v1::BISECTION_STATE_FAILED},
    {BisectionState::kCancelled, v1::BISECTION_STATE_CANCELLED},
};

template <typename E, typename T, size_t N>
T ToApi(const Pairs<E, T> (&pairs)[N], E value) {
  for (const auto& [e, t] : pairs) {
    if (e == value) return t;
  }
  return T{};
}
// The stored document's types back to the engine's values (`otherwise` for a value it does
// not know, or none).
template <typename E, typename T, size_t N>
E FromApi(const Pairs<E, T> (&pairs)[N], T value, E otherwise) {
  for (const auto& [e, t] : pairs) {
    if (t == value) return e;
  }
  return otherwise;
}

bisect::Mark MarkFrom(v1::BisectMark m) {
  return FromApi(kMarks, m, bisect::Mark::kUntested);
}

bisect::State StateFromProto(const v1::Bisection& doc) {
  bisect::State s;
  s.commits = doc.request().commits_size();
  s.phase = FromApi(kPhases, v1::BisectPhaseOf(doc), bisect::Phase::kEndpoints);
  for (int i = 0; i < doc.marks_size(); ++i) s.marks.push_back(MarkFrom(v1::CommitMarkOf(doc, i)));
  s.marks.resize(s.commits, bisect::Mark::kUntested);
  for (const auto& p : doc.steps()) {
    bisect::Step step;
    step.role = FromApi(kRoles, v1::RoleOf(p), bisect::Role::kStep);
    step.candidate = p.candidate();
    step.reference = p.reference();
    step.with_bad = p.with_bad();
    for (const auto& x : p.pairs()) {
      bisect::Pair pair{.reference = x.reference(), .candidate = x.candidate()};
      if (x.has_bad()) pair.bad = x.bad();
      step.pairs.push_back(pair);
    }
    step.outcome = MarkFrom(v1::OutcomeOf(p));
    step.llr = p.llr();
    step.note = p.note();
    step.build_failed = v1::BuildFailedOf(p);
    step.jobs.assign(p.jobs().begin(), p.jobs().end());
    s.steps.push_back(std::move(step));
  }
  s.effect = doc.effect();
  s.effect_low = doc.effect_low();
  s.effect_high = doc.effect_high();
  s.result.culprit = doc.culprit();
  s.result.candidates.assign(doc.candidates().begin(), doc.candidates().end());
  s.result.confirmation = MarkFrom(v1::ConfirmationOf(doc));
  s.result.revert = MarkFrom(v1::RevertOf(doc));
  s.failure = doc.failure();
  return s;
}

void StateToProto(const bisect::State& s, v1::Bisection* doc) {
  v1::SetBisectPhase(doc, ToApi(kPhases, s.phase));
  doc->clear_marks();
  doc->clear_commit_marks();
  for (auto m : s.marks) v1::AddCommitMark(doc, ToApi(kMarks, m));
  doc->clear_steps();
  for (const auto& step : s.steps) {
    auto* p = doc->add_steps();
    v1::SetRole(p, ToApi(kRoles, step.role));
    p->set_candidate(step.candidate);
    p->set_reference(step.reference);
    p->set_with_bad(step.with_bad);
    for (const auto& pair : step.pairs) {
      auto* x = p->add_pairs();
      x->set_reference(pair.reference);
      x->set_candidate(pair.candidate);
      if (std::isfinite(pair.bad)) {
        x->set_bad(pair.bad);
        x->set_has_bad(true);
      }
    }
    v1::SetOutcome(p, ToApi(kMarks, step.outcome));
    p->set_llr(step.llr);
    p->set_note(step.note);
    if (step.outcome == bisect::Mark::kBroken) p->set_build_failed(step.build_failed);
    for (int64_t j : step.jobs) p->add_jobs(j);
  }
  doc->set_effect(s.effect);
  doc->set_effect_low(s.effect_low);
  doc->set_effect_high(s.effect_high);
  doc->set_culprit(s.result.culprit);
  doc->clear_candidates();
  for (int c : s.result.candidates) doc->add_candidates(c);
  v1::SetConfirmation(doc, ToApi(kMarks, s.result.confirmation));
  v1::SetRevert(doc, ToApi(kMarks, s.result.revert));
  doc->set_failure(s.failure);
}

}  // namespace

absl::StatusOr<std::string> BisectionToJson(const Bisection& bisection) {
  v1::Bisection doc;
  *doc.mutable_request() = bisection.request;
  StateToProto(bisection.engine, &doc);
  doc.set_runs(bisection.runs);
  doc.set_board_seconds(bisection.board_seconds);
  doc.set_wall_seconds(bisection.wall_seconds);
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (auto s = google::protobuf::util::MessageToJsonString(doc, &out, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("bisection document: ", s.ToString()));
  }
  return out;
}

absl::StatusOr<Bisection> BisectionFromRecord(const BisectionRecord& record) {
  v1::Bisection doc;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(record.doc_json, &doc, options).ok()) {
    return absl::InternalError(absl::StrCat("bisection ", record.id, ": unreadable document"));
  }
  Bisection b;
  b.id = record.id;
  b.state = record.state;
  b.current_job = record.current_job;
  b.created_ms = record.created_ms;
  b.updated_ms = record.updated_ms;
  b.engine = StateFromProto(doc);
  b.runs = doc.runs();
  b.board_seconds = doc.board_seconds();
  b.wall_seconds = doc.wall_seconds();
  b.request = std::move(*doc.mutable_request());
  return b;
}

v1::Bisection BisectionToProto(const Bisection& bisection) {
  v1::Bisection doc;
  doc.set_id(bisection.id);
  v1::SetBisectionState(&doc, ToApi(kStates, bisection.state));
  doc.set_current_job(bisection.current_job);
  *doc.mutable_created_at() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(bisection.created_ms);
  *doc.mutable_updated_at() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(bisection.updated_ms);
  *doc.mutable_request() = bisection.request;
  StateToProto(bisection.engine, &doc);
  doc.set_runs(bisection.runs);
  doc.set_board_seconds(bisection.board_seconds);
  doc.set_wall_seconds(bisection.wall_seconds);
  return doc;
}

bisect::Options OptionsOf(const v1::BisectRequest& request) {
  bisect::Options o;
  if (request.block() > 0) o.block = static_cast<int>(request.block());
  if (request.max_pairs() > 0) o.max_pairs = static_cast<int>(request.max_pairs());
  o.max_pairs = std::max(o.max_pairs, o.block);
  o.endpoint_max_pairs = o.max_pairs;  // --max-pairs bounds the endpoints too
  if (request.error() > 0) o.error = request.error();
  o.confirm = !request.no_confirm();
  o.revert = !request.no_revert();
  return o;
}

}  // namespace faultline::controller
