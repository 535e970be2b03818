// The background duties over the in-memory stores, with time driven by a FakeClock: cron
// slots, lease reaping and the change-point cadence in milliseconds.
#include "services/controller/orchestration/duties.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "google/protobuf/util/json_util.h"
#include "services/controller/convert/convert.h"
#include "services/controller/core/report.h"
#include "services/controller/orchestration/periodic_duty.h"
#include "services/controller/orchestration/submission.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::sys_days;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// 2024-03-01 00:00:00 UTC.
const std::chrono::system_clock::time_point kDay{
    sys_days{std::chrono::year{2024} / std::chrono::March / 1}};

int64_t Ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

v1::JobSpec NightlySpec(const std::string& kernel = "vanilla") {
  v1::JobSpec spec;
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("5s");
  spec.set_repetitions(2);
  spec.add_kernels(kernel);
  spec.mutable_memcg()->set_memory_max("256M");
  return spec;
}

class DutiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.boards.AddBoard(BoardSummary{.name = "b1",
                                       .arch = "x86_64",
                                       .memory_bytes = 8ull << 30,
                                       .kernel_labels = {"vanilla"},
                                       .running_kernel_label = "vanilla",
                                       .running_kernel_labels = {"vanilla"}});
  }
  // A schedule created at the clock's time, as CreateSchedule does.
  ScheduleRecord AddSchedule(const std::string& name, const std::string& cron,
                             const v1::JobSpec& spec) {
    auto s = fake_.schedules.CreateSchedule(name, cron, SpecToJson(spec),
                                            NextSlotMs(cron, clock_.Now()));
    EXPECT_TRUE(s.ok()) << s.status();
    return *s;
  }

  FakeClock clock_{kDay + hours(1)};
  FakeStores fake_{&clock_};
  BackgroundDuties duties_{fake_.stores(), &clock_};
};

TEST_F(DutiesTest, NightlyScheduleFiresOnceAtItsSlotAndMovesToTheNextDay) {
  const ScheduleRecord nightly = AddSchedule("nightly", "0 2 * * *", NightlySpec());
  EXPECT_EQ(nightly.next_run_ms, Ms(kDay + hours(2)));

  clock_.Set(kDay + hours(1) + minutes(59));
  DutyOutcome out = duties_.RunOnce();
  EXPECT_FALSE(out.work_available);
  EXPECT_EQ(fake_.jobs.create_calls(), 0);
  clock_.Set(kDay + hours(2) - milliseconds(1));
  duties_.RunOnce();
  EXPECT_EQ(fake_.jobs.create_calls(), 0);

  clock_.Set(kDay + hours(2));
  out = duties_.RunOnce();
  EXPECT_TRUE(out.work_available);
  auto jobs = fake_.jobs.ListJobs(10);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const JobRecord& job = jobs->front();
  EXPECT_EQ(job.name, "nightly");  // a spec without a name takes the schedule's
  EXPECT_EQ(job.counts.total, 2u);
  // The slot is the request id: a replica or a retry of this slot finds the same job.
  EXPECT_EQ(fake_.jobs.request_id(job.id),
            "schedule-" + std::to_string(nightly.id) + "-" + std::to_string(Ms(kDay + hours(2))));
  EXPECT_THAT(fake_.schedules.tags(),
              ElementsAre(std::pair<const int64_t, int64_t>(job.id, nightly.id)));
  auto after = fake_.schedules.Find(nightly.id);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->next_run_ms, Ms(kDay + hours(24 + 2)));
  EXPECT_EQ(after->last_run_ms, Ms(kDay + hours(2)));
  EXPECT_EQ(after->last_job_id, job.id);
  EXPECT_EQ(after->last_error, "");

  // Later the same night: nothing more.
  clock_.Set(kDay + hours(2) + minutes(30));
  out = duties_.RunOnce();
  EXPECT_FALSE(out.work_available);
  clock_.Set(kDay + hours(24 + 2) - milliseconds(1));
  duties_.RunOnce();
  EXPECT_EQ(fake_.jobs.create_calls(), 1);

  // The next night's slot is a new job.
  clock_.Set(kDay + hours(24 + 2));
  out = duties_.RunOnce();
  EXPECT_TRUE(out.work_available);
  EXPECT_EQ(fake_.jobs.create_calls(), 2);
  EXPECT_EQ(fake_.schedules.Find(nightly.id)->next_run_ms, Ms(kDay + hours(48 + 2)));
}

