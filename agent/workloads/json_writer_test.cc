#include "agent/workloads/json_writer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/workloads/result.h"

namespace faultline::workloads {
namespace {

TEST(JsonQuote, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(JsonQuote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
}

TEST(JsonQuote, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(JsonQuote("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  EXPECT_EQ(JsonQuote("\xFF"), "\"\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonQuote("\xC3"), "\"\xEF\xBF\xBD\"");            // truncated
  EXPECT_EQ(JsonQuote("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // surrogate
}

TEST(JsonNumber, ShortestRoundTripAndNonFiniteAsZero) {
  EXPECT_EQ(JsonNumber(0.5), "0.5");
  EXPECT_EQ(JsonNumber(1234.0), "1234");
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(1.0 / 0.0), "0");
  EXPECT_EQ(std::stod(JsonNumber(37.85123456789)), 37.85123456789);
}

TEST(JsonWriter, NestsWithCommas) {
  JsonWriter json;
  json.BeginObject()
      .Key("a").Uint(1)
      .Key("b").BeginArray().Uint(1).Bool(true).BeginObject().EndObject().EndArray()
      .Key("c").BeginObject().Key("x").String("y").EndObject()
      .Key("d").Double(2.5)
      .EndObject();
  EXPECT_EQ(json.text(), R"({"a":1,"b":[1,true,{}],"c":{"x":"y"},"d":2.5})");
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
