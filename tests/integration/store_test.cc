// PgStore against a real PostgreSQL 15 (throwaway cluster started by the harness).
// Longer than our ~600-line guide on purpose: every test shares one fixture (a fresh
// database per test on one cluster) and the scheduler scenarios need the fixture's helpers;
// split it by interface when a new area adds more than a test or two.
#include "services/controller/storage/pg_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/controller/core/validation.h"
#include "services/controller/storage/migrations.h"
#include "services/controller/storage/pg_pool.h"
#include "tests/support/pg_cluster.h"

namespace faultline::controller {
namespace {

using faultline::testing::FreshDatabase;
using faultline::testing::PgSkipReason;
using faultline::testing::PgUrl;

// A database as a controller of schema version `below` - 1 left it, for upgrade tests.
void MigrateBelow(pqxx::work& w, int below) {
  w.exec(R"sql(CREATE TABLE schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()))sql");
  for (const auto& m : Migrations()) {
    if (m.version >= below) break;
    w.exec(m.sql);
    w.exec_params(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
        m.version, m.name, m.sql);
  }
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FAULTLINE_REQUIRE_PG();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    url_ = FreshDatabase(std::string("t_") + info->name());
    StoreOptions options;
    options.database_url = url_;
    store_ = std::make_unique<PgStore>(options);
    ASSERT_TRUE(store_->Migrate().ok());
    BoardRecord board;
    board.summary = {.name = "box",
                     .arch = "x86_64",
                     .memory_bytes = 8ull << 30,
                     .kernel_labels = {"vanilla", "patched"},
                     .running_kernel_label = "vanilla",
                     .running_kernel_labels = {"vanilla"}};
    board.facts_json = R"({"name":"box"})";
    ASSERT_TRUE(store_->boards().UpsertBoard(board).ok());
  }

  int64_t Submit(uint32_t repetitions, std::vector<std::string> kernels = {"vanilla"},
                 uint32_t block_size = 0, std::vector<std::string> only_boards = {},
                 const std::function<void(JobSpecInput&)>& adjust = nullptr) {
    JobSpecInput spec;
    spec.block_size = block_size;
    spec.boards = std::move(only_boards);
    spec.benchmark = "filemap-thrash";
    spec.duration = "3s";
    spec.repetitions = repetitions;
    spec.kernels = std::move(kernels);
    spec.memory_max = "256M";
    spec.matrix = {{"threads", {"2", "4"}}};
    if (adjust) adjust(spec);
    auto boards = store_->boards().ListBoards();
    std::vector<BoardSummary> summaries;
    for (const auto& b : *boards) summaries.push_back(b.summary);
    auto job = ValidateJobSpec(spec, summaries);
    EXPECT_TRUE(job.ok()) << job.status();
    // The stored spec as the api layer writes it (only what the store reads of it).
    std::string kernel_list;
    for (const auto& k : spec.kernels)
      kernel_list += (kernel_list.empty() ? "\"" : ",\"") + k + "\"";
    auto id = store_->jobs().CreateJob(*job, "test", "{\"kernels\": [" + kernel_list + "]}", "");
    EXPECT_TRUE(id.ok()) << id.status();
    return id->job_id;
  }

  static ResultRecord GoodResult(int seconds) {
    ResultRecord r;
    r.throughput = 10;
    r.rounds = 10 * seconds;
    r.duration_seconds = seconds;
    for (int s = 1; s <= seconds; ++s) r.samples.emplace_back(s, 10);
    return r;
  }

  // A board running one kernel under both labels (vanilla, patched): no reboots needed.
  void UpsertAABoard(const std::string& name) {
    BoardRecord board;
    board.summary = {.name = name,
                     .arch = "x86_64",
                     .memory_bytes = 8ull << 30,
                     .kernel_labels = {"vanilla", "patched"},
                     .running_kernel_label = "vanilla",
                     .running_kernel_labels = {"vanilla", "patched"}};
    board.facts_json = "{}";
    ASSERT_TRUE(store_->boards().UpsertBoard(board).ok());
  }

  // The run NextWork hands a board that runs the run's kernel.
  absl::StatusOr<std::optional<Assignment>> ClaimRun(const std::string& board) {
    auto next = store_->work().NextWork(board);
    if (!next.ok()) return next.status();
    return std::move(next->run);
  }

  int64_t Count(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int64_t>();
  }
  std::string Text(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<std::string>();
  }

