// PgStore against a real PostgreSQL 15 (tests/integration/store_fixture.h): Jobs, schedules, the
// duty lease and the queue's notifications (pg_jobs.cc, pg_schedules.cc, pg_duty_lease.cc,
// pg_listener.cc).
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

// The duty lease: one holder at a time, renewed by its holder, taken over once lapsed (the
// database's clock), given up on release.
TEST_F(StoreTest, TheDutyLeaseHasOneHolderAndLapses) {
  auto& lease = store_->duty_lease();
  EXPECT_TRUE(*lease.HoldDutyLease("a", std::chrono::seconds(15)));
  EXPECT_FALSE(*lease.HoldDutyLease("b", std::chrono::seconds(15)));
  EXPECT_TRUE(*lease.HoldDutyLease("a", std::chrono::seconds(15)));  // renewed
  EXPECT_EQ(Text("SELECT holder FROM duty_leases"), "a");
  {  // a stops renewing: its lease lapses
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec("UPDATE duty_leases SET expires_at = now() - interval '1 second'");
    w.commit();
  }
  EXPECT_TRUE(*lease.HoldDutyLease("b", std::chrono::seconds(15)));
  EXPECT_FALSE(*lease.HoldDutyLease("a", std::chrono::seconds(15)));
  EXPECT_TRUE(lease.ReleaseDutyLease("a").ok());  // not a's: nothing happens
  EXPECT_FALSE(*lease.HoldDutyLease("a", std::chrono::seconds(15)));
  EXPECT_TRUE(lease.ReleaseDutyLease("b").ok());
  EXPECT_TRUE(*lease.HoldDutyLease("a", std::chrono::seconds(15)));
  EXPECT_EQ(Count("SELECT count(*) FROM duty_leases"), 1);
}

// Notifications on a channel, collected in the order they arrive.
class Collector final : public pqxx::notification_receiver {
 public:
  Collector(pqxx::connection& c, const std::string& channel, std::vector<std::string>* seen)
      : pqxx::notification_receiver(c, channel), seen_(seen) {}
  void operator()(const std::string& /*payload*/, int /*pid*/) override {
    seen_->push_back(channel());
  }

 private:
  std::vector<std::string>* seen_;
};

// Queued runs NOTIFY faultline_work (every controller LISTENs and serves its waiting
// boards at once); a claim does not. A marker notification sent afterwards bounds the wait:
// notifications arrive in commit order.
TEST_F(StoreTest, QueuedRunsNotifyEveryControllerAndClaimsDoNot) {
  pqxx::connection listener(url_);
  std::vector<std::string> seen;
  Collector work(listener, "faultline_work", &seen);
  Collector marker(listener, "test_marker", &seen);
  listener.get_notifs();
  auto until_marker = [&] {
    {
      pqxx::connection c(url_);
      pqxx::nontransaction n(c);
      n.exec("NOTIFY test_marker");
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::find(seen.begin(), seen.end(), "test_marker") == seen.end() &&
           std::chrono::steady_clock::now() < give_up) {
      listener.await_notification(1, 0);
    }
    std::vector<std::string> got;
    got.swap(seen);
    return got;
  };
  Submit(1);
  EXPECT_EQ(until_marker(), (std::vector<std::string>{"faultline_work", "test_marker"}));
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ(until_marker(), std::vector<std::string>{"test_marker"});
  // A run that goes back to the queue (its agent restarted) notifies again.
  ASSERT_TRUE(store_->boards().ReleaseBoardRuns("box").ok());
  EXPECT_EQ(until_marker(), (std::vector<std::string>{"faultline_work", "test_marker"}));
}

