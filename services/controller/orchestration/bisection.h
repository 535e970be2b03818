#pragma once
// Bisections (faultline bisect, docs/bisect.md): the request checked and stored, and the
// driver that the background duties run on every pass. The engine (bisect/engine.h)
// decides; each of its requests becomes a job on the bisection's one board: the reference,
// the candidate (and the bad end, for a step's triples) built from the tree at their
// commits and interleaved as any A/B job. The whole state is the stored document, so a
// controller restart or a failover resumes where the last pass left it.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bisect/engine.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/convert/bisection.h"  // Bisection, OptionsOf
#include "services/controller/core/clock.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

inline constexpr int kMaxBisectCommits = 4097;  // 4,096 commits after the good one: 12 steps

// Checks the request (each error names the field and the limit), pins its board, checks
// that its first job would be accepted, and stores it (idempotent per request id).
absl::StatusOr<v1::Bisection> StartBisection(const Stores& stores, v1::BisectRequest request,
                                             const std::string& request_id);

// A stored bisection with its display fields (ratios and CIs per step, range, estimates).
absl::StatusOr<v1::Bisection> LoadBisection(const Stores& stores, int64_t id);

// Cancels it and the job measuring for it.
absl::StatusOr<v1::Bisection> CancelBisection(const Stores& stores, int64_t id);

// One pass: every running bisection whose job finished takes its measurements, decides and
// submits its next job (or finishes). Returns how many jobs it submitted.
absl::StatusOr<int> AdvanceBisections(const Stores& stores);

// A run's value of the request's metric: its throughput, or counter NAME per round.
double MetricValue(const std::string& metric, double throughput, uint64_t rounds,
                   const std::string& counters_json);

}  // namespace faultline::controller