// A schedule whose kernel follows a branch: every slot is a build of its own (the branch as
// it is then), under a label of its own whose series is the same every night. A kernel at a
// commit id is one build for every night.
TEST_F(DutiesTest, AScheduleOnABranchBuildsEverySlotUnderItsOwnLabel) {
  BoardSummary builder{.name = "b2", .arch = "x86_64", .memory_bytes = 8ull << 30};
  builder.boots_built_kernels = true;
  builder.build_arches = {"x86_64"};
  fake_.boards.AddBoard(builder);
  auto on = [](const std::string& ref) {
    v1::JobSpec spec = NightlySpec("nightly");
    spec.add_boards("b2");
    auto& source = (*spec.mutable_kernel_sources())["nightly"];
    source.set_tree("/srv/linux.git");
    source.set_ref(ref);
    return spec;
  };
  AddSchedule("branch", "0 2 * * *", on("main"));
  AddSchedule("pinned", "0 2 * * *", on(std::string(40, 'a')));
  std::map<std::string, std::vector<std::string>> kernels;  // by schedule
  for (int night = 0; night < 2; ++night) {
    clock_.Set(kDay + hours(24 * night + 2));
    duties_.RunOnce();
  }
  auto jobs = fake_.jobs.ListJobs(10);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 4u);
  for (const JobRecord& job : *jobs) {
    v1::JobSpec spec;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(job.spec_json, &spec).ok());
    ASSERT_EQ(spec.kernels_size(), 1);
    kernels[job.name].push_back(spec.kernels(0));
  }
  ASSERT_EQ(kernels["branch"].size(), 2u);
  std::sort(kernels["branch"].begin(), kernels["branch"].end());
  const std::string first = kernels["branch"][0], second = kernels["branch"][1];
  EXPECT_THAT(first, ::testing::MatchesRegex("nightly@[0-9a-f]{12}\\+20240301T0200"));
  EXPECT_THAT(second, ::testing::MatchesRegex("nightly@[0-9a-f]{12}\\+20240302T0200"));
  EXPECT_EQ(SeriesKernel(first), first.substr(0, first.find('+')));
  EXPECT_EQ(SeriesKernel(first), SeriesKernel(second));
  ASSERT_EQ(kernels["pinned"].size(), 2u);
  EXPECT_EQ(kernels["pinned"][0], kernels["pinned"][1]);
  EXPECT_THAT(kernels["pinned"][0], ::testing::MatchesRegex("nightly@[0-9a-f]{12}"));
}

TEST_F(DutiesTest, MissedSlotsFireOnceWhenTheControllerComesBack) {
  const ScheduleRecord nightly = AddSchedule("nightly", "0 2 * * *", NightlySpec());
  clock_.Set(kDay + hours(24 * 3 + 5));  // down for three nights
  duties_.RunOnce();
  EXPECT_EQ(fake_.jobs.create_calls(), 1);
  EXPECT_EQ(fake_.schedules.Find(nightly.id)->next_run_ms, Ms(kDay + hours(24 * 4 + 2)));
  duties_.RunOnce();
  EXPECT_EQ(fake_.jobs.create_calls(), 1);
}

TEST_F(DutiesTest, FailingSlotRecordsItsErrorAndWaitsForTheNextSlot) {
  // No board runs "patched": the slot cannot be submitted.
  const ScheduleRecord broken = AddSchedule("broken", "0 2 * * *", NightlySpec("patched"));
  clock_.Set(kDay + hours(2));
  DutyOutcome out = duties_.RunOnce();
  EXPECT_FALSE(out.work_available);
  EXPECT_EQ(fake_.schedules.fire_calls(), 1);
  auto after = fake_.schedules.Find(broken.id);
  ASSERT_TRUE(after.has_value());
  EXPECT_THAT(after->last_error, HasSubstr("spec.kernels[0]"));
  EXPECT_EQ(after->last_job_id, 0);
  EXPECT_EQ(after->last_run_ms, Ms(kDay + hours(2)));
  EXPECT_EQ(after->next_run_ms, Ms(kDay + hours(24 + 2)));
  EXPECT_THAT(fake_.schedules.tags(), IsEmpty());

  clock_.Set(kDay + hours(3));
  duties_.RunOnce();
  EXPECT_EQ(fake_.schedules.fire_calls(), 1);  // not retried within the night

  clock_.Set(kDay + hours(24 + 2));
  duties_.RunOnce();
  EXPECT_EQ(fake_.schedules.fire_calls(), 2);
  EXPECT_EQ(fake_.jobs.create_calls(), 0);
}

TEST_F(DutiesTest, ReapedLeasesReportTheirJobsAndWork) {
  fake_.work.SetReaped({7, 9});
  DutyOutcome out = duties_.RunOnce();
  EXPECT_THAT(out.changed_jobs, ElementsAre(7, 9));
  EXPECT_TRUE(out.work_available);
  out = duties_.RunOnce();
  EXPECT_THAT(out.changed_jobs, IsEmpty());
  EXPECT_FALSE(out.work_available);
  EXPECT_EQ(fake_.work.reap_calls(), 2);
}

