#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "agent/workloads/result.h"

namespace faultline::workloads {
namespace {

// The hand-written JSON writer this replaced turned invalid UTF-8 into U+FFFD per maximal
// invalid subsequence; nlohmann's replace handler does the same (checked case by case).
std::string EnvironmentValueAsWritten(const std::string& value) {
  WorkloadResultData data;
  data.environment = {{"k", value}};
  const std::string text = FormatWorkloadResultJson(data);
  const size_t at = text.find("\"k\":");
  const size_t end = text.find('}', at);
  return text.substr(at + 4, end - at - 4);
}

TEST(FormatWorkloadResultJson, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(EnvironmentValueAsWritten("plain"), "\"plain\"");
  EXPECT_EQ(EnvironmentValueAsWritten("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(EnvironmentValueAsWritten("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(EnvironmentValueAsWritten(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(EnvironmentValueAsWritten(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
}

TEST(FormatWorkloadResultJson, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(EnvironmentValueAsWritten("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  EXPECT_EQ(EnvironmentValueAsWritten("\xFF"), "\"\xEF\xBF\xBD\"");
  EXPECT_EQ(EnvironmentValueAsWritten("\xC3"), "\"\xEF\xBF\xBD\"");                  // truncated
  EXPECT_EQ(EnvironmentValueAsWritten("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong
  EXPECT_EQ(EnvironmentValueAsWritten("\xED\xA0\x80"),
            "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
}

TEST(FormatWorkloadResultJson, NonFiniteNumbersAreZero) {
  WorkloadResultData data;
  data.counters = {{"inf", 1.0 / 0.0}, {"nan", std::nan("")}, {"half", 0.5}};
  auto parsed = nlohmann::json::parse(FormatWorkloadResultJson(data));
  EXPECT_EQ(parsed["counters"]["inf"], 0);
  EXPECT_EQ(parsed["counters"]["nan"], 0);
  EXPECT_EQ(parsed["counters"]["half"], 0.5);
}

TEST(FormatWorkloadResultJson, ParsesBackWithProtoFieldNames) {
  WorkloadResultData data;
  data.benchmark = "filemap-thrash";
  data.throughput_rounds_per_second = 37.5;
  data.rounds = 75;
  data.duration_seconds = 2;
  data.samples = {{1, 40}, {2, 35}};
  data.params = {{"threads", "2"}, {"file_size", "4M"}};
  data.counters = {{"pgfault", 12345}};
  data.environment = {{"odd \"key\"", "line\nbreak \xFF"}};
  auto parsed = nlohmann::json::parse(FormatWorkloadResultJson(data));
  EXPECT_EQ(parsed["benchmark"], "filemap-thrash");
  EXPECT_EQ(parsed["throughput_rounds_per_second"], 37.5);
  EXPECT_EQ(parsed["rounds"], 75);
  EXPECT_EQ(parsed["warmup_seconds"], 0);
  ASSERT_EQ(parsed["samples"].size(), 2u);
  EXPECT_EQ(parsed["samples"][1]["second"], 2);
  EXPECT_EQ(parsed["samples"][1]["rounds"], 35);
  EXPECT_EQ(parsed["params"]["file_size"], "4M");
  EXPECT_EQ(parsed["counters"]["pgfault"], 12345);
  EXPECT_EQ(parsed["environment"]["odd \"key\""], "line\nbreak \xEF\xBF\xBD");
}

}  // namespace
}  // namespace faultline::workloads
