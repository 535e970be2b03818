// PgStore against a real PostgreSQL 15 (tests/integration/store_fixture.h): PgWorkStore
// (pg_work.cc): claims, leases, results, cancellation, adaptive blocks.
#include "nlohmann/json.hpp"
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

TEST_F(StoreTest, ClaimRunStoreResultExactlyOnce) {
  int64_t job = Submit(1);
  EXPECT_EQ(Count("SELECT count(*) FROM runs"), 2);

  auto first = ClaimRun("box");
  ASSERT_TRUE(first.ok() && first->has_value());
  const Assignment& a = **first;
  EXPECT_EQ(a.job_id, job);
  EXPECT_EQ(a.duration_seconds, 3u);
  const std::string first_threads = a.params.at("threads");
  EXPECT_TRUE(first_threads == "2" || first_threads == "4");
  EXPECT_EQ(a.memcg.memory_max, 256u << 20);
  // One run at a time per board.
  auto busy = ClaimRun("box");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->has_value());

  EXPECT_TRUE(*store_->work().RenewLease("box", a.run_id, a.attempt_id));
  EXPECT_FALSE(*store_->work().RenewLease("box", a.run_id, "00000000-0000-0000-0000-000000000000"));

  // A write from another attempt or another board is fenced off.
  auto stale =
      testing::StoreResult(store_->work(), "box", a.run_id, "00000000-0000-0000-0000-000000000000",
                           true, "", GoodResult(3));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  auto other_board = testing::StoreResult(store_->work(), "other", a.run_id, a.attempt_id, true, "",
                                          GoodResult(3));
  EXPECT_EQ(other_board.status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(
      testing::StoreResult(store_->work(), "box", a.run_id, a.attempt_id, true, "", GoodResult(3))
          .ok());
  // A repeated upload is acknowledged and not stored twice.
  ASSERT_TRUE(
      testing::StoreResult(store_->work(), "box", a.run_id, a.attempt_id, true, "", GoodResult(3))
          .ok());
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM samples"), 3);

  auto second = ClaimRun("box");
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_NE((*second)->params.at("threads"), first_threads);
  ASSERT_TRUE(testing::StoreResult(store_->work(), "box", (*second)->run_id, (*second)->attempt_id,
                                   true, "", GoodResult(3))
                  .ok());
  ExpectSucceeded(job, 2);
}