TEST_F(DutiesTest, AFailingDutyDoesNotStopTheOthers) {
  AddSchedule("nightly", "0 2 * * *", NightlySpec());
  fake_.work.SetUnavailable(true);  // reaping and switch expiry fail
  clock_.Set(kDay + hours(2));
  DutyOutcome out = duties_.RunOnce();
  EXPECT_THAT(out.changed_jobs, IsEmpty());
  EXPECT_TRUE(out.work_available);  // the schedule still fired
  EXPECT_EQ(fake_.jobs.create_calls(), 1);
  EXPECT_EQ(fake_.history.series_calls(), 1);
}

TEST_F(DutiesTest, ChangePointsAreScannedEveryThirtiethPass) {
  std::vector<int> scanned_on;
  for (int pass = 1; pass <= 95; ++pass) {
    const int before = fake_.history.series_calls();
    duties_.RunOnce();
    if (fake_.history.series_calls() != before) scanned_on.push_back(pass);
  }
  // The first pass (one tick after start) scans, then every 30th.
  EXPECT_THAT(scanned_on, ElementsAre(1, 31, 61, 91));
}

// Two controllers on one database: only the lease holder runs the duties; when it stops
// renewing, the other takes over once the lease lapses; a released lease is taken at once.
TEST_F(DutiesTest, OnlyTheLeaseHolderRunsTheDutiesAndAnotherTakesOverWhenItDies) {
  fakes::FakeDutyLeaseStore lease(&clock_);
  Stores stores = fake_.stores();
  stores.duty_lease = &lease;
  BackgroundDuties a(stores, &clock_, {}, "controller-a");
  BackgroundDuties b(stores, &clock_, {}, "controller-b");
  AddSchedule("hourly", "0 * * * *", NightlySpec());

  clock_.Set(kDay + hours(2) - std::chrono::seconds(1));
  a.RunOnce();
  EXPECT_TRUE(a.holding());
  clock_.Set(kDay + hours(2));  // the slot is due
  EXPECT_FALSE(b.RunOnce().work_available);
  EXPECT_FALSE(b.holding());
  EXPECT_EQ(fake_.jobs.create_calls(), 0);  // the standby ran nothing
  EXPECT_TRUE(a.RunOnce().work_available);
  EXPECT_EQ(fake_.jobs.create_calls(), 1);

  // a dies (no more passes). Until its lease lapses b stands by, then b takes over.
  clock_.Set(kDay + hours(2) + BackgroundDuties::kLeaseTtl);
  b.RunOnce();
  EXPECT_FALSE(b.holding());
  clock_.Set(kDay + hours(3) + std::chrono::seconds(1));  // past the lease and the next slot
  EXPECT_TRUE(b.RunOnce().work_available);
  EXPECT_TRUE(b.holding());
  EXPECT_EQ(fake_.jobs.create_calls(), 2);
  // a comes back and stands by; b stops cleanly and a takes over on its next pass.
  a.RunOnce();
  EXPECT_FALSE(a.holding());
  b.Release();
  EXPECT_FALSE(b.holding());
  a.RunOnce();
  EXPECT_TRUE(a.holding());
  EXPECT_NE(BackgroundDuties::DefaultHolder(), BackgroundDuties::DefaultHolder());
}

// The robot on its own thread (#57): a pass that hangs on a slow server (SMTP, patchwork)
// does not hold up the duties — a schedule fires and leases are reaped while it waits — and
// a stopping controller waits for the pass in flight.
TEST_F(DutiesTest, ASlowRobotPassDoesNotHoldUpTheDuties) {
  clock_.Set(kDay + hours(2) - std::chrono::seconds(1));
  BackgroundDuties duties(fake_.stores(), &clock_);
  AddSchedule("hourly", "0 * * * *", NightlySpec());
  std::promise<void> in_pass, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> passes{0};
  PeriodicDuty robot(
      [&] {
        if (passes++ == 0) {
          in_pass.set_value();
          released.wait();  // the server answers when the test says so
        }
        return false;
      },
      std::chrono::seconds(3600), [&] { return duties.runs_duties(); });
  robot.Start();
  in_pass.get_future().wait();
  clock_.Set(kDay + hours(2));
  EXPECT_TRUE(duties.RunOnce().work_available) << "the schedule fired during the pass";
  EXPECT_EQ(fake_.jobs.create_calls(), 1);
  release.set_value();
  robot.Stop();
  EXPECT_EQ(passes.load(), 1);
}

// While another controller runs the duties, the robot makes no pass.
TEST_F(DutiesTest, TheRobotWaitsWhileAnotherControllerRunsTheDuties) {
  std::atomic<int> asked{0}, passes{0};
  std::promise<void> asked_twice;
  PeriodicDuty robot([&] { return ++passes < 0; }, std::chrono::seconds(3600),
                     [&] {
                       if (++asked == 2) asked_twice.set_value();
                       return false;
                     });
  robot.Start();
  asked_twice.get_future().wait();  // looked at the lease twice (kStandbyPoll apart)
  robot.Stop();
  EXPECT_EQ(passes.load(), 0);
}

}  // namespace
}  // namespace faultline::controller
