#pragma once
// Bisections between the API and the engine (bisect/): the stored document (the API's
// Bisection as JSON in BisectionRecord) and the engine's options and state. The single
// place, as convert.h is for the rest.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "bisect/engine.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/storage/records.h"

namespace faultline::controller {

// A bisection as orchestration drives it: the request as accepted (the API's message, as a
// job's spec is: its spec becomes each step job's), the engine's state, and what the steps
// have cost so far.
struct Bisection {
  int64_t id = 0;
  BisectionState state = BisectionState::kRunning;
  int64_t current_job = 0;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  v1::BisectRequest request;
  bisect::State engine;
  uint32_t runs = 0;         // benchmark runs done
  double board_seconds = 0;  // their measured time
  double wall_seconds = 0;   // from each step job's submission to its end
};

// The stored document (the API's Bisection as JSON, proto field names), and back with the
// record's columns.
absl::StatusOr<std::string> BisectionToJson(const Bisection& bisection);
absl::StatusOr<Bisection> BisectionFromRecord(const BisectionRecord& record);
// The API's message: the stored fields, without the display fields (orchestration's
// LoadBisection adds them).
v1::Bisection BisectionToProto(const Bisection& bisection);

// The engine's options from a request (its defaults where the request says 0).
bisect::Options OptionsOf(const v1::BisectRequest& request);

}  // namespace faultline::controller
