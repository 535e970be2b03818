// One contract, two implementations: every test here runs against the PostgreSQL stores
// (pg_*.cc, a fresh database on the throwaway cluster) and against the in-memory fakes the
// unit tests use (tests/support/fake_stores.h), so a fake cannot drift from the rules the
// real store keeps (storage/interfaces.h: NOT_FOUND for unknown ids, ALREADY_EXISTS for
// taken names, FAILED_PRECONDITION for stale writes, request-id idempotence, ...).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "services/controller/core/validation.h"
#include "services/controller/storage/pg_store.h"
#include "tests/support/fake_stores.h"
#include "tests/support/pg_cluster.h"

namespace faultline::controller {
namespace {

// The stores under test, as the controller is wired.
class PgStores {
 public:
  static constexpr const char* kName = "pg";
  void SetUp(const std::string& test) {
    StoreOptions options;
    options.database_url = faultline::testing::FreshDatabase("c_" + test);
    store_ = std::make_unique<PgStore>(options);
    ASSERT_TRUE(store_->Migrate().ok());
  }
  JobStore& jobs() { return store_->jobs(); }
  BoardStore& boards() { return store_->boards(); }
  ScheduleStore& schedules() { return store_->schedules(); }
  HistoryStore& history() { return store_->history(); }
  TokenStore& tokens() { return store_->tokens(); }
  BisectionStore& bisections() { return store_->bisections(); }
  RobotStore& robot() { return store_->robot(); }

 private:
  std::unique_ptr<PgStore> store_;
};

class FakeStores {
 public:
  static constexpr const char* kName = "fake";
  FakeStores() : fakes_(&clock_) {}
  void SetUp(const std::string&) {}
  JobStore& jobs() { return fakes_.jobs; }
  BoardStore& boards() { return fakes_.boards; }
  ScheduleStore& schedules() { return fakes_.schedules; }
  HistoryStore& history() { return fakes_.history; }
  TokenStore& tokens() { return fakes_.tokens; }
  BisectionStore& bisections() { return fakes_.bisections; }
  RobotStore& robot() { return fakes_.robot; }

 private:
  SystemClock clock_;  // the fakes' timestamps, as the database's now() gives PostgreSQL's
  fakes::FakeStores fakes_;
};

template <typename Impl>
class StoreContract : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(Impl::kName) == "pg") FAULTLINE_REQUIRE_PG();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();
    std::replace_if(
        name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
    impl_.SetUp(std::string(Impl::kName) + "_" + name);
  }

  // A valid job: filemap-thrash, 2 repetitions of one kernel (2 runs).
  static ValidatedJob Job(uint32_t repetitions = 2) {
    JobSpecInput spec;
    spec.benchmark = "filemap-thrash";
    spec.duration = "1s";
    spec.repetitions = repetitions;
    spec.kernels = {"vanilla"};
    spec.memory_max = "256M";
    spec.params = {{"threads", "2"}, {"file_size", "4M"}};
    spec.shuffle_seed = 1;
    auto job = ValidateJobSpec(spec, {fakes::VanillaBoard("box", {"vanilla"})});
    EXPECT_TRUE(job.ok()) << job.status();
    return *job;
  }
  static std::string SpecJson(uint32_t repetitions = 2) {
    return R"({"benchmark":"filemap-thrash","duration":"1s","repetitions":)" +
           std::to_string(repetitions) + R"(,"kernels":["vanilla"]})";
  }
  int64_t CreateJob(const std::string& request_id = "") {
    auto created = impl_.jobs().CreateJob(Job(), "study", SpecJson(), request_id);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->job_id : 0;
  }

  Impl impl_;
};

using Implementations = ::testing::Types<PgStores, FakeStores>;
class ImplName {
 public:
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};
TYPED_TEST_SUITE(StoreContract, Implementations, ImplName);

TYPED_TEST(StoreContract, ANewJobIsQueuedWithEveryRun) {
  const int64_t id = this->CreateJob();
  auto job = this->impl_.jobs().GetJob(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->counts.total, 2u);
  EXPECT_EQ(job->counts.queued, 2u);
  EXPECT_EQ(job->benchmark, "filemap-thrash");
  EXPECT_EQ(job->name, "study");
  auto runs = this->impl_.jobs().ListRuns(id);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  for (const RunRecord& r : *runs) {
    EXPECT_EQ(r.state, RunState::kQueued);
    EXPECT_EQ(r.kernel, "vanilla");
    EXPECT_FALSE(r.has_result);
  }
}