// Results that queued up together are stored in one transaction (group commit); each gets
// the answer it would get alone: the current ones stored, a repeat of one in the same
// batch acknowledged once, a stale attempt and an unknown run refused. The job finishes.
TEST_F(StoreTest, ABatchOfResultsAnswersEachAsAloneAndFinishesTheJob) {
  UpsertAABoard("box2");
  int64_t job = Submit(1);  // two runs
  auto a = ClaimRun("box");
  auto b = ClaimRun("box2");
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
  auto upload = [](const std::string& board, const Assignment& run, ResultRecord result) {
    return ResultUpload{.board = board,
                        .run_id = run.run_id,
                        .attempt_id = run.attempt_id,
                        .succeeded = true,
                        .failure_reason = "",
                        .result = std::move(result)};
  };
  std::vector<ResultUpload> batch;
  batch.push_back(upload("box2", **b, GoodResult(3)));
  batch.push_back(upload("box", **a, GoodResult(3)));
  batch.push_back(upload("box", **a, GoodResult(3)));  // the agent's retry, queued alongside
  ResultUpload stale = upload("box", **a, GoodResult(3));
  stale.attempt_id = "00000000-0000-0000-0000-000000000000";
  batch.push_back(stale);
  ResultUpload unknown = upload("box", **a, GoodResult(3));
  unknown.run_id = 999999;
  batch.push_back(unknown);
  ResultUpload short_one = upload("box", **a, GoodResult(2));  // would fail the shape check
  batch.push_back(short_one);

  const auto answers = store_->work().StoreResults(batch);
  ASSERT_EQ(answers.size(), batch.size());
  for (size_t i : {0, 1, 2, 5}) {
    ASSERT_TRUE(answers[i].ok()) << i << ": " << answers[i].status();
    EXPECT_EQ(*answers[i], job);
  }
  EXPECT_EQ(answers[3].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(answers[4].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM samples"), 6);
  EXPECT_EQ(Count("SELECT count(*) FROM samples WHERE run_id = " + std::to_string((*a)->run_id)),
            3);
  ExpectSucceeded(job, 2);
}

// A database error on one upload (here its counters are not JSON) fails the batch's
// transaction; the others are then stored one by one and only that one is refused.
TEST_F(StoreTest, OneBrokenUploadCostsTheRestOfItsBatchNothing) {
  UpsertAABoard("box2");
  int64_t job = Submit(1);
  auto a = ClaimRun("box");
  auto b = ClaimRun("box2");
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());
  std::vector<ResultUpload> batch(2);
  batch[0] = ResultUpload{.board = "box",
                          .run_id = (*a)->run_id,
                          .attempt_id = (*a)->attempt_id,
                          .succeeded = true,
                          .failure_reason = "",
                          .result = GoodResult(3)};
  batch[0].result.counters_json = "{not json";
  batch[1] = ResultUpload{.board = "box2",
                          .run_id = (*b)->run_id,
                          .attempt_id = (*b)->attempt_id,
                          .succeeded = true,
                          .failure_reason = "",
                          .result = GoodResult(3)};
  const auto answers = store_->work().StoreResults(batch);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].status().code(), absl::StatusCode::kInternal) << answers[0].status();
  ASSERT_TRUE(answers[1].ok()) << answers[1].status();
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM samples"), 3);
  auto job_now = store_->jobs().GetJob(job);
  ASSERT_TRUE(job_now.ok());
  EXPECT_EQ(job_now->state, JobState::kRunning);  // run a is still open: its agent retries
}

