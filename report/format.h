#pragma once
// Formatting of the API's jobs, boards and states for the faultline CLI: names, progress
// bars, timestamps, listings.
// No I/O and no gRPC calls, so everything here is unit-testable without a server.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "faultline/v1/job.pb.h"
#include "faultline/v1/job_states.h"
#include "report/table.h"

namespace faultline::report {

// "[#####-----] 3/6 runs (1 running, 0 failed)"; finished = succeeded+failed+cancelled,
// running counts assigned runs too; ", N cancelled" is added when N > 0.
std::string FormatProgressBar(const v1::RunCounts& runs, int width = 20);
uint32_t FinishedRuns(const v1::RunCounts& runs);

// "job 42 succeeded (6/6 runs)", "job 42 failed (2 of 6 runs failed)", ...
std::string FormatJobOutcome(int64_t job_id, v1::JobState state, const v1::RunCounts& runs);

std::string JobStateName(v1::JobState state);                  // "succeeded"; "unspecified" for 0
std::string ChangePointStateName(v1::ChangePointState state);  // "acknowledged"
std::string BoardStateName(v1::BoardState state);              // "online"; "-" for 0
std::string BoardHealthName(v1::BoardHealth health);           // "needs-check"; "-" for 0
// "acknowledged" -> CHANGE_POINT_STATE_ACKNOWLEDGED; nullopt for anything else.
std::optional<v1::ChangePointState> ParseChangePointState(const std::string& name);
std::string FormatThroughput(double rounds_per_second);  // "17303.09 /s"
// "2024-05-01 12:34:56Z" (UTC); "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& ts);
// "just now", "42s ago", "5m ago", "3h ago", "2d ago"; "-" when unset.
std::string FormatAge(const google::protobuf::Timestamp& ts,
                      std::chrono::system_clock::time_point now);

// Indented JSON with proto field names and default values printed, ending in a newline.
std::string MessageToJson(const google::protobuf::Message& message);

// Listings.
Table JobsTable(const v1::ListJobsResponse& response);
Table AgentsTable(const v1::ListAgentsResponse& response,
                  std::chrono::system_clock::time_point now);

// Kernel builds: "45s", "1m 02s", "1h 05m"; "-" for 0 (not built yet).
std::string FormatBuildTime(double seconds);
// Image sizes: "812 B", "850 KiB", "12.3 MiB"; "-" for 0.
std::string FormatImageSize(uint64_t bytes);
Table BuildsTable(const v1::ListBuildsResponse& response);
// `faultline kernels`: the builds' table (RenderPlainTable), then one line per failed build,
// "build 7 (patched@3f9c2a1b04de, x86_64) failed: <the error's first line>".
std::string FormatBuilds(const v1::ListBuildsResponse& response);

}  // namespace faultline::report