TEST_F(StoreTest, RequestIdMakesSubmissionIdempotent) {
  JobSpecInput spec;
  spec.benchmark = "filemap-thrash";
  spec.duration = "3s";
  spec.repetitions = 1;
  spec.kernels = {"vanilla"};
  spec.memory_max = "256M";
  auto boards = store_->boards().ListBoards();
  std::vector<BoardSummary> summaries;
  for (const auto& b : *boards) summaries.push_back(b.summary);
  auto job = ValidateJobSpec(spec, summaries);
  ASSERT_TRUE(job.ok());
  auto first = store_->jobs().CreateJob(*job, "a", R"({"x":1})", "req-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  auto again = store_->jobs().CreateJob(*job, "a", R"({"x":1})", "req-1");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job_id, first->job_id);
  auto other = store_->jobs().CreateJob(*job, "a", R"({"x":2})", "req-1");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM runs"), 1);
}

TEST_F(StoreTest, DueSchedulesFireOncePerSlot) {
  auto created = store_->schedules().CreateSchedule("nightly", "0 2 * * *",
                                                    R"({"benchmark":"filemap-thrash"})",
                                                    4102444800000);  // 2100-01-01: not due
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(store_->schedules().CreateSchedule("nightly", "@daily", "{}", 0).status().code(),
            absl::StatusCode::kAlreadyExists);
  int calls = 0;
  auto fire = [&](const ScheduleRecord& s) -> absl::StatusOr<int64_t> {
    ++calls;
    return absl::InvalidArgumentError("spec.kernels[0]: no eligible board has registered");
  };
  // The slot is 2100-01-01T00:00Z; the caller's clock decides what is due.
  constexpr int64_t kSlot = 4102444800000, kDay = 86'400'000;
  auto next_day = [](const ScheduleRecord& s) -> int64_t { return s.next_run_ms + kDay; };
  ASSERT_TRUE(store_->schedules().FireDueSchedules(kSlot - 60'000, fire, next_day).ok());
  EXPECT_EQ(calls, 0);
  auto fired = store_->schedules().FireDueSchedules(kSlot, fire, next_day);
  ASSERT_TRUE(fired.ok());
  EXPECT_EQ(*fired, 0);  // the slot failed: recorded, not retried in a loop
  EXPECT_EQ(calls, 1);
  auto listed = store_->schedules().ListSchedules();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_NE((*listed)[0].last_error.find("no eligible board"), std::string::npos);
  EXPECT_EQ((*listed)[0].next_run_ms, kSlot + kDay);
  EXPECT_EQ((*listed)[0].last_run_ms, kSlot);
  ASSERT_TRUE(store_->schedules().FireDueSchedules(kSlot + kDay - 1, fire, next_day).ok());
  EXPECT_EQ(calls, 1);  // not due again until the next slot
  EXPECT_TRUE(store_->schedules().DeleteSchedule((*listed)[0].id).ok());
  EXPECT_EQ(store_->schedules().DeleteSchedule((*listed)[0].id).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, AScheduleSlotSubmitsAndTagsItsJob) {
  auto sched = store_->schedules().CreateSchedule("every-minute", "* * * * *", "{}", 0);  // due now
  ASSERT_TRUE(sched.ok()) << sched.status();
  int64_t job_id = 0;
  // The fire callback stores the job on another connection while the schedule row is
  // locked: the job's foreign key to the schedule must not wait on that lock.
  auto fire = [&](const ScheduleRecord& s) -> absl::StatusOr<int64_t> {
    job_id = Submit(1);
    if (auto t = store_->schedules().TagJobWithSchedule(job_id, s.id); !t.ok()) return t;
    return job_id;
  };
  auto fired = store_->schedules().FireDueSchedules(
      1'000, fire, [](const ScheduleRecord&) -> int64_t { return 4102444800000; });
  ASSERT_TRUE(fired.ok()) << fired.status();
  EXPECT_EQ(*fired, 1);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE schedule_id IS NOT NULL"), 1);
  EXPECT_EQ(store_->schedules().ListSchedules()->at(0).last_job_id, job_id);
}

}  // namespace
}  // namespace faultline::controller