// The last two results of a job arrive together (two boards, two transactions). Under READ
// COMMITTED each transaction's count of the job's open runs missed the other's uncommitted
// run, both wrote "running", and the job never finished (seen with 20 simulated boards).
// Here the first transaction is held open after recomputing the job, the second StoreResult
// runs against it, and the first commits only once the second waits on a lock.
TEST_F(StoreTest, TheLastTwoResultsStoredConcurrentlyFinishTheJob) {
  UpsertAABoard("box2");
  int64_t job = Submit(1);  // two runs: threads=2 and threads=4
  auto a = ClaimRun("box");
  auto b = ClaimRun("box2");
  ASSERT_TRUE(a.ok() && a->has_value() && b.ok() && b->has_value());

  pqxx::connection first(url_);
  pqxx::work t1(first);
  t1.exec_params("UPDATE runs SET state = 'succeeded', finished_at = now() WHERE id = $1",
                 (*a)->run_id);
  pg::RecomputeJobState(t1, job);  // run b is still open: the job stays running

  absl::StatusOr<int64_t> stored = absl::UnknownError("not run");
  std::thread second([&] {
    stored = testing::StoreResult(store_->work(), "box2", (*b)->run_id, (*b)->attempt_id, true, "",
                                  GoodResult(3));
  });
  // Wait (polling a condition, bounded) until the second transaction waits on a lock.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool waiting = false;
  while (!waiting && std::chrono::steady_clock::now() < give_up) {
    waiting = Count(
                  "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                  "AND wait_event_type = 'Lock'") > 0;
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  t1.commit();
  second.join();
  ASSERT_TRUE(waiting) << "the second StoreResult never waited for the first transaction";
  ASSERT_TRUE(stored.ok()) << stored.status();

  auto done = store_->jobs().GetJob(job);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->counts.succeeded, 2u);
  EXPECT_EQ(done->state, JobState::kSucceeded);
  EXPECT_NE(done->finished_at_ms, 0);
}

// Many waiting boards served in one pass: NextWork's rule for each, in the order they asked.
TEST_F(StoreTest, ManyWaitingBoardsAreServedInOnePass) {
  UpsertAABoard("aa1");
  UpsertAABoard("aa2");
  const int64_t job = Submit(1);  // two vanilla runs
  auto first = testing::NextWorkForBoards(store_->work(), {"aa1", "box", "aa2", "nobody"});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 2u);  // two runs: the third board gets nothing
  std::set<int64_t> runs;
  for (const auto& [board, order] : *first) {
    EXPECT_TRUE(board == "aa1" || board == "box") << board;
    ASSERT_TRUE(order.run.has_value());
    EXPECT_FALSE(order.kernel_switch.has_value());
    EXPECT_EQ(order.run->job_id, job);
    EXPECT_EQ(order.run->duration_seconds, 3u);
    EXPECT_FALSE(order.run->attempt_id.empty());
    runs.insert(order.run->run_id);
    EXPECT_EQ(Text("SELECT board FROM runs WHERE id = " + std::to_string(order.run->run_id)),
              board);
  }
  EXPECT_EQ(runs.size(), 2u);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'assigned'"), 2);
  EXPECT_EQ(store_->jobs().GetJob(job)->state, JobState::kRunning);
  // Busy boards get nothing more; the idle one has nothing to take.
  auto again = testing::NextWorkForBoards(store_->work(), {"aa1", "box", "aa2"});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  // A board whose head needs a kernel it can only boot is told to switch; the run stays
  // queued and the next board, which runs that kernel, claims it.
  for (const auto& [board, order] : *first) {
    ASSERT_TRUE(testing::StoreResult(store_->work(), board, order.run->run_id,
                                     order.run->attempt_id, true, "", GoodResult(3))
                    .ok());
  }
  BoardRecord boot;  // runs vanilla, can boot patched
  boot.summary = {.name = "boot",
                  .arch = "x86_64",
                  .memory_bytes = 8ull << 30,
                  .kernel_labels = {"vanilla", "patched"},
                  .running_kernel_label = "vanilla",
                  .running_kernel_labels = {"vanilla"},
                  .bootable_kernel_labels = {"vanilla", "patched"}};
  boot.facts_json = "{}";
  ASSERT_TRUE(store_->boards().UpsertBoard(boot).ok());
  Submit(1, {"patched"});
  auto mixed = testing::NextWorkForBoards(store_->work(), {"boot", "aa2"});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->size(), 2u);
  std::map<std::string, WorkOrder> by_board(mixed->begin(), mixed->end());
  ASSERT_TRUE(by_board["boot"].kernel_switch.has_value());
  EXPECT_EQ(by_board["boot"].kernel_switch->label, "patched");
  EXPECT_EQ(Text("SELECT health FROM boards WHERE name = 'boot'"), "switching");
  ASSERT_TRUE(by_board["aa2"].run.has_value());
  EXPECT_EQ(by_board["aa2"].run->kernel, "patched");
  EXPECT_NE(by_board["boot"].kernel_switch->reason.find(
                "run " + std::to_string(by_board["aa2"].run->run_id) + " "),
            std::string::npos);
}