TYPED_TEST(StoreContract, ARetryUnderTheSameRequestIdReturnsTheFirstJob) {
  auto& jobs = this->impl_.jobs();
  auto first = jobs.CreateJob(this->Job(), "study", this->SpecJson(), "req-1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  auto again = jobs.CreateJob(this->Job(), "study", this->SpecJson(), "req-1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->job_id, first->job_id);
  EXPECT_FALSE(again->created);
  auto other = jobs.CreateJob(this->Job(3), "study", this->SpecJson(3), "req-1");
  EXPECT_TRUE(absl::IsAlreadyExists(other.status())) << other.status();
  auto listed = jobs.ListJobs(10);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u) << "nothing stored twice, nothing half-stored";
}

TYPED_TEST(StoreContract, UnknownJobsAreNotFound) {
  EXPECT_TRUE(absl::IsNotFound(this->impl_.jobs().GetJob(4242).status()));
  EXPECT_TRUE(absl::IsNotFound(this->impl_.jobs().CancelJob(4242).status()));
}

TYPED_TEST(StoreContract, JobsAreListedNewestFirstUpToTheLimit) {
  const int64_t a = this->CreateJob(), b = this->CreateJob(), c = this->CreateJob();
  auto two = this->impl_.jobs().ListJobs(2);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].id, c);
  EXPECT_EQ((*two)[1].id, b);
  EXPECT_LT(a, b);
}

TYPED_TEST(StoreContract, ACancelledJobIsFinalAndCannotBeCancelledAgain) {
  const int64_t id = this->CreateJob();
  auto cancelled = this->impl_.jobs().CancelJob(id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->counts.cancelled, 2u);
  EXPECT_EQ(cancelled->counts.queued, 0u);
  EXPECT_NE(cancelled->finished_at_ms, 0);
  auto again = this->impl_.jobs().CancelJob(id);
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  auto runs = this->impl_.jobs().ListRuns(id);
  ASSERT_TRUE(runs.ok());
  for (const RunRecord& r : *runs) EXPECT_EQ(r.state, RunState::kCancelled);
}

TYPED_TEST(StoreContract, AHelloRegistersTheBoardOnceAndTouchNeedsOne) {
  auto& boards = this->impl_.boards();
  EXPECT_TRUE(absl::IsFailedPrecondition(boards.TouchBoard("box")));
  BoardRecord hello;
  hello.summary = fakes::VanillaBoard("box", {"vanilla", "patched"});
  hello.facts_json = R"({"name":"box","arch":"x86_64"})";
  auto verdict = boards.UpsertBoard(hello);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(verdict->health, BoardHealth::kOk);
  hello.summary.kernel_labels = {"vanilla"};
  ASSERT_TRUE(boards.UpsertBoard(hello).ok());
  auto listed = boards.ListBoards();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  const BoardSummary& b = (*listed)[0].summary;
  EXPECT_EQ(b.name, "box");
  EXPECT_EQ(b.arch, "x86_64");
  EXPECT_EQ(b.memory_bytes, 8ull << 30);
  EXPECT_EQ(b.kernel_labels, (std::vector<std::string>{"vanilla"})) << "the latest hello wins";
  EXPECT_TRUE((*listed)[0].online);
  EXPECT_TRUE(boards.TouchBoard("box").ok());
  auto released = boards.ReleaseBoardRuns("box");
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(*released, 0) << "nothing assigned";
}

