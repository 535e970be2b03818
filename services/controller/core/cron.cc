#include "services/controller/core/cron.h"

#include <algorithm>
#include <ctime>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace faultline::controller {
namespace {

// Parses one field into `bits` over [lo, hi]; returns an error naming the field.
template <size_t N>
absl::Status ParseField(const std::string& text, const char* name, int lo, int hi,
                        std::bitset<N>* bits, bool* restricted) {
  *restricted = text != "*";
  for (const auto& part : absl::StrSplit(text, ',')) {
    std::string item(part);
    int step = 1;
    if (auto slash = item.find('/'); slash != std::string::npos) {
      if (!absl::SimpleAtoi(item.substr(slash + 1), &step) || step < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("cron ", name, ": bad step in '", item, "'"));
      }
      item = item.substr(0, slash);
    }
    int first = lo, last = hi;
    if (item != "*") {
      auto dash = item.find('-');
      if (dash == std::string::npos) {
        if (!absl::SimpleAtoi(item, &first)) {
          return absl::InvalidArgumentError(
              absl::StrCat("cron ", name, ": '", item, "' is not a number"));
        }
        last = step > 1 ? hi : first;
      } else if (!absl::SimpleAtoi(item.substr(0, dash), &first) ||
                 !absl::SimpleAtoi(item.substr(dash + 1), &last)) {
        return absl::InvalidArgumentError(absl::StrCat("cron ", name, ": bad range '", item, "'"));
      }
    }
    if (first < lo || last > hi || first > last) {
      return absl::InvalidArgumentError(absl::StrCat("cron ", name, ": values must be within ", lo,
                                                     "..", hi, ", got '", std::string(part), "'"));
    }
    for (int v = first; v <= last; v += step)
      bits->set(static_cast<size_t>(v % static_cast<int>(N)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CronSchedule> CronSchedule::Parse(const std::string& expression) {
  std::string expr = expression;
  if (expr == "@hourly")
    expr = "0 * * * *";
  else if (expr == "@daily" || expr == "@nightly" || expr == "@midnight")
    expr = "0 0 * * *";
  else if (expr == "@weekly")
    expr = "0 0 * * 0";
  std::vector<std::string> fields = absl::StrSplit(expr, ' ', absl::SkipEmpty());
  if (fields.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron: expected 5 fields (minute hour day-of-month month day-of-week), got '",
                     expression.substr(0, 64), "'"));
  }
  CronSchedule s;
  bool unused = false;
  if (auto st = ParseField(fields[0], "minute", 0, 59, &s.minutes_, &unused); !st.ok()) return st;
  if (auto st = ParseField(fields[1], "hour", 0, 23, &s.hours_, &unused); !st.ok()) return st;
  if (auto st = ParseField(fields[2], "day-of-month", 1, 31, &s.days_, &s.days_restricted_);
      !st.ok())
    return st;
  if (auto st = ParseField(fields[3], "month", 1, 12, &s.months_, &unused); !st.ok()) return st;
  std::bitset<8> weekdays;
  if (auto st = ParseField(fields[4], "day-of-week", 0, 7, &weekdays, &s.weekdays_restricted_);
      !st.ok())
    return st;
  for (int d = 0; d < 7; ++d) s.weekdays_[d] = weekdays[d] || (d == 0 && weekdays[7]);
  return s;
}

std::chrono::system_clock::time_point CronSchedule::NextAfter(
    std::chrono::system_clock::time_point after) const {
  using namespace std::chrono;
  system_clock::time_point t = floor<minutes>(after) + minutes(1);
  const system_clock::time_point limit = t + hours(24 * 366 * 5);
  while (t < limit) {
    std::time_t tt = system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    if (!months_[tm.tm_mon + 1]) {
      // Jump to the first minute of the next month.
      tm.tm_mon += 1;
      tm.tm_mday = 1;
      tm.tm_hour = 0;
      tm.tm_min = 0;
      tm.tm_sec = 0;
      t = system_clock::from_time_t(timegm(&tm));
      continue;
    }
    bool dom = days_[tm.tm_mday];
    bool dow = weekdays_[tm.tm_wday];
    bool day_ok = (days_restricted_ && weekdays_restricted_) ? (dom || dow) : (dom && dow);
    if (!day_ok) {
      tm.tm_mday += 1;
      tm.tm_hour = 0;
      tm.tm_min = 0;
      tm.tm_sec = 0;
      t = system_clock::from_time_t(timegm(&tm));
      continue;
    }
    if (!hours_[tm.tm_hour]) {
      t += minutes(60 - tm.tm_min);
      continue;
    }
    if (!minutes_[tm.tm_min]) {
      t += minutes(1);
      continue;
    }
    return t;
  }
  return system_clock::time_point::max();
}

std::chrono::seconds CronSchedule::TypicalInterval() const {
  using namespace std::chrono;
  // The median gap over the next few firings from a fixed reference point.
  auto t = system_clock::from_time_t(1'704'067'200);  // 2024-01-01T00:00:00Z
  std::vector<seconds> gaps;
  auto prev = NextAfter(t);
  for (int i = 0; i < 9 && prev != system_clock::time_point::max(); ++i) {
    auto next = NextAfter(prev);
    if (next == system_clock::time_point::max()) break;
    gaps.push_back(duration_cast<seconds>(next - prev));
    prev = next;
  }
  if (gaps.empty()) return hours(24 * 365);
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2];
}

}  // namespace faultline::controller