  // The job finished, succeeded, with `runs` runs succeeded.
  void ExpectSucceeded(int64_t job_id, uint32_t runs) {
    auto done = store_->jobs().GetJob(job_id);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state, JobState::kSucceeded);
    EXPECT_EQ(done->counts.succeeded, runs);
    EXPECT_NE(done->finished_at_ms, 0);
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(StoreTest, MigrationsAreIdempotentAndChecksummed) {
  EXPECT_TRUE(store_->Migrate().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM schema_migrations"),
            static_cast<int64_t>(Migrations().size()));
  // Grafana's role reads but never writes.
  EXPECT_EQ(Count("SELECT count(*) FROM pg_roles WHERE rolname = 'faultline_grafana'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM information_schema.role_table_grants "
                  "WHERE grantee = 'faultline_grafana' AND privilege_type <> 'SELECT'"),
            0);
  {
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec("UPDATE schema_migrations SET checksum = 'tampered' WHERE version = 1");
    w.commit();
  }
  absl::Status s = store_->Migrate();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("must never change"), std::string::npos);
}

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
  auto stale = store_->work().StoreResult("box", a.run_id, "00000000-0000-0000-0000-000000000000",
                                          true, "", GoodResult(3));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  auto other_board =
      store_->work().StoreResult("other", a.run_id, a.attempt_id, true, "", GoodResult(3));
  EXPECT_EQ(other_board.status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(
      store_->work().StoreResult("box", a.run_id, a.attempt_id, true, "", GoodResult(3)).ok());
  // A repeated upload is acknowledged and not stored twice.
  ASSERT_TRUE(
      store_->work().StoreResult("box", a.run_id, a.attempt_id, true, "", GoodResult(3)).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM samples"), 3);

  auto second = ClaimRun("box");
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_NE((*second)->params.at("threads"), first_threads);
  ASSERT_TRUE(
      store_->work()
          .StoreResult("box", (*second)->run_id, (*second)->attempt_id, true, "", GoodResult(3))
          .ok());
  ExpectSucceeded(job, 2);
}

// Migration 18 moves each result's per-second samples into one row (arrays); the rows a
// database held before read back the same through the samples view.
TEST_F(StoreTest, SamplesKeptBeforeMigration18ReadBackTheSame) {
  const std::string url = FreshDatabase("t_samples_before_18");
  {
    pqxx::connection c(url);
    pqxx::work w(c);
    MigrateBelow(w, 18);
    w.exec("SET LOCAL session_replication_role = replica");  // rows without their parents
    w.exec(R"sql(
      INSERT INTO results (run_id, attempt_id, board, throughput, rounds, duration_seconds,
                           warmup_seconds, counters, environment)
      VALUES (7, gen_random_uuid(), 'box', 20, 60, 3, 0, '{}', '{}'),
             (8, gen_random_uuid(), 'box', 5, 5, 1, 0, '{}', '{}'))sql");
    w.exec(
        "INSERT INTO samples VALUES (7, 2, 20, 200), (7, 1, 10, 100), (7, 3, 30, 300), "
        "(8, 1, 5, 0)");
    w.commit();
  }
  StoreOptions options;
  options.database_url = url;
  PgStore upgraded(options);
  ASSERT_TRUE(upgraded.Migrate().ok());
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT string_agg(run_id || ':' || second || ':' || rounds || ':' || pages, "
                   "' ' ORDER BY run_id, second) FROM samples")[0][0]
                .as<std::string>(),
            "7:1:10:100 7:2:20:200 7:3:30:300 8:1:5:0");
  EXPECT_EQ(n.exec("SELECT count(*) FROM run_samples")[0][0].as<int>(), 2);
  // The arrays are compressed with lz4 when the server has it (pglz cost 3x the COPY).
  const bool has_lz4 = n.exec(
                            "SELECT 'lz4' = ANY (enumvals) FROM pg_settings "
                            "WHERE name = 'default_toast_compression'")[0][0]
                           .as<bool>();
  if (has_lz4) {
    EXPECT_EQ(n.exec("SELECT string_agg(attcompression::text, '' ORDER BY attname) "
                     "FROM pg_attribute WHERE attrelid = 'run_samples'::regclass "
                     "AND attname IN ('rounds', 'pages')")[0][0]
                  .as<std::string>(),
              "ll");
  }
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
    stored =
        store_->work().StoreResult("box2", (*b)->run_id, (*b)->attempt_id, true, "", GoodResult(3));
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
  auto first = store_->work().NextWorkForBoards({"aa1", "box", "aa2", "nobody"});
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
  auto again = store_->work().NextWorkForBoards({"aa1", "box", "aa2"});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());

