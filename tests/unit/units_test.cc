#include "common/units.h"

#include <gtest/gtest.h>

#include "common/perf_events.h"
#include "common/strings.h"

namespace faultline {
namespace {

using std::chrono::milliseconds;

TEST(Strings, OneLineJoinsLinesWithTheSeparatorAndDropsTrailingOnes) {
  EXPECT_EQ(OneLine("a\nb"), "a b");
  EXPECT_EQ(OneLine("spec.yaml:3:1: bad\r\nsee docs\n", "; "), "spec.yaml:3:1: bad; see docs");
  EXPECT_EQ(OneLine("a\rb\n\n", "; "), "a; b");
  EXPECT_EQ(OneLine("no break"), "no break");
  EXPECT_EQ(OneLine("\n \n"), "");
}

TEST(Strings, TrimSpaceAndJoin) {
  EXPECT_EQ(TrimSpace(" \t 16M \n"), "16M");
  EXPECT_EQ(TrimSpace(""), "");
  EXPECT_EQ(JoinStrings({"a", "b", "c"}, ", "), "a, b, c");
}

TEST(PerfEvents, AQuotedNameIsBounded) {
  EXPECT_EQ(QuotedEventName("page-faults"), "'page-faults'");
  const std::string quoted = QuotedEventName(std::string(1000, 'x'));
  EXPECT_EQ(quoted, "'" + std::string(64, 'x') + "...'");
}

TEST(ParseSize, AcceptsBinaryMultiples) {
  EXPECT_EQ(ParseSize("4096"), 4096u);
  EXPECT_EQ(ParseSize("64K"), 64u * 1024);
  EXPECT_EQ(ParseSize("16M"), 16u << 20);
  EXPECT_EQ(ParseSize("16MiB"), 16u << 20);
  EXPECT_EQ(ParseSize("1G"), 1ull << 30);
  EXPECT_EQ(ParseSize("1.2G"), static_cast<uint64_t>(1.2 * (1ull << 30)));
  EXPECT_EQ(ParseSize(" 2T "), 2ull << 40);
  EXPECT_EQ(ParseSize("0"), 0u);
}

TEST(ParseSize, RejectsJunkWithReason) {
  std::string why;
  EXPECT_FALSE(ParseSize("", &why));
  EXPECT_NE(why.find("not a size"), std::string::npos);
  EXPECT_FALSE(ParseSize("12X", &why));
  EXPECT_NE(why.find("unknown size unit"), std::string::npos);
  EXPECT_FALSE(ParseSize("-1M", &why));
  EXPECT_FALSE(ParseSize("M", &why));
  EXPECT_FALSE(ParseSize("1Mx", &why));
  EXPECT_FALSE(ParseSize("99999999T", &why));
}

TEST(ParseDuration, AcceptsUnitsAndCompounds) {
  EXPECT_EQ(ParseDuration("5s"), milliseconds(5000));
  EXPECT_EQ(ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(ParseDuration("2m"), milliseconds(120'000));
  EXPECT_EQ(ParseDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(ParseDuration("90"), milliseconds(90'000));
  EXPECT_EQ(ParseDuration("1.5s"), milliseconds(1500));
}

TEST(ParseDuration, RejectsJunk) {
  std::string why;
  EXPECT_FALSE(ParseDuration("", &why));
  EXPECT_FALSE(ParseDuration("5x", &why));
  EXPECT_NE(why.find("unknown duration unit"), std::string::npos);
  EXPECT_FALSE(ParseDuration("-5s", &why));
  EXPECT_FALSE(ParseDuration("s", &why));
}

TEST(Format, RoundTrips) {
  EXPECT_EQ(FormatSize(16u << 20), "16M");
  EXPECT_EQ(FormatSize(4096), "4K");
  EXPECT_EQ(FormatSize(100), "100");
  EXPECT_EQ(ParseSize(FormatSize(1288490188)).value() / (1 << 20), 1288490188u / (1 << 20));
  EXPECT_EQ(FormatDuration(milliseconds(5000)), "5s");
  EXPECT_EQ(FormatDuration(milliseconds(120'000)), "2m");
  EXPECT_EQ(FormatDuration(milliseconds(4 * 3'600'000)), "4h");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
}

TEST(ParseUnsigned, IsStrict) {
  EXPECT_EQ(ParseUnsigned("42"), 42u);
  EXPECT_FALSE(ParseUnsigned("+1"));
  EXPECT_FALSE(ParseUnsigned("1e3"));
  EXPECT_FALSE(ParseUnsigned("18446744073709551616"));
}

}  // namespace
}  // namespace faultline