// A pass over more boards than one claim transaction takes: the orders come in groups, each
// delivered once committed, every board served once and every run claimed once.
TEST_F(StoreTest, APassOverManyBoardsIsClaimedAndDeliveredInGroups) {
  std::vector<std::string> boards = {"box"};
  for (int i = 0; i < 299; ++i) {
    boards.push_back(absl::StrCat("g", i));
    UpsertAABoard(boards.back());
  }
  const int64_t job = Submit(150);  // 2 cells x 150: a run for each of the 300 boards
  std::vector<size_t> group_sizes;
  std::map<std::string, int64_t> run_of;
  size_t delivered = 0;
  auto status = store_->work().DecideWorkForBoards(boards, [&](WorkStore::BoardOrders&& group) {
    group_sizes.push_back(group.size());
    delivered += group.size();
    // Delivered once committed: another connection sees every claim delivered so far.
    EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'assigned'"),
              static_cast<int64_t>(delivered));
    for (auto& [board, order] : group) {
      ASSERT_TRUE(order.run.has_value()) << board;
      EXPECT_TRUE(run_of.emplace(board, order.run->run_id).second) << board << " served twice";
    }
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_GE(group_sizes.size(), 3u);
  for (size_t n : group_sizes) EXPECT_GT(n, 0u);
  EXPECT_EQ(run_of.size(), 300u);
  std::set<int64_t> runs;
  for (const auto& [board, run] : run_of) runs.insert(run);
  EXPECT_EQ(runs.size(), 300u);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'assigned' AND board IS NOT NULL"), 300);
  EXPECT_EQ(store_->jobs().GetJob(job)->state, JobState::kRunning);
  auto again = testing::NextWorkForBoards(store_->work(), boards);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());  // every board is busy
}

TEST_F(StoreTest, ResultWithWrongSampleCountBecomesAFailure) {
  int64_t job = Submit(1);
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  ASSERT_TRUE(testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, true, "",
                                   GoodResult(2))
                  .ok());
  auto runs = store_->jobs().ListRuns(job);
  ASSERT_TRUE(runs.ok());
  auto it = std::find_if(runs->begin(), runs->end(),
                         [&](const RunRecord& r) { return r.id == (*a)->run_id; });
  ASSERT_NE(it, runs->end());
  EXPECT_EQ(it->state, RunState::kFailed);
  EXPECT_NE(it->failure_reason.find("expected samples for seconds 1..3"), std::string::npos);
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 0);
}

TEST_F(StoreTest, OnlyTheRunningKernelIsServed) {
  Submit(1, {"patched"});
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->has_value());
}

TEST_F(StoreTest, CancelStopsRunningAttemptsAndRefusesTheirResults) {
  int64_t job = Submit(2);
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  auto cancelled = store_->jobs().CancelJob(job);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->counts.cancelled, 4u);
  EXPECT_FALSE(*store_->work().RenewLease("box", (*a)->run_id, (*a)->attempt_id));
  auto late = testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, true, "",
                                   GoodResult(3));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->jobs().CancelJob(job).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->jobs().GetJob(job + 100).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, LapsedLeaseRequeuesThenFailsAsLost) {
  int64_t job = Submit(1);
  std::string first_attempt;
  int64_t run_id = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto a = ClaimRun("box");
    ASSERT_TRUE(a.ok() && a->has_value());
    if (attempt == 1) {
      first_attempt = (*a)->attempt_id;
      run_id = (*a)->run_id;
    }
    ASSERT_EQ((*a)->run_id, run_id) << "the requeued run comes first";
    {
      pqxx::connection c(url_);
      pqxx::work w(c);
      w.exec(
          "UPDATE runs SET lease_expires_at = now() - interval '1 second' "
          "WHERE state IN ('assigned', 'running')");
      w.commit();
    }
    auto reaped = store_->work().ReapExpiredLeases();
    ASSERT_TRUE(reaped.ok()) << reaped.status();
    EXPECT_EQ(*reaped, std::vector<int64_t>{job});
    if (attempt == 3) break;
    // Requeued with a backoff of 30 s · 2^(attempt − 1), jittered into [50%, 100%].
    const double wait =
        static_cast<double>(Count(
            "SELECT extract(epoch FROM not_before - now())::bigint * 1000 FROM runs WHERE id = " +
            std::to_string(run_id))) /
        1000;
    const double full = 30.0 * (1 << (attempt - 1));
    EXPECT_GE(wait, full / 2 - 2) << "attempt " << attempt;
    EXPECT_LE(wait, full + 1) << "attempt " << attempt;
    auto early = ClaimRun("box");
    ASSERT_TRUE(early.ok());
    if (early->has_value()) {  // the job's other run may go meanwhile, never this one
      ASSERT_NE((*early)->run_id, run_id) << "offered again before its backoff";
      ASSERT_TRUE(testing::StoreResult(store_->work(), "box", (*early)->run_id,
                                       (*early)->attempt_id, true, "", GoodResult(3))
                      .ok());
    }
    {  // the backoff passes (the database's clock, moved by hand)
      pqxx::connection c(url_);
      pqxx::work w(c);
      w.exec(
          "UPDATE runs SET not_before = now() - interval '1 second' WHERE not_before IS NOT NULL");
      w.commit();
    }
  }
  auto runs = store_->jobs().ListRuns(job);
  ASSERT_TRUE(runs.ok());
  const RunRecord* lost = nullptr;
  for (const auto& r : *runs) {
    if (r.id == run_id) lost = &r;
  }
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->state, RunState::kFailed);
  EXPECT_EQ(lost->attempt, 3);
  EXPECT_NE(lost->failure_reason.find("lost"), std::string::npos);
  auto stale =
      testing::StoreResult(store_->work(), "box", run_id, first_attempt, true, "", GoodResult(3));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, RunsAreClaimedInPlannedOrderAndAALabelsShareOneKernel) {
  // The board runs one kernel under two labels: an A/A study needs no reboot.
  UpsertAABoard("box");
  int64_t job = Submit(2, {"vanilla", "patched"});
  std::vector<std::string> kernels;
  for (int i = 0; i < 8; ++i) {
    auto a = ClaimRun("box");
    ASSERT_TRUE(a.ok() && a->has_value()) << i;
    kernels.push_back((*a)->kernel);
    ASSERT_TRUE(testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, true,
                                     "", GoodResult(3))
                    .ok());
  }
  // Blocks of one repetition: A A (2 cells), B B, A A, B B.
  EXPECT_EQ(kernels, (std::vector<std::string>{"vanilla", "vanilla", "patched", "patched",
                                               "vanilla", "vanilla", "patched", "patched"}));
  EXPECT_EQ(store_->jobs().GetJob(job)->state, JobState::kSucceeded);
}

