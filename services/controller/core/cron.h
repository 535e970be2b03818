#pragma once
// Cron expressions for recurring jobs ("0 2 * * *": nightly at 02:00 UTC). Five fields —
// minute hour day-of-month month day-of-week — with *, lists, ranges and steps; day-of-week
// 0 or 7 is Sunday; when both day fields are restricted either may match (as Vixie cron).
// Macros: @hourly, @daily (= @nightly, 00:00), @weekly. All times are UTC.
#include <bitset>
#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace faultline::controller {

class CronSchedule {
 public:
  static absl::StatusOr<CronSchedule> Parse(const std::string& expression);

  // The first matching minute strictly after `after` (seconds dropped). Searches up to
  // five years ahead; a schedule that never matches (Feb 30) returns time_point::max().
  std::chrono::system_clock::time_point NextAfter(
      std::chrono::system_clock::time_point after) const;

  // Rough period between two firings, for "results are overdue" checks.
  std::chrono::seconds TypicalInterval() const;

 private:
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;     // 1..31
  std::bitset<13> months_;   // 1..12
  std::bitset<7> weekdays_;  // 0..6, Sunday = 0
  bool days_restricted_ = false;
  bool weekdays_restricted_ = false;
};

}  // namespace faultline::controller
