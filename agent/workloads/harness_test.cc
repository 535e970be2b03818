#include "agent/workloads/harness.h"

#include <gtest/gtest.h>

#include <deque>

namespace faultline::workloads {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Scripted clock: every sleep "oversleeps" by `lateness`, and records the deadline asked.
class FakeClock : public MonotonicClock {
 public:
  nanoseconds Now() override { return now_; }
  bool SleepUntil(nanoseconds deadline) override {
    deadlines.push_back(deadline);
    if (interrupt_after >= 0 && static_cast<int>(deadlines.size()) > interrupt_after) return false;
    if (deadline + lateness > now_) now_ = deadline + lateness;
    return true;
  }
  nanoseconds now_ = seconds(1000);
  nanoseconds lateness{0};
  int interrupt_after = -1;
  std::vector<nanoseconds> deadlines;
};

TEST(SamplesFromCumulative, DifferencesOfReadings) {
  auto samples = SamplesFromCumulative({100, 1000}, {{130, 4000}, {130, 4100}, {175, 9000}});
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].second, 1u);
  EXPECT_EQ(samples[0].rounds, 30u);
  EXPECT_EQ(samples[0].pages, 3000u);
  EXPECT_EQ(samples[1].rounds, 0u);
  EXPECT_EQ(samples[1].pages, 100u);  // no round completed, but progress was made
  EXPECT_EQ(samples[2].second, 3u);
  EXPECT_EQ(samples[2].rounds, 45u);
  EXPECT_EQ(samples[2].pages, 4900u);
}

TEST(SampleRounds, OneSamplePerSecondAndThroughputOverMeasuredSeconds) {
  FakeClock clock;
  // baseline, then seconds 1..3
  std::deque<Progress> readings = {{500, 8000}, {600, 9600}, {750, 12000}, {760, 12160}};
  SamplingHooks hooks;
  hooks.read_progress = [&] {
    Progress v = readings.front();
    readings.pop_front();
    return v;
  };
  std::vector<std::pair<uint32_t, uint64_t>> progress;
  hooks.second_done = [&](uint32_t s, uint64_t r) { progress.emplace_back(s, r); };
  auto outcome = SampleRounds(clock, {milliseconds(0), 3}, hooks);
  EXPECT_EQ(outcome.end, SamplingOutcome::End::kCompleted);
  ASSERT_EQ(outcome.samples.size(), 3u);
  EXPECT_EQ(outcome.samples[0].rounds, 100u);
  EXPECT_EQ(outcome.samples[1].rounds, 150u);
  EXPECT_EQ(outcome.samples[2].rounds, 10u);
  EXPECT_EQ(outcome.rounds, 260u);
  EXPECT_DOUBLE_EQ(outcome.throughput_rounds_per_second, 260.0 / 3);
  EXPECT_EQ(outcome.pages, 4160u);
  EXPECT_DOUBLE_EQ(outcome.pages_per_second, 4160.0 / 3);
  EXPECT_FALSE(outcome.too_coarse);
  EXPECT_EQ(progress.back(), (std::pair<uint32_t, uint64_t>{3, 260}));
}

TEST(SampleRounds, FewCompletedRoundsAreTooCoarseButPagesStillMeasure) {
  FakeClock clock;
  // A slow pass: no round completes in second 1, four in all over 2 s.
  std::deque<Progress> readings = {{0, 0}, {0, 12000}, {kMinRoundsToCompare - 1, 30000}};
  SamplingHooks hooks;
  hooks.read_progress = [&] {
    Progress v = readings.front();
    readings.pop_front();
    return v;
  };
  auto outcome = SampleRounds(clock, {milliseconds(0), 2}, hooks);
  EXPECT_EQ(outcome.end, SamplingOutcome::End::kCompleted);
  EXPECT_TRUE(outcome.too_coarse);
  EXPECT_EQ(outcome.samples[0].rounds, 0u);
  EXPECT_EQ(outcome.samples[0].pages, 12000u);
  EXPECT_DOUBLE_EQ(outcome.pages_per_second, 15000.0);
}