  // A board whose head needs a kernel it can only boot is told to switch; the run stays
  // queued and the next board, which runs that kernel, claims it.
  for (const auto& [board, order] : *first) {
    ASSERT_TRUE(
        store_->work()
            .StoreResult(board, order.run->run_id, order.run->attempt_id, true, "", GoodResult(3))
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
  auto mixed = store_->work().NextWorkForBoards({"boot", "aa2"});
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
  auto again = store_->work().NextWorkForBoards(boards);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());  // every board is busy
}

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
  Collector(pqxx::connection_base& c, const std::string& channel, std::vector<std::string>* seen)
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

TEST_F(StoreTest, ResultWithWrongSampleCountBecomesAFailure) {
  int64_t job = Submit(1);
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  ASSERT_TRUE(store_->work()
                  .StoreResult("box", (*a)->run_id, (*a)->attempt_id, true, "", GoodResult(2))
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
  auto late =
      store_->work().StoreResult("box", (*a)->run_id, (*a)->attempt_id, true, "", GoodResult(3));
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
      ASSERT_TRUE(
          store_->work()
              .StoreResult("box", (*early)->run_id, (*early)->attempt_id, true, "", GoodResult(3))
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
  auto stale = store_->work().StoreResult("box", run_id, first_attempt, true, "", GoodResult(3));
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
    ASSERT_TRUE(store_->work()
                    .StoreResult("box", (*a)->run_id, (*a)->attempt_id, true, "", GoodResult(3))
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
      ASSERT_TRUE(store_->work()
                      .StoreResult(board, (*a)->run_id, (*a)->attempt_id, true, "", GoodResult(3))
                      .ok());
    }
  }
  EXPECT_EQ(Count("SELECT count(DISTINCT boards) FROM runs WHERE job_id = " + std::to_string(job)),
            2);
}

TEST_F(StoreTest, AssignmentsCarryTheJobsPerfEvents) {
  const int64_t plain = Submit(1);
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->job_id, plain);
  EXPECT_TRUE((*a)->events.empty());
  ASSERT_TRUE(store_->jobs().CancelJob(plain).ok());  // its other run must not come next
  const int64_t counted = Submit(1, {"vanilla"}, 0, {}, [](JobSpecInput& s) {
    s.events = {"mmap_lock:mmap_lock_start_locking", "sw:page-faults"};
  });
  a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->job_id, counted);
  EXPECT_EQ((*a)->events,
            (std::vector<std::string>{"mmap_lock:mmap_lock_start_locking", "sw:page-faults"}));
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

TEST_F(StoreTest, ChangePointsAreStoredOnceAndTrackedByState) {
  // Six finished jobs of one series, the last three 20% slower.
  int64_t first = 0;
  for (int j = 0; j < 6; ++j) {
    int64_t job = Submit(1);
    if (j == 0) first = job;
    for (int r = 0; r < 2; ++r) {
      auto a = ClaimRun("box");
      ASSERT_TRUE(a.ok() && a->has_value());
      ResultRecord res = GoodResult(3);
      res.throughput = j < 3 ? 100 : 80;
      ASSERT_TRUE(
          store_->work().StoreResult("box", (*a)->run_id, (*a)->attempt_id, true, "", res).ok());
    }
  }
  auto histories = store_->history().SeriesHistories(4);
  ASSERT_TRUE(histories.ok()) << histories.status();
  ASSERT_EQ(histories->size(), 2u);  // threads=2 and threads=4
  EXPECT_EQ((*histories)[0].medians, (std::vector<double>{100, 100, 100, 80, 80, 80}));
  EXPECT_EQ((*histories)[0].job_ids.front(), first);
  ChangePointRecord cp;
  cp.study = "test";
  cp.benchmark = "filemap-thrash";
  cp.config = "threads=2";
  cp.arch = "x86_64";
  cp.board = "box";
  cp.kernel = "vanilla";
  cp.job_id = (*histories)[0].job_ids[3];
  cp.mean_before = 100;
  cp.mean_after = 80;
  cp.relative_change = -0.2;
  cp.p_value = 1e-6;
  EXPECT_EQ(*store_->history().RecordChangePoints({cp}), 1);
  EXPECT_EQ(*store_->history().RecordChangePoints({cp}), 0);  // found again: not stored twice
  auto open = store_->history().ListChangePoints(false);
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ(store_->history().Snapshot()->open_change_points.size(), 1u);
  auto fixed = store_->history().SetChangePointState((*open)[0].id, ChangePointState::kFixed);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->state, ChangePointState::kFixed);
  EXPECT_TRUE(store_->history().ListChangePoints(false)->empty());
  EXPECT_EQ(store_->history().ListChangePoints(true)->size(), 1u);
  EXPECT_TRUE(store_->history().Snapshot()->open_change_points.empty());
}