TEST_F(StoreTest, EachBoardJobsPinOneCopyOfEveryRunToEachBoard) {
  UpsertAABoard("other");
  const int64_t job =
      Submit(2, {"vanilla", "patched"}, 1, {}, [](JobSpecInput& s) { s.each_board = true; });
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE job_id = " + std::to_string(job)),
            2 * 2 * 2 * 2);
  // Each board drains only its own copies: box serves vanilla only (it runs no other and
  // cannot boot one), so its two vanilla runs of repetition 1 come first, then it must wait.
  for (const std::string board : {"box", "other"}) {
    for (int i = 0; i < 2; ++i) {
      auto a = ClaimRun(board);
      ASSERT_TRUE(a.ok() && a->has_value()) << board;
      EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE id = " + std::to_string((*a)->run_id) +
                      " AND boards = '[\"" + board + "\"]'::jsonb"),
                1)
          << board << " got another board's run";
      ASSERT_TRUE(testing::StoreResult(store_->work(), board, (*a)->run_id, (*a)->attempt_id, true,
                                       "", GoodResult(3))
                      .ok());
    }
  }
  EXPECT_EQ(Count("SELECT count(DISTINCT boards) FROM runs WHERE job_id = " + std::to_string(job)),
            2);
}

// A job's run options are stored once (jobs.run_options) and every assignment carries them
// whole; the older columns are written beside them for a controller from before.
TEST_F(StoreTest, AssignmentsCarryTheJobsRunOptionsWhole) {
  const int64_t plain = Submit(1);
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->job_id, plain);
  EXPECT_EQ((*a)->run_options, "{}");
  ASSERT_TRUE(store_->jobs().CancelJob(plain).ok());  // its other run must not come next
  const std::string given = R"({"events":["mmap_lock:mmap_lock_start_locking","sw:page-faults"],)"
                            R"("mmap_lock_waits":true,"profile":{"frequency_hz":997,"pmu":true}})";
  const int64_t measured =
      Submit(1, {"vanilla"}, 0, {}, [&](JobSpecInput& s) { s.run_options = given; });
  a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->job_id, measured);
  EXPECT_EQ(nlohmann::json::parse((*a)->run_options), nlohmann::json::parse(given));
  const std::string job = std::to_string(measured);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE id = " + job +
                  R"sql( AND events = '["mmap_lock:mmap_lock_start_locking", "sw:page-faults"]'
                     AND mmap_lock_waits AND profile_hz = 997 AND profile_pmu)sql"),
            1)
      << "the older columns, for a rollback";
}