TYPED_TEST(StoreContract, SchedulesHaveUniqueNamesAndUnknownOnesAreNotFound) {
  auto& schedules = this->impl_.schedules();
  auto created = schedules.CreateSchedule("nightly", "0 3 * * *", this->SpecJson(), 1000);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->name, "nightly");
  EXPECT_EQ(created->next_run_ms, 1000);
  auto twice = schedules.CreateSchedule("nightly", "0 4 * * *", this->SpecJson(), 2000);
  EXPECT_TRUE(absl::IsAlreadyExists(twice.status())) << twice.status();
  EXPECT_TRUE(absl::IsNotFound(schedules.DeleteSchedule(created->id + 100)));
  auto listed = schedules.ListSchedules();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].cron, "0 3 * * *");
  EXPECT_TRUE(schedules.DeleteSchedule(created->id).ok());
  listed = schedules.ListSchedules();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TYPED_TEST(StoreContract, ADueScheduleFiresOncePerSlotAndMovesOn) {
  auto& schedules = this->impl_.schedules();
  auto due = schedules.CreateSchedule("due", "0 3 * * *", this->SpecJson(), 1000);
  auto later = schedules.CreateSchedule("later", "0 3 * * *", this->SpecJson(), 9000);
  ASSERT_TRUE(due.ok() && later.ok());
  std::vector<std::string> fired;
  auto fire = [&](const ScheduleRecord& s) -> absl::StatusOr<int64_t> {
    fired.push_back(s.name);
    return this->CreateJob();
  };
  auto next = [](const ScheduleRecord& s) { return s.next_run_ms + 86'400'000; };
  auto n = schedules.FireDueSchedules(5000, fire, next);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(fired, (std::vector<std::string>{"due"}));
  n = schedules.FireDueSchedules(5000, fire, next);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0) << "the slot fired once";
  auto listed = schedules.ListSchedules();
  ASSERT_TRUE(listed.ok());
  for (const auto& s : *listed) {
    if (s.name == "due") {
      EXPECT_EQ(s.next_run_ms, 1000 + 86'400'000);
      EXPECT_NE(s.last_job_id, 0);
    }
    if (s.name == "later") {
      EXPECT_EQ(s.next_run_ms, 9000);
    }
  }
}

TYPED_TEST(StoreContract, ATokenIsFoundByItsHashUntilRevoked) {
  auto& tokens = this->impl_.tokens();
  const std::string hash(64, 'a');
  ASSERT_TRUE(tokens.CreateToken("lab-01-agent", TokenRole::kAgent, "lab-01", hash).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(
      tokens.CreateToken("lab-01-agent", TokenRole::kUser, "", std::string(64, 'b'))));
  auto found = tokens.FindToken(hash);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->name, "lab-01-agent");
  EXPECT_EQ((*found)->role, TokenRole::kAgent);
  EXPECT_EQ((*found)->board, "lab-01");
  auto none = tokens.FindToken(std::string(64, 'c'));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto revoked = tokens.RevokeToken("lab-01-agent");
  ASSERT_TRUE(revoked.ok());
  EXPECT_TRUE(*revoked);
  found = tokens.FindToken(hash);
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->has_value()) << "a revoked token lets nobody in";
  revoked = tokens.RevokeToken("nobody");
  ASSERT_TRUE(revoked.ok());
  EXPECT_FALSE(*revoked);
}

TYPED_TEST(StoreContract, AChangePointIsStoredOnceAndTrackedByState) {
  const int64_t job = this->CreateJob();
  ChangePointRecord c;
  c.study = "study";
  c.benchmark = "filemap-thrash";
  c.config = "default";
  c.arch = "x86_64";
  c.board = "box";
  c.kernel = "vanilla";
  c.job_id = job;
  c.mean_before = 100;
  c.mean_after = 80;
  c.relative_change = -0.2;
  c.p_value = 1e-4;
  auto& history = this->impl_.history();
  auto added = history.RecordChangePoints({c});
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 1);
  added = history.RecordChangePoints({c});
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(*added, 0) << "known change points are left as they are";
  auto open = history.ListChangePoints(false);
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].state, ChangePointState::kOpen);
  auto fixed = history.SetChangePointState((*open)[0].id, ChangePointState::kFixed);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->state, ChangePointState::kFixed);
  open = history.ListChangePoints(false);
  ASSERT_TRUE(open.ok());
  EXPECT_TRUE(open->empty()) << "fixed is closed";
  auto all = history.ListChangePoints(true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(
      history.SetChangePointState((*all)[0].id + 100, ChangePointState::kOpen).status()));
}