// A finished job's medians are kept when it finishes; a scrape reads them, and aggregates
// results only of jobs still running.
TEST_F(StoreTest, AScrapeReadsFinishedJobsMediansAndLiveOnesOfRunningJobs) {
  auto store_run = [&](double throughput) -> std::string {
    auto a = ClaimRun("box");
    EXPECT_TRUE(a.ok() && a->has_value());
    ResultRecord res = GoodResult(3);
    res.throughput = throughput;
    EXPECT_TRUE(
        store_->work().StoreResult("box", (*a)->run_id, (*a)->attempt_id, true, "", res).ok());
    return (*a)->params.at("threads");
  };
  auto medians = [&]() {
    std::map<std::string, double> out;  // threads -> median
    auto snap = store_->history().Snapshot();
    EXPECT_TRUE(snap.ok()) << snap.status();
    for (const auto& p : snap->series) {
      EXPECT_EQ(p.study, "test");
      EXPECT_EQ(p.arch, "x86_64");
      out[p.cell.at("threads")] = p.median;
    }
    return out;
  };
  const int64_t first = Submit(1);
  const std::string a = store_run(100);
  EXPECT_EQ(medians(), (std::map<std::string, double>{{a, 100}}));  // running: live
  EXPECT_EQ(Count("SELECT count(*) FROM job_series_medians"), 0);
  const std::string b = store_run(120);
  ASSERT_EQ(store_->jobs().GetJob(first)->state, JobState::kSucceeded);
  EXPECT_EQ(Count("SELECT count(*) FROM job_series_medians"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM series_latest"), 2);
  EXPECT_EQ(medians(), (std::map<std::string, double>{{a, 100}, {b, 120}}));
  // Scrapes no longer read a finished job's results.
  {
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec("DELETE FROM results");
    w.commit();
  }
  EXPECT_EQ(medians(), (std::map<std::string, double>{{a, 100}, {b, 120}}));
  // A newer job still running shows its live median where it has one.
  const int64_t second = Submit(1);
  const std::string c = store_run(50);
  auto expected = std::map<std::string, double>{{a, 100}, {b, 120}};
  expected[c] = 50;
  EXPECT_EQ(medians(), expected);
  store_run(60);
  ASSERT_EQ(store_->jobs().GetJob(second)->state, JobState::kSucceeded);
  EXPECT_EQ(medians(), (std::map<std::string, double>{{c, 50}, {c == a ? b : a, 60}}));
  // The change-point scan reads the kept medians too: both jobs, in job order.
  auto histories = store_->history().SeriesHistories(2);
  ASSERT_TRUE(histories.ok()) << histories.status();
  ASSERT_EQ(histories->size(), 2u);
  for (const auto& h : *histories) EXPECT_EQ(h.job_ids, (std::vector<int64_t>{first, second}));
}

// A finished multi-kernel job is pending until its comparisons are stored for the version
// it is at; a scrape shows the newest summarized job of each study.
TEST_F(StoreTest, ComparisonsAreSummarizedOncePerJobVersion) {
  UpsertAABoard("aa");
  auto finish = [&](int64_t job) {
    for (int r = 0; r < 4; ++r) {
      auto next = store_->work().NextWork("aa");
      ASSERT_TRUE(next.ok() && next->run.has_value());
      ASSERT_TRUE(
          store_->work()
              .StoreResult("aa", next->run->run_id, next->run->attempt_id, true, "", GoodResult(3))
              .ok());
    }
    ASSERT_EQ(store_->jobs().GetJob(job)->state, JobState::kSucceeded);
  };
  EXPECT_TRUE(store_->history().PendingComparisons(10)->empty());
  Submit(1, {"vanilla"}, 0, {"box"});  // one kernel: never pending
  const int64_t job = Submit(1, {"vanilla", "patched"}, 0, {"aa"});
  auto pending = store_->history().PendingComparisons(10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_TRUE(pending->empty());  // not finished
  finish(job);
  pending = store_->history().PendingComparisons(10);
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].job_id, job);
  const int64_t finished_ms = store_->jobs().GetJob(job)->finished_at_ms;
  EXPECT_EQ((*pending)[0].finished_ms, finished_ms);

  JobComparisons summary;
  summary.job_id = job;
  summary.finished_ms = finished_ms - 1;  // a version the job is not at
  ComparisonSummary c;
  c.cell = {{"threads", "2"}};
  c.board = "aa";
  c.baseline = "vanilla";
  c.candidate = "patched";
  c.ratio = std::numeric_limits<double>::quiet_NaN();
  c.ci_low = -std::numeric_limits<double>::infinity();
  c.ci_high = 1.5;
  c.p_value = 0.01;
  c.q_value = 0.02;
  c.verdict = "inconclusive";
  c.n_baseline = 3;
  c.n_candidate = 4;
  c.counters.push_back({"vmstat.pgfault", "round", 0.5, 0.4, 0.6});
  summary.comparisons.push_back(c);
  EXPECT_FALSE(*store_->history().StoreComparisons(summary));
  summary.finished_ms = finished_ms;
  EXPECT_TRUE(*store_->history().StoreComparisons(summary));
  EXPECT_TRUE(store_->history().PendingComparisons(10)->empty());

  auto snap = store_->history().Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_EQ(snap->comparison_jobs.size(), 1u);
  EXPECT_EQ(snap->comparison_jobs[0], (JobVersion{job, finished_ms}));
  EXPECT_EQ(store_->history().LoadComparisons({job, finished_ms - 1}).status().code(),
            absl::StatusCode::kNotFound);
  auto loaded = store_->history().LoadComparisons({job, finished_ms});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const JobComparisons& got = *loaded;
  EXPECT_EQ(got.job_id, job);
  EXPECT_EQ(got.study, "test");
  EXPECT_EQ(got.benchmark, "filemap-thrash");
  ASSERT_EQ(got.comparisons.size(), 1u);
  const ComparisonSummary& g = got.comparisons[0];
  EXPECT_EQ(g.cell, c.cell);
  EXPECT_EQ(g.board, "aa");
  EXPECT_TRUE(std::isnan(g.ratio));
  EXPECT_EQ(g.ci_low, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(g.ci_high, 1.5);
  EXPECT_EQ(g.q_value, 0.02);
  EXPECT_EQ(g.verdict, "inconclusive");
  EXPECT_EQ(g.n_candidate, 4);
  ASSERT_EQ(g.counters.size(), 1u);
  EXPECT_EQ(g.counters[0].name, "vmstat.pgfault");
  EXPECT_EQ(g.counters[0].ci_high, 0.6);

  // A newer job of the same study replaces it once summarized.
  const int64_t newer = Submit(1, {"vanilla", "patched"}, 0, {"aa"});
  finish(newer);
  EXPECT_EQ(store_->history().Snapshot()->comparison_jobs[0].job_id, job);
  summary.job_id = newer;
  summary.finished_ms = store_->jobs().GetJob(newer)->finished_at_ms;
  EXPECT_TRUE(*store_->history().StoreComparisons(summary));
  snap = store_->history().Snapshot();
  ASSERT_EQ(snap->comparison_jobs.size(), 1u);
  EXPECT_EQ(snap->comparison_jobs[0].job_id, newer);
}

// /metrics' runs by state: the same counts as a scan of every run, from the open runs, the
// live jobs' runs and the counts a finished job keeps.
TEST_F(StoreTest, RunsByStateAreExactWithoutScanningTheHistory) {
  const auto expect_exact = [&](const char* when) {
    auto snap = store_->history().Snapshot();
    ASSERT_TRUE(snap.ok()) << snap.status();
    std::map<std::string, int64_t> scanned;
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    for (const auto& r : n.exec("SELECT state, count(*) FROM runs GROUP BY state")) {
      scanned[r[0].as<std::string>()] = r[1].as<int64_t>();
    }
    std::map<std::string, int64_t> reported;
    for (const auto& [state, count] : snap->runs_by_state) {
      if (count != 0) reported[state] = count;
    }
    EXPECT_EQ(reported, scanned) << when;
  };
  const int64_t done = Submit(1);  // 2 runs
  for (int i = 0; i < 2; ++i) {
    auto a = ClaimRun("box");
    ASSERT_TRUE(a.ok() && a->has_value());
    ASSERT_TRUE(store_->work()
                    .StoreResult("box", (*a)->run_id, (*a)->attempt_id, i == 0, "", GoodResult(3))
                    .ok());
  }
  ASSERT_TRUE(IsFinal(store_->jobs().GetJob(done)->state));
  expect_exact("a finished job with a success and a failure");
  const int64_t cancelled = Submit(2);  // 4 runs, one of them claimed
  ASSERT_TRUE(ClaimRun("box").ok());
  ASSERT_TRUE(store_->jobs().CancelJob(cancelled).ok());
  expect_exact("and a cancelled job");
  Submit(2);  // live: one run succeeded, one running, two queued
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  ASSERT_TRUE(store_->work()
                  .StoreResult("box", (*a)->run_id, (*a)->attempt_id, true, "", GoodResult(3))
                  .ok());
  auto b = ClaimRun("box");
  ASSERT_TRUE(b.ok() && b->has_value());
  ASSERT_TRUE(store_->work().RenewLease("box", (*b)->run_id, (*b)->attempt_id).ok());
  expect_exact("and a live job");
  EXPECT_EQ(Count("SELECT runs_succeeded FROM jobs WHERE id = " + std::to_string(done)), 1);
  EXPECT_EQ(Count("SELECT runs_failed FROM jobs WHERE id = " + std::to_string(done)), 1);
  EXPECT_EQ(Count("SELECT runs_cancelled FROM jobs WHERE id = " + std::to_string(cancelled)), 4);
}

// Jobs finished before migration 20 get their counts from the migration.
TEST_F(StoreTest, JobsFinishedBeforeMigration20KeepTheirRunCounts) {
  const std::string url = FreshDatabase("t_counts_before_20");
  {
    pqxx::connection c(url);
    pqxx::work w(c);
    MigrateBelow(w, 20);
    w.exec(R"sql(
      INSERT INTO jobs (id, benchmark, spec, matrix_keys, duration_seconds, memory_max, state)
      VALUES (1, 'filemap-thrash', '{}', '[]', 3, 268435456, 'failed'),
             (2, 'filemap-thrash', '{}', '[]', 3, 268435456, 'running'))sql");
    w.exec(R"sql(
      INSERT INTO runs (job_id, cell_index, cell, params, kernel, repetition, state, sequence)
      VALUES (1, 0, '{}', '{}', 'vanilla', 1, 'succeeded', 0),
             (1, 0, '{}', '{}', 'vanilla', 2, 'failed', 1),
             (1, 0, '{}', '{}', 'vanilla', 3, 'cancelled', 2),
             (2, 0, '{}', '{}', 'vanilla', 1, 'succeeded', 0),
             (2, 0, '{}', '{}', 'vanilla', 2, 'queued', 1))sql");
    w.commit();
  }
  StoreOptions options;
  options.database_url = url;
  PgStore upgraded(options);
  ASSERT_TRUE(upgraded.Migrate().ok());
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  auto kept = n.exec("SELECT runs_succeeded, runs_failed, runs_cancelled FROM jobs WHERE id = 1");
  EXPECT_EQ(kept[0][0].as<int>(), 1);
  EXPECT_EQ(kept[0][1].as<int>(), 1);
  EXPECT_EQ(kept[0][2].as<int>(), 1);
  EXPECT_TRUE(n.exec("SELECT runs_succeeded FROM jobs WHERE id = 2")[0][0].is_null());
  auto snap = upgraded.history().Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->runs_by_state["succeeded"], 2);
  EXPECT_EQ(snap->runs_by_state["failed"], 1);
  EXPECT_EQ(snap->runs_by_state["cancelled"], 1);
  EXPECT_EQ(snap->runs_by_state["queued"], 1);
}

TEST_F(StoreTest, HelloReleasesRunsOfARestartedAgent) {
  Submit(1);
  auto a = ClaimRun("box");
  ASSERT_TRUE(a.ok() && a->has_value());
  auto released = store_->boards().ReleaseBoardRuns("box");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(*released, 1);
  auto again = ClaimRun("box");
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->run_id, (*a)->run_id);
  EXPECT_NE((*again)->attempt_id, (*a)->attempt_id);
}

