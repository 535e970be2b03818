#pragma once
// For report/'s tests: the saved report of a real A/B study (testdata/ab-report.json) and
// golden files beside it, rewritten when FAULTLINE_UPDATE_GOLDEN is set.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>

#include "faultline/v1/job.pb.h"

namespace faultline::report::golden {

inline std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(FAULTLINE_REPORT_TESTDATA) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline v1::GetReportResponse Fixture(const std::string& name) {
  v1::GetReportResponse report;
  const std::string text = ReadTestdata(name);
  EXPECT_FALSE(text.empty()) << name;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &report).ok()) << name;
  return report;
}

// Compares with the golden file, or writes it when FAULTLINE_UPDATE_GOLDEN is set.
inline void ExpectGolden(const std::string& name, const std::string& got) {
  if (getenv("FAULTLINE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(std::string(FAULTLINE_REPORT_TESTDATA) + "/" + name) << got;
    return;
  }
  EXPECT_EQ(got, ReadTestdata(name))
      << "golden file " << name << " differs (FAULTLINE_UPDATE_GOLDEN=1 rewrites it)";
}

}  // namespace faultline::report::golden