TYPED_TEST(StoreContract, ABisectionIsUpdatedOnlyWhileRunningAndCancelledOnce) {
  BisectionStore& store = this->impl_.bisections();
  auto first = store.CreateBisection("req-1", R"({"phase":"endpoints"})");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->record.state, BisectionState::kRunning);
  // The same request id: the first one, not a second.
  auto again = store.CreateBisection("req-1", R"({"phase":"other"})");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->record.id, first->record.id);
  auto other = store.CreateBisection("", R"({})");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->record.id, first->record.id);

  const int64_t id = first->record.id;
  const int64_t job = this->CreateJob();
  auto updated =
      store.UpdateBisection(id, BisectionState::kRunning, R"({"phase":"bisecting"})", job);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_TRUE(*updated);
  auto got = store.GetBisection(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->current_job, job);
  EXPECT_NE(got->doc_json.find("bisecting"), std::string::npos);
  auto running = store.ListBisections(10, /*running_only=*/true);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->size(), 2u);
  EXPECT_EQ(running->front().id, other->record.id);  // newest first

  auto cancelled = store.CancelBisection(id);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, BisectionState::kCancelled);
  EXPECT_EQ(cancelled->current_job, job);  // so the caller can cancel its job
  // A cancelled one is not written by a driver pass that raced the cancel.
  auto late = store.UpdateBisection(id, BisectionState::kDone, R"({"phase":"done"})", 0);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(*late);
  EXPECT_EQ(store.GetBisection(id)->state, BisectionState::kCancelled);
  EXPECT_EQ(store.ListBisections(10, true)->size(), 1u);
  EXPECT_EQ(store.ListBisections(10, false)->size(), 2u);
  EXPECT_EQ(absl::StatusCode::kNotFound, store.GetBisection(id + 100).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, store.CancelBisection(id + 100).status().code());
}

// The robot's memory: a read's mails kept with its cursor, once per Message-ID (a skipped
// one apart), in arrival order per thread and version; the bytes as they came.
TYPED_TEST(StoreContract, TheRobotKeepsEachMailOnceWithItsCursor) {
  RobotStore& robot = this->impl_.robot();
  EXPECT_TRUE(robot.Cursor("mm")->empty());
  const std::string bytes("caf\xe9 \0 \xff", 8);
  ASSERT_TRUE(robot
                  .KeepMails("mm",
                             {{.message_id = "a@x",
                               .thread_root = "a@x",
                               .version = 2,
                               .raw = "one",
                               .skip_reason = ""},
                              {.message_id = "b@x",
                               .thread_root = "a@x",
                               .version = 2,
                               .raw = bytes,
                               .skip_reason = ""},
                              {.message_id = "c@x",
                               .thread_root = "c@x",
                               .version = 1,
                               .raw = "big",
                               .skip_reason = "too large: 9 bytes"}},
                             {{0, "c1"}})
                  .ok());
  ASSERT_TRUE(robot
                  .KeepMails("mm",
                             {{.message_id = "a@x",
                               .thread_root = "a@x",
                               .version = 2,
                               .raw = "again",
                               .skip_reason = ""},
                              {.message_id = "d@x",
                               .thread_root = "a@x",
                               .version = 3,
                               .raw = "v3",
                               .skip_reason = ""}},
                             {{0, "c2"}, {1, "e1"}})
                  .ok());
  EXPECT_EQ(*robot.Cursor("mm"), (std::map<int, std::string>{{0, "c2"}, {1, "e1"}}));
  EXPECT_TRUE(robot.Cursor("other")->empty());
  EXPECT_EQ(*robot.ThreadMails("a@x", 2), (std::vector<std::string>{"one", bytes}));
  EXPECT_EQ(*robot.ThreadMails("a@x", 3), std::vector<std::string>{"v3"});
  EXPECT_TRUE(robot.ThreadMails("c@x", 1)->empty()) << "a skipped mail is kept apart";
}