// Adaptive repetitions: pairs are added block by block to the cells whose CI is still wide,
// until it is narrow enough or max_repetitions is reached.
TEST_F(StoreTest, AdaptiveRepetitionsAddPairsUntilTheCiIsNarrowOrAtTheMaximum) {
  UpsertAABoard("aa");
  const int64_t job = Submit(2, {"vanilla", "patched"}, 1, {"aa"}, [](JobSpecInput& spec) {
    spec.max_repetitions = 6;
    spec.target_ci_half_width = 0.05;
  });
  std::map<std::pair<std::string, std::string>, int> runs_of;  // (threads, kernel) -> runs
  for (int step = 0; step < 100; ++step) {
    auto a = ClaimRun("aa");
    ASSERT_TRUE(a.ok()) << a.status();
    if (!a->has_value()) break;
    const Assignment& run = **a;
    const std::string threads = run.params.at("threads");
    const int n = ++runs_of[{threads, run.kernel}];
    ResultRecord r = GoodResult(3);
    // threads=2: ±15% run to run, never narrow enough; threads=4: identical, narrow as soon
    // as the exact CI exists (4 per side).
    r.throughput = threads == "4" ? 10 : (n % 2 ? 10 : 13) * (run.kernel == "patched" ? 1.1 : 1.0);
    ASSERT_TRUE(
        testing::StoreResult(store_->work(), "aa", run.run_id, run.attempt_id, true, "", r).ok());
  }
  EXPECT_EQ((runs_of[{"2", "vanilla"}]), 6);
  EXPECT_EQ((runs_of[{"2", "patched"}]), 6);
  EXPECT_EQ((runs_of[{"4", "vanilla"}]), 4);
  EXPECT_EQ((runs_of[{"4", "patched"}]), 4);
  EXPECT_EQ(store_->jobs().GetJob(job)->state, JobState::kSucceeded);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE job_id = " + std::to_string(job)), 20);
  // The added runs kept the planned shape. Sequence dense: exactly 0..19, no gaps, no twins.
  const std::string of_job = " FROM runs WHERE job_id = " + std::to_string(job);
  EXPECT_EQ(Count("SELECT count(DISTINCT sequence)" + of_job), 20);
  EXPECT_EQ(Count("SELECT min(sequence)" + of_job), 0);
  EXPECT_EQ(Count("SELECT max(sequence)" + of_job), 19);
  // Kernel blocks alternate: 4 planned blocks per kernel of both cells (v v p p ...), then
  // the added one-cell blocks, still vanilla first, then patched, twice.
  EXPECT_EQ(Text("SELECT string_agg(left(kernel, 1), '' ORDER BY sequence)" + of_job),
            "vvppvvppvvppvvppvpvp");
  // Inside every planned block each cell appears once (the cells are shuffled, not repeated).
  EXPECT_EQ(Count("SELECT count(*) FROM (SELECT sequence / 2 AS block, cell_index" + of_job +
                  " AND sequence < 16 GROUP BY 1, 2 HAVING count(*) > 1) dup"),
            0);
  // The added blocks are of the cell that was still wide (threads=2) only.
  EXPECT_EQ(
      Text("SELECT string_agg(DISTINCT cell->>'threads', ',')" + of_job + " AND sequence >= 16"),
      "2");
}

}  // namespace
}  // namespace faultline::controller
