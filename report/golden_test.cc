// Every format of `faultline report` over the saved report of a real A/B study, as golden
// files (testdata/ab-report.*; FAULTLINE_UPDATE_GOLDEN=1 rewrites them after a deliberate
// change): what a renderer prints changes only when its golden file does.
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "report/golden_files.h"
#include "report/report.h"
#include "report/table.h"

namespace faultline::report {
namespace {

using golden::ExpectGolden;
using golden::Fixture;

struct Golden {
  const char* format;  // as --format takes it
  const char* file;
};

class ReportGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(ReportGolden, RendersAsTheGoldenFile) {
  const v1::GetReportResponse report = Fixture("ab-report.json");
  ASSERT_FALSE(report.comparisons().empty());
  const auto format = ParseReportFormat(GetParam().format);
  ASSERT_TRUE(format.has_value()) << GetParam().format;
  const std::string text = RenderReport(report, *format);
  ASSERT_FALSE(text.empty());
  if (*format != ReportFormat::kJson) {
    ExpectGolden(GetParam().file, text);
    return;
  }
  // JSON: protobuf maps print in no fixed order, so the golden file is compared as the
  // message it holds.
  if (getenv("FAULTLINE_UPDATE_GOLDEN") != nullptr) {
    ExpectGolden(GetParam().file, text);  // writes it
    return;
  }
  v1::GetReportResponse got, want;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &got).ok());
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(golden::ReadTestdata(GetParam().file), &want)
          .ok())
      << GetParam().file;
  google::protobuf::util::DefaultFieldComparator numbers;
  numbers.set_treat_nan_as_equal(true);  // a counter only one kernel has: ratio NaN
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&numbers);
  std::string differences;
  differ.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differ.Compare(got, want))
      << "golden file " << GetParam().file << " differs (FAULTLINE_UPDATE_GOLDEN=1 rewrites it):\n"
      << differences;
}

// mail, mmtests and lkp: the same files as their renderers' own tests (mail_test.cc).
INSTANTIATE_TEST_SUITE_P(
    EveryFormat, ReportGolden,
    ::testing::Values(Golden{"table", "ab-report.txt"}, Golden{"markdown", "ab-report.md"},
                      Golden{"csv", "ab-report.csv"}, Golden{"json", "ab-report.out.json"},
                      Golden{"mail", "ab-report.mail"}, Golden{"mmtests", "ab-report.mmtests"},
                      Golden{"lkp", "ab-report.lkp"}, Golden{"html", "ab-report.html"}),
    [](const auto& info) { return std::string(info.param.format); });

}  // namespace
}  // namespace faultline::report
