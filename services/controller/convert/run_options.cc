#include "services/controller/convert/run_options.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/perf_events.h"
#include "faultline/v1/run_options.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace faultline::controller {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", why));
}

// How the spec spelled an option: "run_options.NAME", or the older top-level "NAME".
std::string Spelled(bool given_in_run_options, const char* name) {
  return given_in_run_options ? absl::StrCat("run_options.", name) : std::string(name);
}

// An option given both ways must say the same thing both times.
absl::Status CheckBothWays(const v1::JobSpec& spec) {
  const v1::RunOptions& o = spec.run_options();
  if (!spec.events().empty() && !o.events().empty() &&
      !std::equal(spec.events().begin(), spec.events().end(), o.events().begin(),
                  o.events().end())) {
    return Invalid("events", "given both as events and as run_options.events, differently");
  }
  if (spec.has_profile() && o.has_profile() &&
      !google::protobuf::util::MessageDifferencer::Equals(spec.profile(), o.profile())) {
    return Invalid("profile", "given both as profile and as run_options.profile, differently");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::RunOptions> ValidateRunOptions(const v1::JobSpec& spec) {
  if (auto both = CheckBothWays(spec); !both.ok()) return both;
  v1::RunOptions options = v1::RunOptionsOf(spec);
  const v1::RunOptions& given = spec.run_options();

  // Perf events: the syntax and the known sw:/hw: names here; whether a tracepoint exists
  // only the board's kernel knows (the agent fails the run naming it).
  const std::vector<std::string> events(options.events().begin(), options.events().end());
  size_t bad = 0;
  std::string why;
  if (!CheckPerfEventList(events, &bad, &why)) {
    const std::string field = Spelled(!given.events().empty(), "events");
    return Invalid(bad < events.size() ? absl::StrCat(field, "[", bad, "]") : field, why);
  }
  if (options.has_profile()) {
    const uint32_t hz = options.profile().frequency_hz();
    if (hz > kMaxProfileHz) {
      return Invalid(
          absl::StrCat(Spelled(given.has_profile(), "profile"), ".frequency_hz"),
          absl::StrCat(hz, ": at most ", kMaxProfileHz, " samples per second per thread"));
    }
    if (hz == 0) options.mutable_profile()->set_frequency_hz(kDefaultProfileHz);
  }
  return options;
}

void SetRunOptions(const v1::RunOptions& options, v1::JobSpec* spec) {
  spec->clear_events();
  spec->clear_mmap_lock_waits();
  spec->clear_profile();
  if (options.ByteSizeLong() == 0) {
    spec->clear_run_options();
  } else {
    *spec->mutable_run_options() = options;
  }
}

absl::StatusOr<v1::RunOptions> RunOptionsFromJson(const std::string& json) {
  v1::RunOptions options;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;  // an option of a newer controller (a rollback)
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &options, parse);
  if (!parsed.ok()) {
    return absl::InternalError(
        absl::StrCat("run options are unreadable: ", std::string(parsed.message())));
  }
  return options;
}

}  // namespace faultline::controller