TEST(SampleRounds, DeadlinesAreAbsoluteSoLateWakeupsDoNotDrift) {
  FakeClock clock;
  clock.lateness = milliseconds(300);
  const nanoseconds start = clock.now_;
  SamplingHooks hooks;
  hooks.read_progress = [] { return Progress{}; };
  SampleRounds(clock, {milliseconds(2500), 2}, hooks);
  // Warm-up in 1 s steps capped at start+2.5 s, then start+2.5+1 and +2, whatever the lateness.
  std::vector<nanoseconds> expected = {start + seconds(1), start + seconds(2),
                                       start + milliseconds(2500), start + milliseconds(3500),
                                       start + milliseconds(4500)};
  EXPECT_EQ(clock.deadlines, expected);
}

TEST(SampleRounds, InterruptionEndsWithoutThroughput) {
  FakeClock clock;
  clock.interrupt_after = 1;  // second sleep is interrupted
  uint64_t total = 0;
  SamplingHooks hooks;
  hooks.read_progress = [&] { return Progress{total += 10, total * 16}; };
  bool ended = false;
  hooks.measurement_ended = [&] { ended = true; };
  auto outcome = SampleRounds(clock, {milliseconds(0), 5}, hooks);
  EXPECT_EQ(outcome.end, SamplingOutcome::End::kInterrupted);
  EXPECT_EQ(outcome.samples.size(), 1u);
  EXPECT_EQ(outcome.throughput_rounds_per_second, 0);
  EXPECT_TRUE(ended);
}

TEST(SampleRounds, AbortStopsAfterTheSecondItIsSeen) {
  FakeClock clock;
  int checks = 0;
  SamplingHooks hooks;
  hooks.read_progress = [] { return Progress{1, 1}; };
  hooks.should_abort = [&] { return ++checks >= 2; };
  auto outcome = SampleRounds(clock, {milliseconds(0), 10}, hooks);
  EXPECT_EQ(outcome.end, SamplingOutcome::End::kAborted);
  EXPECT_EQ(outcome.samples.size(), 2u);
}

TEST(RunHarness, RunsEveryGroupAndReportsHelperCounters) {
  FakeClock clock;
  std::atomic<uint32_t> started{0};
  auto body = [&](uint32_t, RoundCounter& counter, const std::atomic<bool>& stop, std::string*) {
    started.fetch_add(1);
    while (!stop.load()) {
      counter.AddPages(4);
      counter.Increment();
    }
    return true;
  };
  std::vector<ThreadGroup> groups = {
      {"", 3, body}, {"helper_rounds", 2, body, "helper_pages"}, {"other_rounds", 1, body}};
  HarnessResult result = RunHarness(groups, {milliseconds(0), 2}, clock, {});
  EXPECT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.threads_started, 6u);
  EXPECT_EQ(started.load(), 6u);  // joined, so every body ran before returning
  EXPECT_EQ(result.sampling.samples.size(), 2u);
  EXPECT_EQ(result.helper_rounds.count("helper_rounds"), 1u);
  EXPECT_EQ(result.helper_rounds.count("other_rounds"), 1u);
  // Pages only for the helper that names a pages counter.
  ASSERT_EQ(result.helper_pages.size(), 1u);
  EXPECT_EQ(result.helper_pages.begin()->first, "helper_pages");
  EXPECT_LE(result.min_thread_rounds, result.max_thread_rounds);
}

TEST(RunHarness, WorkerFailureFailsTheRunWithItsMessage) {
  FakeClock clock;
  std::vector<ThreadGroup> groups = {
      {"", 2, [](uint32_t index, RoundCounter&, const std::atomic<bool>& stop, std::string* error) {
         if (index == 1) {
           *error = "mmap: Cannot allocate memory";
           return false;
         }
         while (!stop.load()) {
         }
         return true;
       }}};
  HarnessResult result = RunHarness(groups, {milliseconds(0), 3}, clock, {});
  EXPECT_FALSE(result.ok);
  EXPECT_FALSE(result.interrupted);
  EXPECT_EQ(result.error, "mmap: Cannot allocate memory");
}

TEST(RoundCounter, SitsOnItsOwnCacheLines) {
  static_assert(alignof(RoundCounter) == kCounterAlignment);
  static_assert(sizeof(RoundCounter) == kCounterAlignment);
  std::vector<RoundCounter> counters(3);
  auto a = reinterpret_cast<uintptr_t>(&counters[0]);
  auto b = reinterpret_cast<uintptr_t>(&counters[1]);
  EXPECT_EQ(a % kCounterAlignment, 0u);
  EXPECT_EQ(b - a, kCounterAlignment);
}

}  // namespace
}  // namespace faultline::workloads
