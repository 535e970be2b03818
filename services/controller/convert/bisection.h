#pragma once
// Bisections between the API and the engine (bisect/): the stored document (the API's
// Bisection as JSON in BisectionRecord) and the engine's options and state. The single
// place, as convert.h is for the rest.
#include <string>

#include "absl/status/statusor.h"
#include "bisect/engine.h"
#include "faultline/v1/job.pb.h"
#include "services/controller/storage/records.h"

namespace faultline::controller {

// The document as stored (proto field names), and back with the record's columns.
absl::StatusOr<std::string> BisectionToJson(const v1::Bisection& doc);
absl::StatusOr<v1::Bisection> BisectionFromRecord(const BisectionRecord& record);

// The engine's options from a request (its defaults where the request says 0).
bisect::Options OptionsOf(const v1::BisectRequest& request);

// The engine's state <-> its part of the stored document.
bisect::State StateFromProto(const v1::Bisection& doc);
void StateToProto(const bisect::State& state, v1::Bisection* doc);

}  // namespace faultline::controller
