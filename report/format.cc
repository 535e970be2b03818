#include "report/format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/strings.h"
#include "common/units.h"
#include "faultline/v1/values.h"
#include "google/protobuf/util/json_util.h"

namespace faultline::report {
namespace {

bool IsUnset(const google::protobuf::Timestamp& ts) {
  return ts.seconds() == 0 && ts.nanos() == 0;
}

}  // namespace

uint32_t FinishedRuns(const v1::RunCounts& runs) {
  return runs.succeeded() + runs.failed() + runs.cancelled();
}

std::string FormatProgressBar(const v1::RunCounts& runs, int width) {
  width = std::max(width, 1);
  const uint64_t finished = FinishedRuns(runs);
  const uint64_t total = runs.total();
  uint64_t filled =
      total == 0 ? 0 : std::min<uint64_t>(width, finished * static_cast<uint64_t>(width) / total);
  std::string out =
      "[" + std::string(filled, '#') + std::string(static_cast<size_t>(width) - filled, '-') + "] ";
  out += std::to_string(finished) + "/" + std::to_string(total) + " runs (" +
         std::to_string(runs.running() + runs.assigned()) + " running, " +
         std::to_string(runs.failed()) + " failed";
  if (runs.cancelled() > 0) out += ", " + std::to_string(runs.cancelled()) + " cancelled";
  return out + ")";
}

std::string FormatJobOutcome(int64_t job_id, v1::JobState state, const v1::RunCounts& runs) {
  std::string out = "job " + std::to_string(job_id) + " " + JobStateName(state);
  if (runs.failed() > 0) {
    out += " (" + std::to_string(runs.failed()) + " of " + std::to_string(runs.total()) +
           " runs failed)";
  } else {
    out += " (" + std::to_string(runs.succeeded()) + "/" + std::to_string(runs.total()) +
           " runs succeeded)";
  }
  return out;
}

namespace {

// "JOB_STATE_SUCCEEDED" -> "succeeded"; "state N" for values this CLI does not know.
std::string EnumName(std::string name, std::string_view prefix, int value) {
  if (name.empty()) return "state " + std::to_string(value);
  if (name.starts_with(prefix)) name.erase(0, prefix.size());
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  return EnumName(v1::JobState_Name(state), "JOB_STATE_", static_cast<int>(state));
}

std::string ChangePointStateName(v1::ChangePointState state) {
  return EnumName(v1::ChangePointState_Name(state), "CHANGE_POINT_STATE_", static_cast<int>(state));
}

std::string BoardStateName(v1::BoardState state) {
  if (state == v1::BOARD_STATE_UNSPECIFIED) return "-";
  return EnumName(v1::BoardState_Name(state), "BOARD_STATE_", static_cast<int>(state));
}

std::string BoardHealthName(v1::BoardHealth health) {
  if (health == v1::BOARD_HEALTH_UNSPECIFIED) return "-";
  std::string name =
      EnumName(v1::BoardHealth_Name(health), "BOARD_HEALTH_", static_cast<int>(health));
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::optional<v1::ChangePointState> ParseChangePointState(const std::string& name) {
  std::string upper = "CHANGE_POINT_STATE_" + name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  v1::ChangePointState state;
  if (name.empty() || !v1::ChangePointState_Parse(upper, &state) ||
      state == v1::CHANGE_POINT_STATE_UNSPECIFIED) {
    return std::nullopt;
  }
  return state;
}

std::string FormatThroughput(double rounds_per_second) {
  return Printf("%.2f /s", rounds_per_second);
}

std::string FormatTimestamp(const google::protobuf::Timestamp& ts) {
  if (IsUnset(ts)) return "-";
  const std::time_t seconds = static_cast<std::time_t>(ts.seconds());
  std::tm tm{};
  if (gmtime_r(&seconds, &tm) == nullptr) return "-";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string FormatAge(const google::protobuf::Timestamp& ts,
                      std::chrono::system_clock::time_point now) {
  if (IsUnset(ts)) return "-";
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const int64_t age = now_s - ts.seconds();
  if (age < 1) return "just now";
  if (age < 60) return std::to_string(age) + "s ago";
  if (age < 3600) return std::to_string(age / 60) + "m ago";
  if (age < 86400) return std::to_string(age / 3600) + "h ago";
  return std::to_string(age / 86400) + "d ago";
}

Table JobsTable(const v1::ListJobsResponse& response) {
  Table table;
  table.headers = {"ID", "STATE", "BENCHMARK", "NAME", "RUNS", "CREATED"};
  table.right_align = {true, false, false, false, true, false};
  for (const v1::Job& job : response.jobs()) {
    table.rows.push_back(
        {std::to_string(job.id()), JobStateName(job.state()), job.spec().benchmark(),
         job.spec().name().empty() ? "-" : job.spec().name(),
         std::to_string(FinishedRuns(job.runs())) + "/" + std::to_string(job.runs().total()),
         FormatTimestamp(job.created_at())});
  }
  return table;
}

Table AgentsTable(const v1::ListAgentsResponse& response,
                  std::chrono::system_clock::time_point now) {
  Table table;
  table.headers = {"NAME",   "ARCH",  "CPUS",      "MEMORY",   "PAGE",  "CGROUP",
                   "KERNEL", "STATE", "LAST SEEN", "SWITCHES", "HEALTH"};
  table.right_align = {false, false, true, true, true, false, false, false, false, true, false};
  for (const v1::Board& board : response.boards()) {
    std::string kernel =
        board.running_kernel_release().empty() ? "-" : board.running_kernel_release();
    if (!board.running_kernel_label().empty())
      kernel = board.running_kernel_label() + " (" + kernel + ")";
    std::string health = BoardHealthName(board.health());
    if (board.health() != v1::BOARD_HEALTH_OK && !board.health_reason().empty()) {
      health += ": " + board.health_reason();
    }
    std::string arch = board.arch().empty() ? "-" : board.arch();
    if (!board.virt_accel().empty() && board.virt_accel() != "none")
      arch += " (" + board.virt_accel() + ")";
    table.rows.push_back(
        {board.name(), arch, std::to_string(board.cpu_count()),
         board.memory_bytes() == 0 ? "-" : FormatSize(board.memory_bytes()),
         board.page_size() == 0 ? "-" : FormatSize(board.page_size()),
         board.cgroup_version() == 0 ? "-" : "v" + std::to_string(board.cgroup_version()), kernel,
         BoardStateName(board.state()), FormatAge(board.last_seen(), now),
         std::to_string(board.kernel_switches()), health});
  }
  return table;
}

std::string FormatBuildTime(double seconds) {
  if (!(seconds > 0)) return "-";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 60) return std::to_string(total) + "s";
  if (total < 3600)
    return Printf("%lldm %02llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  return Printf("%lldh %02lldm", static_cast<long long>(total / 3600),
                static_cast<long long>(total % 3600 / 60));
}

std::string FormatImageSize(uint64_t bytes) {
  if (bytes == 0) return "-";
  if (bytes < 1024) return std::to_string(bytes) + " B";
  if (bytes < (1u << 20)) return Printf("%.0f KiB", static_cast<double>(bytes) / 1024);
  return Printf("%.1f MiB", static_cast<double>(bytes) / (1u << 20));
}

namespace {

// The first 12 characters of a hash; "-" when unset.
std::string ShortHash(const std::string& hash) {
  return hash.empty() ? "-" : hash.substr(0, 12);
}

std::string OrDash(const std::string& text) {
  return text.empty() ? "-" : text;
}

}  // namespace

Table BuildsTable(const v1::ListBuildsResponse& response) {
  Table table;
  table.headers = {"ID",   "LABEL",  "ARCH",   "STATE",    "RELEASE", "KEY",
                   "BASE", "SERIES", "CONFIG", "COMPILER", "TIME",    "SIZE"};
  table.right_align = {true,  false, false, false, false, false,
                       false, true,  false, false, true,  true};
  for (const v1::Build& build : response.builds()) {
    table.rows.push_back({std::to_string(build.id()), OrDash(build.label()), OrDash(build.arch()),
                          OrDash(v1::BuildStateText(build)), OrDash(build.release()),
                          ShortHash(build.key()), ShortHash(build.base_commit()),
                          std::to_string(build.series_size()), ShortHash(build.config_sha256()),
                          OrDash(build.compiler()),
                          build.cached() ? "cached" : FormatBuildTime(build.build_seconds()),
                          FormatImageSize(build.image_bytes())});
  }
  return table;
}

std::string FormatBuilds(const v1::ListBuildsResponse& response) {
  std::string out = RenderPlainTable(BuildsTable(response));
  for (const v1::Build& build : response.builds()) {
    if (v1::BuildStateOf(build) != v1::BUILD_STATE_FAILED) continue;
    out += "build " + std::to_string(build.id()) + " (" + OrDash(build.label()) + ", " +
           OrDash(build.arch()) + ") failed";
    // The first line that says something (a log tail may start with blank lines).
    std::string_view error = build.error();
    while (!error.empty()) {
      const size_t end = error.find('\n');
      const std::string_view line = TrimSpace(error.substr(0, end));
      if (!line.empty()) {
        out += ": " + std::string(line);
        break;
      }
      if (end == std::string_view::npos) break;
      error.remove_prefix(end + 1);
    }
    out += "\n";
  }
  // Kernels that did not come back on a board, with the console's last lines if kept.
  for (const v1::Build& build : response.builds()) {
    for (const v1::BadBoot& bad : build.bad_boots()) {
      out += "build " + std::to_string(build.id()) + " (" + OrDash(build.label()) + ", " +
             OrDash(build.arch()) + ") did not boot on " + bad.board() + ": " + bad.reason() + "\n";
      std::vector<std::string_view> lines;
      std::string_view console = bad.console();
      while (!console.empty()) {
        const size_t end = console.find('\n');
        if (!TrimSpace(console.substr(0, end)).empty()) lines.push_back(console.substr(0, end));
        if (end == std::string_view::npos) break;
        console.remove_prefix(end + 1);
      }
      const size_t from = lines.size() > 10 ? lines.size() - 10 : 0;
      if (!lines.empty())
        out += "  its console (last " + std::to_string(lines.size() - from) + " lines):\n";
      for (size_t i = from; i < lines.size(); ++i) out += "    " + std::string(lines[i]) + "\n";
    }
  }
  return out;
}

std::string MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
#if GOOGLE_PROTOBUF_VERSION >= 5026000
  options.always_print_fields_with_no_presence = true;
#else
  options.always_print_primitive_fields = true;
#endif
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}\n";
  if (json.empty() || json.back() != '\n') json += "\n";
  return json;
}

}  // namespace faultline::report
