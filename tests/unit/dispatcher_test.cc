// The dispatcher driven by Step on the test's thread, through fake parked calls and watchers
// over the in-memory stores: no gRPC, no database, no waiting.
#include "services/controller/orchestration/dispatcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "services/controller/orchestration/duties.h"
#include "tests/support/fake_stores.h"
#include "tests/support/gate.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing_support::Gate;

const std::chrono::system_clock::time_point kStart{seconds(1'700'000'000)};

class FakeCall final : public ParkedCall {
 public:
  FakeCall(std::string board, std::chrono::system_clock::time_point deadline)
      : board_(std::move(board)), deadline_(deadline) {}
  const std::string& board() const override { return board_; }
  std::chrono::system_clock::time_point deadline() const override { return deadline_; }
  // Answers come from the dispatcher's answerer thread: `answered` lets a test wait for one.
  void Answer(const WorkOrder& order) override {
    EXPECT_FALSE(ended()) << "a call was ended twice";
    answer = order;
    answered.Open();
  }
  void Fail(const grpc::Status& status) override {
    EXPECT_FALSE(ended()) << "a call was ended twice";
    failure = status;
  }
  bool ended() const { return answer.has_value() || failure.has_value(); }

  Gate answered;

  std::optional<WorkOrder> answer;
  std::optional<grpc::Status> failure;

 private:
  std::string board_;
  std::chrono::system_clock::time_point deadline_;
};

class FakeWatcher final : public ProgressWatcher {
 public:
  explicit FakeWatcher(int64_t job_id) : job_id_(job_id) {}
  int64_t job_id() const override { return job_id_; }
  void Push(const v1::JobProgress& progress) override { pushed.push_back(progress); }
  void FinishWith(const grpc::Status& status) override { finished = status; }

  std::vector<v1::JobProgress> pushed;
  std::optional<grpc::Status> finished;

 private:
  int64_t job_id_;
};

// A job of `runs` runs of one kernel, straight into the job store.
int64_t AddJob(FakeStores& fake, int runs) {
  ValidatedJob job;
  job.benchmark = "filemap-thrash";
  job.kernels = {"vanilla"};
  job.baseline = "vanilla";
  for (int i = 0; i < runs; ++i) {
    PlannedRun run;
    run.kernel = "vanilla";
    run.repetition = i + 1;
    run.sequence = i;
    job.runs.push_back(run);
  }
  auto created = fake.jobs.CreateJob(job, "test", "{}", "");
  EXPECT_TRUE(created.ok()) << created.status();
  return created->job_id;
}

WorkOrder RunOrder(int64_t run_id, int64_t job_id) {
  Assignment a;
  a.run_id = run_id;
  a.attempt_id = "attempt-" + std::to_string(run_id);
  a.job_id = job_id;
  a.benchmark = "filemap-thrash";
  a.kernel = "vanilla";
  a.duration_seconds = 5;
  a.lease_seconds = 125;
  return WorkOrder{a, std::nullopt};
}

WorkOrder SwitchOrder(const std::string& label) {
  return WorkOrder{std::nullopt,
                   KernelSwitchOrder{label, "run 1 (job 1) needs kernel " + label, 900}};
}

class DispatcherTest : public ::testing::Test {
 protected:
  FakeClock clock_{kStart};
  FakeStores fake_{&clock_};
  Dispatcher dispatcher_{&fake_.work, &fake_.jobs, &clock_};
};

TEST_F(DispatcherTest, ParkedCallIsAnsweredWithTheAssignmentAndWatchersSeeTheJob) {
  const int64_t job = AddJob(fake_, 2);
  FakeWatcher watcher(job);
  dispatcher_.AddWatcher(&watcher);
  dispatcher_.Step(false);
  ASSERT_EQ(watcher.pushed.size(), 1u);  // a new watcher gets the job's progress at once
  EXPECT_EQ(watcher.pushed[0].state(), v1::JOB_STATE_QUEUED);

  FakeCall call("b1", kStart + seconds(30));
  dispatcher_.Park(&call);
  EXPECT_EQ(dispatcher_.parked(), 1u);
  dispatcher_.Step(false);  // nothing queued for b1: the call waits
  EXPECT_FALSE(call.ended());
  EXPECT_EQ(fake_.work.next_work_calls(), 1);

  fake_.work.Queue("b1", RunOrder(1, job));
  dispatcher_.WorkAvailable();
  dispatcher_.Step(false);
  ASSERT_TRUE(call.answer.has_value());
  ASSERT_TRUE(call.answer->run.has_value());
  EXPECT_EQ(call.answer->run->run_id, 1);
  EXPECT_EQ(call.answer->run->attempt_id, "attempt-1");
  EXPECT_FALSE(call.answer->kernel_switch.has_value());
  EXPECT_EQ(dispatcher_.parked(), 0u);

  // The assignment marked the job changed: the next pass refreshes its watchers.
  fake_.jobs.SetRunStates(job, RunState::kRunning);
  dispatcher_.Step(false);
  ASSERT_EQ(watcher.pushed.size(), 2u);
  EXPECT_EQ(watcher.pushed[1].state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(watcher.pushed[1].runs().running(), 2u);

  // So does JobChanged from elsewhere (a result, a cancel).
  fake_.jobs.SetRunStates(job, RunState::kSucceeded);
  dispatcher_.JobChanged(job);
  dispatcher_.Step(false);
  ASSERT_EQ(watcher.pushed.size(), 3u);
  EXPECT_EQ(watcher.pushed[2].state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(watcher.pushed[2].runs().succeeded(), 2u);
  dispatcher_.RemoveWatcher(&watcher);
}

TEST_F(DispatcherTest, KernelSwitchOrderIsDelivered) {
  fake_.work.Queue("b1", SwitchOrder("patched"));
  FakeCall call("b1", kStart + seconds(30));
  dispatcher_.Park(&call);
  dispatcher_.Step(false);
  ASSERT_TRUE(call.answer.has_value());
  ASSERT_TRUE(call.answer->kernel_switch.has_value());
  EXPECT_EQ(call.answer->kernel_switch->label, "patched");
  EXPECT_EQ(call.answer->kernel_switch->deadline_seconds, 900u);
  EXPECT_FALSE(call.answer->run.has_value());
  EXPECT_THAT(fake_.work.abandoned(), IsEmpty());
}

// The orders of a pass come in groups (one transaction each): a group's calls are answered
// while the store is still claiming the next group, and the pass ends with every answer sent.
TEST_F(DispatcherTest, AGroupIsAnsweredWhileTheNextIsClaimed) {
  const int64_t job = AddJob(fake_, 3);
  fake_.work.DeliverEachBoardAlone(true);
  FakeCall b1("b1", kStart + seconds(30)), b2("b2", kStart + seconds(30)),
      b3("b3", kStart + seconds(30));
  fake_.work.Queue("b1", RunOrder(1, job));
  fake_.work.Queue("b2", RunOrder(2, job));
  fake_.work.Queue("b3", SwitchOrder("patched"));
  dispatcher_.Park(&b1);
  dispatcher_.Park(&b2);
  dispatcher_.Park(&b3);
  bool b1_answered_during_b2 = false, b2_answered_during_b3 = false;
  fake_.work.OnNextWork([&](const std::string& board) {
    // Bounded waits: they only keep a broken dispatcher from hanging the test.
    if (board == "b2") b1_answered_during_b2 = b1.answered.WaitFor(std::chrono::seconds(30));
    if (board == "b3") b2_answered_during_b3 = b2.answered.WaitFor(std::chrono::seconds(30));
  });
  dispatcher_.Step(false);
  EXPECT_TRUE(b1_answered_during_b2);
  EXPECT_TRUE(b2_answered_during_b3);
  ASSERT_TRUE(b3.answer.has_value()) << "Step returned before the last group was answered";
  ASSERT_TRUE(b3.answer->kernel_switch.has_value());
  ASSERT_TRUE(b1.answer.has_value() && b1.answer->run.has_value());
  EXPECT_EQ(b1.answer->run->run_id, 1);
  ASSERT_TRUE(b2.answer.has_value() && b2.answer->run.has_value());
  EXPECT_EQ(b2.answer->run->run_id, 2);
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

// A call that goes away after the first group was answered loses only its own order.
TEST_F(DispatcherTest, ACallCancelledBetweenGroupsLosesOnlyItsOrder) {
  const int64_t job = AddJob(fake_, 2);
  fake_.work.DeliverEachBoardAlone(true);
  FakeCall b1("b1", kStart + seconds(30)), b2("b2", kStart + seconds(30));
  fake_.work.Queue("b1", RunOrder(1, job));
  fake_.work.Queue("b2", SwitchOrder("patched"));
  dispatcher_.Park(&b1);
  dispatcher_.Park(&b2);
  fake_.work.OnNextWork([&](const std::string& board) {
    if (board == "b2") dispatcher_.Unpark(&b2);
  });
  dispatcher_.Step(false);
  ASSERT_TRUE(b1.answer.has_value() && b1.answer->run.has_value());
  ASSERT_TRUE(b2.failure.has_value());
  EXPECT_EQ(b2.failure->error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(b2.answer.has_value());
  EXPECT_THAT(fake_.work.abandoned(), ElementsAre("b2"));
}

TEST_F(DispatcherTest, SwitchForACallCancelledWhileClaimingIsAbandoned) {
  fake_.work.Queue("b1", SwitchOrder("patched"));
  FakeCall call("b1", kStart + seconds(30));
  dispatcher_.Park(&call);
  // The agent goes away (OnCancel -> Unpark) while the store orders the switch.
  fake_.work.OnNextWork([&](const std::string&) { dispatcher_.Unpark(&call); });
  dispatcher_.Step(false);
  ASSERT_TRUE(call.failure.has_value());
  EXPECT_EQ(call.failure->error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(call.answer.has_value());
  EXPECT_THAT(fake_.work.abandoned(), ElementsAre("b1"));
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

TEST_F(DispatcherTest, AssignmentForACallCancelledWhileClaimingIsNotAnswered) {
  const int64_t job = AddJob(fake_, 1);
  fake_.work.Queue("b1", RunOrder(1, job));
  FakeCall call("b1", kStart + seconds(30));
  dispatcher_.Park(&call);
  fake_.work.OnNextWork([&](const std::string&) { dispatcher_.Unpark(&call); });
  dispatcher_.Step(false);
  ASSERT_TRUE(call.failure.has_value());
  EXPECT_EQ(call.failure->error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_FALSE(call.answer.has_value());
  // A claimed run comes back when its lease lapses; there is no switch to abandon.
  EXPECT_THAT(fake_.work.abandoned(), IsEmpty());
}

TEST_F(DispatcherTest, CallUnparkedBeforeAnyClaimEndsCancelledWithoutAClaim) {
  fake_.work.Queue("b1", SwitchOrder("patched"));
  FakeCall call("b1", kStart + seconds(30));
  dispatcher_.Park(&call);
  dispatcher_.Unpark(&call);
  ASSERT_TRUE(call.failure.has_value());
  EXPECT_EQ(call.failure->error_code(), grpc::StatusCode::CANCELLED);
  dispatcher_.Step(false);
  EXPECT_EQ(fake_.work.next_work_calls(), 0);
  EXPECT_EQ(fake_.work.queued("b1"), 1u);  // the switch was never ordered
  // A second Unpark (OnCancel after the call ended) does nothing.
  dispatcher_.Unpark(&call);
}

TEST_F(DispatcherTest, CallPastItsDeadlineGetsAnEmptyAnswerOnATick) {
  FakeCall call("b1", kStart + seconds(30));
  dispatcher_.Park(&call);
  dispatcher_.Step(true);
  EXPECT_FALSE(call.ended());
  clock_.Advance(seconds(30) - milliseconds(1));
  dispatcher_.Step(true);
  EXPECT_FALSE(call.ended());
  EXPECT_EQ(dispatcher_.parked(), 1u);
  clock_.Advance(milliseconds(1));
  dispatcher_.Step(false);  // deadlines are only checked on ticks
  EXPECT_FALSE(call.ended());
  dispatcher_.Step(true);
  ASSERT_TRUE(call.answer.has_value());
  EXPECT_FALSE(call.answer->run.has_value());
  EXPECT_FALSE(call.answer->kernel_switch.has_value());
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

TEST_F(DispatcherTest, ACallPastItsDeadlineIsNeverGivenWork) {
  // A pass over many parked calls can outlast a call's deadline: the call gets the empty
  // answer, and the run stays queued for a board that is still waiting.
  const int64_t job = AddJob(fake_, 1);
  FakeCall late("b1", kStart + seconds(30));
  dispatcher_.Park(&late);
  clock_.Advance(seconds(30));
  fake_.work.Queue("b1", RunOrder(1, job));
  dispatcher_.WorkAvailable();
  dispatcher_.Step(false);
  ASSERT_TRUE(late.answer.has_value());
  EXPECT_FALSE(late.answer->run.has_value());
  EXPECT_EQ(fake_.work.queued("b1"), 1u) << "no claim was made for the expired call";
  EXPECT_EQ(dispatcher_.parked(), 0u);

  FakeCall waiting("b1", kStart + seconds(60));
  dispatcher_.Park(&waiting);
  dispatcher_.Step(false);
  ASSERT_TRUE(waiting.answer.has_value());
  ASSERT_TRUE(waiting.answer->run.has_value());
  EXPECT_EQ(waiting.answer->run->run_id, 1);
}

TEST_F(DispatcherTest, ClaimFailureLeavesCallsParkedUntilTheNextTick) {
  const int64_t job = AddJob(fake_, 2);
  FakeCall first("b1", kStart + seconds(30));
  FakeCall second("b2", kStart + seconds(30));
  dispatcher_.Park(&first);
  dispatcher_.Park(&second);
  fake_.work.Queue("b1", RunOrder(1, job));
  fake_.work.Queue("b2", RunOrder(2, job));
  fake_.work.SetUnavailable(true);
  dispatcher_.Step(false);
  EXPECT_FALSE(first.ended());
  EXPECT_FALSE(second.ended());
  EXPECT_EQ(dispatcher_.parked(), 2u);
  EXPECT_EQ(fake_.work.next_work_calls(), 1);  // the pass stops at the first failure

  fake_.work.SetUnavailable(false);
  dispatcher_.Step(false);  // no hint: nobody is retried between ticks
  EXPECT_FALSE(first.ended());
  dispatcher_.Step(true);  // a tick retries every waiting call
  ASSERT_TRUE(first.answer.has_value() && first.answer->run.has_value());
  ASSERT_TRUE(second.answer.has_value() && second.answer->run.has_value());
  EXPECT_EQ(first.answer->run->run_id, 1);
  EXPECT_EQ(second.answer->run->run_id, 2);
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

TEST_F(DispatcherTest, StopFailsParkedCallsAndWatchersWithUnavailable) {
  const int64_t job = AddJob(fake_, 1);
  FakeCall call("b1", kStart + seconds(30));
  FakeWatcher watcher(job);
  dispatcher_.Park(&call);
  dispatcher_.AddWatcher(&watcher);
  dispatcher_.Stop();
  ASSERT_TRUE(call.failure.has_value());
  EXPECT_EQ(call.failure->error_code(), grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(watcher.finished.has_value());
  EXPECT_EQ(watcher.finished->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(dispatcher_.parked(), 0u);

  FakeCall late("b1", kStart + seconds(30));
  dispatcher_.Park(&late);  // after Stop: refused at once
  ASSERT_TRUE(late.failure.has_value());
  EXPECT_EQ(late.failure->error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(dispatcher_.parked(), 0u);
  dispatcher_.RemoveWatcher(&watcher);
}

TEST_F(DispatcherTest, WatcherGetsProgressOfItsJobOnly) {
  const int64_t job1 = AddJob(fake_, 1);
  const int64_t job2 = AddJob(fake_, 1);
  FakeWatcher w1(job1), w2(job2);
  dispatcher_.AddWatcher(&w1);
  dispatcher_.AddWatcher(&w2);
  dispatcher_.Step(false);
  ASSERT_EQ(w1.pushed.size(), 1u);
  ASSERT_EQ(w2.pushed.size(), 1u);
  EXPECT_EQ(w1.pushed[0].job_id(), job1);
  EXPECT_EQ(w2.pushed[0].job_id(), job2);

  fake_.jobs.SetRunStates(job1, RunState::kRunning);
  dispatcher_.JobChanged(job1);
  dispatcher_.Step(false);
  ASSERT_EQ(w1.pushed.size(), 2u);
  EXPECT_EQ(w1.pushed[1].job_id(), job1);
  EXPECT_EQ(w1.pushed[1].state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(w2.pushed.size(), 1u);

  dispatcher_.Step(false);  // nothing changed: nothing pushed
  EXPECT_EQ(w1.pushed.size(), 2u);
  EXPECT_EQ(w2.pushed.size(), 1u);

  dispatcher_.Step(true);  // a tick refreshes every watcher (each reactor drops repeats)
  EXPECT_EQ(w1.pushed.size(), 3u);
  ASSERT_EQ(w2.pushed.size(), 2u);
  EXPECT_EQ(w2.pushed[1].job_id(), job2);

  dispatcher_.RemoveWatcher(&w1);
  dispatcher_.RemoveWatcher(&w2);
}

TEST_F(DispatcherTest, TickRunsTheDutiesAndServesWhatTheyRequeued) {
  BackgroundDuties duties(fake_.stores(), &clock_);
  Dispatcher dispatcher(&fake_.work, &fake_.jobs, &clock_, &duties);
  const int64_t job = AddJob(fake_, 1);
  FakeWatcher watcher(job);
  FakeCall call("b1", kStart + seconds(30));
  dispatcher.AddWatcher(&watcher);
  dispatcher.Park(&call);
  dispatcher.Step(false);
  EXPECT_FALSE(call.ended());
  ASSERT_EQ(watcher.pushed.size(), 1u);

  // A lease lapsed: the run is queued again and its job changed.
  fake_.work.SetReaped({job});
  fake_.work.Queue("b1", RunOrder(1, job));
  dispatcher.Step(true);
  EXPECT_EQ(fake_.work.reap_calls(), 1);
  ASSERT_TRUE(call.answer.has_value() && call.answer->run.has_value());
  EXPECT_EQ(call.answer->run->job_id, job);
  EXPECT_EQ(watcher.pushed.size(), 2u);  // the reaped job's watchers are refreshed
  dispatcher.RemoveWatcher(&watcher);
}

}  // namespace
}  // namespace faultline::controller