// Series: replaced whole by id, listed oldest first (by when first stored), by state.
TYPED_TEST(StoreContract, SeriesAreReplacedByIdAndListedOldestFirst) {
  RobotStore& robot = this->impl_.robot();
  EXPECT_FALSE(robot.GetSeries("none@x")->has_value());
  for (const char* id : {"s2@x", "s1@x", "s3@x"}) {
    SeriesRecord s{.id = id,
                   .thread_root = id,
                   .version = 1,
                   .title = "t",
                   .from = "f",
                   .state = SeriesState::kChosen,
                   .reason = "touches mm/memory.c",
                   .previous = "",
                   .base = "v6.12",
                   .jobs = {},
                   .updated_ms = 0};
    ASSERT_TRUE(robot.PutSeries(s).ok());
  }
  SeriesRecord later = **robot.GetSeries("s2@x");
  later.state = SeriesState::kSubmitted;
  later.jobs = {7, 8};
  ASSERT_TRUE(robot.PutSeries(later).ok());
  const SeriesRecord got = **robot.GetSeries("s2@x");
  EXPECT_EQ(got.state, SeriesState::kSubmitted);
  EXPECT_EQ(got.jobs, (std::vector<int64_t>{7, 8}));
  EXPECT_GT(got.updated_ms, 0);
  auto ids = [](const std::vector<SeriesRecord>& list) {
    std::vector<std::string> out;
    for (const SeriesRecord& s : list) out.push_back(s.id);
    return out;
  };
  EXPECT_EQ(ids(*robot.ListSeries(std::nullopt, 10)),
            (std::vector<std::string>{"s2@x", "s1@x", "s3@x"}))
      << "the order they were first stored in, a replacement keeps its place";
  EXPECT_EQ(ids(*robot.ListSeries(SeriesState::kChosen, 1)), std::vector<std::string>{"s1@x"});
  EXPECT_EQ(ids(*robot.ListSeries(SeriesState::kSubmitted, 10)), std::vector<std::string>{"s2@x"});
}