// A board that can boot both kernels, as its agent says hello.
HealthVerdict DualHello(PgStore& store, const std::string& running, const std::string& boot_id,
                        BoardHealth health = BoardHealth::kOk, const std::string& reason = "") {
  BoardRecord b;
  b.summary.name = "dual";
  b.summary.arch = "x86_64";
  b.summary.memory_bytes = 8ull << 30;
  b.summary.kernel_labels = {"vanilla", "patched"};
  b.summary.bootable_kernel_labels = {"vanilla", "patched"};
  if (!running.empty()) {
    b.summary.running_kernel_label = running;
    b.summary.running_kernel_labels = {running};
  }
  b.summary.boot_id = boot_id;
  b.summary.health = health;
  b.summary.health_reason = reason;
  b.facts_json = R"({"name":"dual"})";
  auto h = store.boards().UpsertBoard(b);
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *h : HealthVerdict{};
}

BoardSummary BoardNamed(PgStore& store, const std::string& name) {
  auto boards = store.boards().ListBoards();
  EXPECT_TRUE(boards.ok());
  for (const auto& b : *boards) {
    if (b.summary.name == name) return b.summary;
  }
  ADD_FAILURE() << "no board " << name;
  return {};
}

// A fake agent drives the real scheduler: it reboots when told, runs what it is given and
// checks that every run is on the kernel it runs. Reboots = kernel blocks - 1.
class KernelSwitchScheduling : public StoreTest, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(KernelSwitchScheduling, BlocksAlternateWithOneRebootPerBlockAndNoRunOnTheWrongKernel) {
  const uint32_t block_size = GetParam();
  const uint32_t repetitions = 4;
  DualHello(*store_, "vanilla", "boot-0");
  int64_t job = Submit(repetitions, {"vanilla", "patched"}, block_size, {"dual"});
  std::string running = "vanilla";
  int boots = 0;
  std::vector<std::string> kernels_run;
  for (int step = 0; step < 100; ++step) {
    auto next = store_->work().NextWork("dual");
    ASSERT_TRUE(next.ok()) << next.status();
    if (next->kernel_switch) {
      const KernelSwitchOrder& order = *next->kernel_switch;
      EXPECT_NE(order.label, running) << "a switch to the kernel already running";
      EXPECT_EQ(BoardNamed(*store_, "dual").health, BoardHealth::kSwitching);
      // While the board reboots it is offered nothing.
      auto meanwhile = store_->work().NextWork("dual");
      ASSERT_TRUE(meanwhile.ok());
      EXPECT_FALSE(meanwhile->run || meanwhile->kernel_switch);
      running = order.label;
      EXPECT_EQ(DualHello(*store_, running, "boot-" + std::to_string(++boots)).health,
                BoardHealth::kOk);
      continue;
    }
    if (!next->run) break;
    const Assignment& a = *next->run;
    ASSERT_EQ(a.kernel, running) << "run " << a.run_id << " offered on the wrong kernel";
    kernels_run.push_back(a.kernel);
    ASSERT_TRUE(
        store_->work().StoreResult("dual", a.run_id, a.attempt_id, true, "", GoodResult(3)).ok());
  }
  // 2 cells x 2 kernels x 4 repetitions, all done.
  ASSERT_EQ(kernels_run.size(), 16u);
  EXPECT_EQ(store_->jobs().GetJob(job)->state, JobState::kSucceeded);
  const uint32_t blocks = 2 * repetitions / block_size;
  EXPECT_EQ(boots, static_cast<int>(blocks) - 1);
  EXPECT_EQ(BoardNamed(*store_, "dual").kernel_switches, blocks - 1);
  // Kernel blocks of 2 cells x block_size repetitions, baseline first.
  for (size_t i = 0; i < kernels_run.size(); ++i) {
    const size_t block = i / (2 * block_size);
    EXPECT_EQ(kernels_run[i], block % 2 == 0 ? "vanilla" : "patched") << "position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, KernelSwitchScheduling, ::testing::Values(1u, 2u, 4u));

TEST_F(StoreTest, AFailedSwitchNeedsACheckAndTheBoardGetsNoRuns) {
  DualHello(*store_, "vanilla", "boot-1");
  Submit(1, {"patched"}, 0, {"dual"});
  auto order = store_->work().NextWork("dual");
  ASSERT_TRUE(order.ok() && order->kernel_switch);
  EXPECT_EQ(order->kernel_switch->label, "patched");
  EXPECT_NE(order->kernel_switch->reason.find("needs kernel patched"), std::string::npos);

  // Grub fell back to the default entry: a new boot, but on vanilla.
  HealthVerdict h = DualHello(*store_, "vanilla", "boot-2");
  EXPECT_EQ(h.health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(h.reason, "switch to 'patched': the board came back running [vanilla]");
  BoardSummary b = BoardNamed(*store_, "dual");
  EXPECT_EQ(b.health, BoardHealth::kNeedsCheck);
  auto nothing = store_->work().NextWork("dual");
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->run || nothing->kernel_switch);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'queued'"), 2);

  // The agent keeps reporting the check until an operator clears it on the board.
  EXPECT_EQ(
      DualHello(*store_, "vanilla", "boot-2", BoardHealth::kNeedsCheck, "checked by nobody").health,
      BoardHealth::kNeedsCheck);
  EXPECT_EQ(DualHello(*store_, "vanilla", "boot-2").health, BoardHealth::kOk);
  auto again = store_->work().NextWork("dual");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->kernel_switch);
  // This time the board did not reboot at all.
  HealthVerdict same = DualHello(*store_, "vanilla", "boot-2");
  EXPECT_EQ(same.health, BoardHealth::kNeedsCheck);
  EXPECT_NE(same.reason.find("did not reboot"), std::string::npos) << same.reason;
}

TEST_F(StoreTest, ASwitchThatNeverComesBackLapsesToNeedsCheck) {
  StoreOptions options;
  options.database_url = url_;
  options.kernel_switch_deadline_seconds = 0;  // lapses at once
  PgStore store(options);
  DualHello(store, "vanilla", "boot-1");
  Submit(1, {"patched"}, 0, {"dual"});
  auto order = store.work().NextWork("dual");
  ASSERT_TRUE(order.ok() && order->kernel_switch);
  auto lapsed = store.work().ExpireKernelSwitches();
  ASSERT_TRUE(lapsed.ok());
  EXPECT_EQ(*lapsed, std::vector<std::string>{"dual"});
  BoardSummary b = BoardNamed(store, "dual");
  EXPECT_EQ(b.health, BoardHealth::kNeedsCheck);
  EXPECT_NE(b.health_reason.find("no hello from the new kernel"), std::string::npos);
  EXPECT_TRUE(store.work().ExpireKernelSwitches()->empty());
  // A late hello on the right kernel from a new boot settles it after all.
  EXPECT_EQ(DualHello(store, "patched", "boot-2").health, BoardHealth::kOk);
  auto run = store.work().NextWork("dual");
  ASSERT_TRUE(run.ok() && run->run);
  EXPECT_EQ(run->run->kernel, "patched");
}

TEST_F(StoreTest, AnUndeliveredSwitchIsAbandoned) {
  DualHello(*store_, "vanilla", "boot-1");
  Submit(1, {"patched"}, 0, {"dual"});
  ASSERT_TRUE(store_->work().NextWork("dual")->kernel_switch);
  ASSERT_TRUE(store_->work().AbandonKernelSwitch("dual").ok());
  BoardSummary b = BoardNamed(*store_, "dual");
  EXPECT_EQ(b.health, BoardHealth::kOk);
  EXPECT_EQ(b.kernel_switches, 0u);
  EXPECT_TRUE(store_->work().NextWork("dual")->kernel_switch);  // ordered again
}

TEST_F(StoreTest, DatabaseRestartIsUnavailableThenHealsByItself) {
  int64_t before = Submit(1);
  ASSERT_TRUE(store_->jobs().ListJobs(10).ok());
  faultline::testing::HaltCluster();
  EXPECT_EQ(store_->jobs().ListJobs(10).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_->Ping().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ClaimRun("box").status().code(), absl::StatusCode::kUnavailable);
  faultline::testing::ResumeCluster();
  // No restart of the store: it reconnects on the next calls by itself. A pooled connection
  // from before the outage may fail one call; never more.
  int failures = 0;
  for (int i = 0; i < 3; ++i) failures += store_->jobs().ListJobs(10).ok() ? 0 : 1;
  EXPECT_LE(failures, 1);
  EXPECT_TRUE(store_->Ping().ok());
  // Nothing accepted before the outage was lost, and work goes on.
  auto job = store_->jobs().GetJob(before);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->counts.total, 2u);
  auto claimed = ClaimRun("box");
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.status();
  EXPECT_GT(Submit(1), before);
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
    ASSERT_TRUE(store_->work().StoreResult("aa", run.run_id, run.attempt_id, true, "", r).ok());
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

TEST_F(StoreTest, DatabaseDownIsUnavailable) {
  StoreOptions options;
  options.database_url = "postgresql://faultline@127.0.0.1:1/none?connect_timeout=2";
  PgStore dead(options);
  EXPECT_EQ(dead.Ping().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dead.jobs().ListJobs(10).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace faultline::controller
