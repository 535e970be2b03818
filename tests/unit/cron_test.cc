#include "services/controller/core/cron.h"

#include <gtest/gtest.h>

namespace faultline::controller {
namespace {

using std::chrono::system_clock;

system_clock::time_point Utc(int y, int mo, int d, int h, int mi) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  return system_clock::from_time_t(timegm(&tm));
}

TEST(Cron, NightlyFiresAtTwoUtc) {
  auto c = CronSchedule::Parse("0 2 * * *");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->NextAfter(Utc(2026, 11, 29, 21, 42)), Utc(2026, 11, 30, 2, 0));
  EXPECT_EQ(c->NextAfter(Utc(2026, 11, 30, 2, 0)), Utc(2026, 12, 1, 2, 0));  // strictly after
  EXPECT_EQ(c->TypicalInterval(), std::chrono::hours(24));
}

TEST(Cron, StepsListsRangesAndMacros) {
  auto every15 = CronSchedule::Parse("*/15 * * * *");
  ASSERT_TRUE(every15.ok());
  EXPECT_EQ(every15->NextAfter(Utc(2026, 1, 1, 10, 7)), Utc(2026, 1, 1, 10, 15));
  EXPECT_EQ(every15->TypicalInterval(), std::chrono::minutes(15));
  auto weekdays = CronSchedule::Parse("30 1 * * 1-5");
  ASSERT_TRUE(weekdays.ok());
  // 2026-11-28 is a Saturday: the next weekday run is Monday the 30th.
  EXPECT_EQ(weekdays->NextAfter(Utc(2026, 11, 27, 2, 0)), Utc(2026, 11, 30, 1, 30));
  auto list = CronSchedule::Parse("0 0,12 1 1,7 *");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->NextAfter(Utc(2026, 1, 1, 0, 0)), Utc(2026, 1, 1, 12, 0));
  EXPECT_EQ(list->NextAfter(Utc(2026, 1, 1, 12, 0)), Utc(2026, 7, 1, 0, 0));
  auto daily = CronSchedule::Parse("@nightly");
  ASSERT_TRUE(daily.ok());
  EXPECT_EQ(daily->NextAfter(Utc(2026, 2, 28, 23, 59)), Utc(2026, 3, 1, 0, 0));
  auto sunday = CronSchedule::Parse("0 3 * * 7");
  ASSERT_TRUE(sunday.ok());
  EXPECT_EQ(sunday->NextAfter(Utc(2026, 11, 29, 4, 0)), Utc(2026, 12, 6, 3, 0));
}

TEST(Cron, RefusesBadExpressionsNamingTheField) {
  for (const char* bad : {"", "* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
                          "* * * * 8", "a * * * *", "*/0 * * * *", "5-1 * * * *"}) {
    auto c = CronSchedule::Parse(bad);
    EXPECT_FALSE(c.ok()) << bad;
    if (!c.ok()) {
      EXPECT_NE(std::string(c.status().message()).find("cron"), std::string::npos);
    }
  }
  EXPECT_NE(std::string(CronSchedule::Parse("* 24 * * *").status().message()).find("hour"),
            std::string::npos);
}

TEST(Cron, NeverMatchingDateDoesNotLoopForever) {
  auto feb30 = CronSchedule::Parse("0 0 30 2 *");
  ASSERT_TRUE(feb30.ok());
  EXPECT_EQ(feb30->NextAfter(Utc(2026, 1, 1, 0, 0)), system_clock::time_point::max());
}

}  // namespace
}  // namespace faultline::controller
