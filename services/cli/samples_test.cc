#include "services/cli/samples.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace faultline::cli {
namespace {

using ::testing::ElementsAre;

TEST(SamplesTest, NumbersCommentsAndBlankLines) {
  const auto samples = ParseSamples(
      "# baseline, seed 000\n37.85\n\n  39.22  # run 2\r\n1e3\n0\n17303.09 /s\n", "a.txt");
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_THAT(*samples, ElementsAre(37.85, 39.22, 1000, 0, 17303.09));
  EXPECT_THAT(*ParseSamples("5", "a.txt"), ElementsAre(5));  // no final newline
}

TEST(SamplesTest, ErrorsNameTheFileAndLine) {
  EXPECT_EQ(ParseSamples("1\n2\nabc\n", "a.txt").status().message(),
            "a.txt:3: 'abc' is not a number");
  EXPECT_EQ(ParseSamples("1 2\n", "b.txt").status().message(),
            "b.txt:1: '1 2' is not a number (one number per line)");
  EXPECT_EQ(ParseSamples("22,711\n", "b.txt").status().message(),
            "b.txt:1: '22,711' is not a number");
  EXPECT_EQ(ParseSamples("1\n-3\n", "b.txt").status().message(),
            "b.txt:2: '-3' is negative (throughput)");
  EXPECT_EQ(ParseSamples("nan\n", "b.txt").status().message(),
            "b.txt:1: 'nan' is not a finite number");
  EXPECT_EQ(ParseSamples("# nothing\n\n", "c.txt").status().message(), "c.txt: no samples");
  EXPECT_EQ(ParseSamples("", "c.txt").status().message(), "c.txt: no samples");
  EXPECT_EQ(ParseSamples(" /s\n", "c.txt").status().message(), "c.txt:1: '/s' is not a number");
}

TEST(SamplesTest, MissingFile) {
  const auto samples = LoadSamplesFile("/nonexistent/faultline/a.txt");
  EXPECT_EQ(samples.status().message(),
            "/nonexistent/faultline/a.txt: cannot read: No such file or directory");
}

}  // namespace
}  // namespace faultline::cli