// A chosen series stored assembled (the intake's work, done once): its patches' ids with
// the record, its mbox as the bytes it is (a stranger's may be no UTF-8), kept when the
// record is replaced; none for a series stored without; refused for a series not stored.
TYPED_TEST(StoreContract, ASeriesIsStoredAssembled) {
  RobotStore& robot = this->impl_.robot();
  SeriesRecord s{.id = "m@x", .thread_root = "m@x", .version = 2, .title = "t", .from = "f"};
  s.patch_ids = {"m1@x", "m2@x"};
  ASSERT_TRUE(robot.PutSeries(s).ok());
  EXPECT_EQ(*robot.SeriesMbox("m@x"), "") << "none stored yet";
  const std::string mbox = std::string("From x\nSubject: caf\xe9\n\n", 22) + std::string(1, '\0');
  ASSERT_TRUE(robot.PutSeriesMbox("m@x", mbox).ok());
  s.state = SeriesState::kSubmitted;
  s.jobs = {3};
  ASSERT_TRUE(robot.PutSeries(s).ok());
  EXPECT_EQ(*robot.SeriesMbox("m@x"), mbox) << "kept byte for byte across a replacement";
  EXPECT_EQ((*robot.GetSeries("m@x"))->patch_ids, (std::vector<std::string>{"m1@x", "m2@x"}));
  EXPECT_EQ(robot.PutSeriesMbox("none@x", "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*robot.SeriesMbox("none@x"), "");
}

// The outbox: one reply per (series, kind) and per Message-ID, moved only from the state
// named, counted for the rate limit once it is handed over.
TYPED_TEST(StoreContract, ARepliesOutboxSendsEachReplyOnce) {
  RobotStore& robot = this->impl_.robot();
  ReplyRecord reply{.series_id = "s@x",
                    .kind = ReplyKind::kResults,
                    .message_id = "r1@robot",
                    .state = ReplyState::kQueued,
                    .recipients = {"a@x", "list@x"},
                    .text = "Subject: Re: x\n\nBody.\n",
                    .sent_ms = 0};
  EXPECT_TRUE(*robot.QueueReply(reply));
  EXPECT_FALSE(*robot.QueueReply(reply)) << "the same reply again";
  ReplyRecord other = reply;
  other.message_id = "r2@robot";
  EXPECT_FALSE(*robot.QueueReply(other)) << "a second results reply to one series";
  other.kind = ReplyKind::kApply;
  other.message_id = "r1@robot";
  EXPECT_FALSE(*robot.QueueReply(other)) << "a Message-ID already used";
  auto queued = robot.ListReplies(ReplyState::kQueued, 10);
  ASSERT_EQ(queued->size(), 1u);
  EXPECT_EQ(queued->front().recipients, reply.recipients);
  EXPECT_EQ(queued->front().text, reply.text);
  const int64_t before = SystemClock().NowMs() - 60'000;
  EXPECT_EQ(*robot.RepliesSentSince(before), 0);
  EXPECT_FALSE(*robot.MoveReply("r1@robot", ReplyState::kSending, ReplyState::kSent))
      << "not sending yet";
  EXPECT_TRUE(*robot.MoveReply("r1@robot", ReplyState::kQueued, ReplyState::kSending));
  EXPECT_EQ(*robot.RepliesSentSince(before), 1);
  EXPECT_TRUE(*robot.MoveReply("r1@robot", ReplyState::kSending, ReplyState::kSent));
  EXPECT_FALSE(*robot.MoveReply("r1@robot", ReplyState::kSending, ReplyState::kSent));
  auto sent = robot.ListReplies(ReplyState::kSent, 10);
  ASSERT_EQ(sent->size(), 1u);
  EXPECT_GT(sent->front().sent_ms, before);
  EXPECT_TRUE(robot.ListReplies(ReplyState::kQueued, 10)->empty());
}

// Checks: one per (patch, kind); the verdict supersedes a pending check still queued; only
// a queued check is settled; due ones oldest first.
TYPED_TEST(StoreContract, AVerdictSupersedesItsPatchsQueuedPendingCheck) {
  RobotStore& robot = this->impl_.robot();
  auto check = [](const std::string& patch, CheckKind kind, int64_t next_ms) {
    return CheckRecord{
        .series_id = "s@x",
        .patch_message_id = patch,
        .kind = kind,
        .state = kind == CheckKind::kPending ? CheckState::kPending : CheckState::kSuccess,
        .description = "d",
        .status = CheckStatus::kQueued,
        .attempts = 0,
        .error = "",
        .next_ms = next_ms};
  };
  EXPECT_FALSE(robot.QueueChecks({check("p1@x", CheckKind::kPending, 0)}).ok()) << "no such series";
  EXPECT_TRUE(robot.DueChecks(100, 10)->empty()) << "nothing of it kept";
  ASSERT_TRUE(robot
                  .PutSeries({.id = "s@x",
                              .thread_root = "s@x",
                              .version = 1,
                              .title = "t",
                              .from = "f",
                              .state = SeriesState::kSubmitted,
                              .reason = "",
                              .previous = "",
                              .base = "",
                              .jobs = {},
                              .updated_ms = 0})
                  .ok());
  ASSERT_TRUE(robot
                  .QueueChecks({check("p1@x", CheckKind::kPending, 0),
                                check("p2@x", CheckKind::kPending, 0)})
                  .ok());
  ASSERT_TRUE(robot.QueueChecks({check("p1@x", CheckKind::kPending, 0)}).ok()) << "kept once";
  auto due = robot.DueChecks(100, 10);
  ASSERT_EQ(due->size(), 2u);
  EXPECT_EQ(due->at(0).patch_message_id, "p1@x");
  // p2's pending check is posted; p1's still queued when the verdicts come.
  CheckRecord posted = due->at(1);
  posted.status = CheckStatus::kPosted;
  posted.attempts = 1;
  ASSERT_TRUE(robot.SettleCheck(posted).ok());
  ASSERT_TRUE(robot
                  .QueueChecks({check("p1@x", CheckKind::kVerdict, 50),
                                check("p2@x", CheckKind::kVerdict, 500)})
                  .ok());
  due = robot.DueChecks(100, 10);
  ASSERT_EQ(due->size(), 1u) << "p1's pending superseded, p2's verdict not due yet";
  EXPECT_EQ(due->at(0).kind, CheckKind::kVerdict);
  EXPECT_EQ(due->at(0).patch_message_id, "p1@x");
  CheckRecord refused = due->at(0);
  refused.attempts = 1;
  refused.error = "503";
  refused.next_ms = 1000;
  ASSERT_TRUE(robot.SettleCheck(refused).ok());
  EXPECT_TRUE(robot.DueChecks(100, 10)->empty());
  due = robot.DueChecks(1000, 10);
  ASSERT_EQ(due->size(), 2u);
  EXPECT_EQ(due->at(0).attempts, 1);
  EXPECT_EQ(due->at(0).error, "503");
  // A superseded check stays so: settling it changes nothing.
  CheckRecord late = check("p1@x", CheckKind::kPending, 0);
  late.status = CheckStatus::kPosted;
  ASSERT_TRUE(robot.SettleCheck(late).ok());
  for (const CheckRecord& k : *robot.DueChecks(1000, 10)) EXPECT_EQ(k.kind, CheckKind::kVerdict);
}

}  // namespace
}  // namespace faultline::controller
