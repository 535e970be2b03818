// PgStore against a real PostgreSQL 15 (tests/integration/store_fixture.h): History and metrics
// (pg_history.cc): change points, scrapes, comparison summaries.
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

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
          testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, true, "", res)
              .ok());
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
  cp.previous_job_id = (*histories)[0].job_ids[2];
  cp.mean_before = 100;
  cp.mean_after = 80;
  cp.relative_change = -0.2;
  cp.p_value = 1e-6;
  EXPECT_EQ(*store_->history().RecordChangePoints({cp}), 1);
  EXPECT_EQ(*store_->history().RecordChangePoints({cp}), 0);  // found again: not stored twice
  auto open = store_->history().ListChangePoints(false);
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].job_id, cp.job_id);
  EXPECT_EQ((*open)[0].previous_job_id, cp.previous_job_id);
  EXPECT_EQ(store_->history().Snapshot()->open_change_points.size(), 1u);
  auto fixed = store_->history().SetChangePointState((*open)[0].id, ChangePointState::kFixed);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->state, ChangePointState::kFixed);
  EXPECT_TRUE(store_->history().ListChangePoints(false)->empty());
  EXPECT_EQ(store_->history().ListChangePoints(true)->size(), 1u);
  EXPECT_TRUE(store_->history().Snapshot()->open_change_points.empty());
}

// A schedule on a branch runs each night's build under a label of its own
// ("LABEL@<hash>+<slot>"): the nights are one series, named without the slot.
TEST_F(StoreTest, NightlyLabelsOfABranchFormOneSeries) {
  const std::vector<std::string> nights = {"n@0123456789ab+20261202T0200",
                                           "n@0123456789ab+20261203T0200"};
  BoardRecord board;
  board.summary = {.name = "nb",
                   .arch = "x86_64",
                   .memory_bytes = 8ull << 30,
                   .kernel_labels = nights,
                   .running_kernel_label = nights[0],
                   .running_kernel_labels = nights};
  board.facts_json = "{}";
  ASSERT_TRUE(store_->boards().UpsertBoard(board).ok());
  std::vector<int64_t> jobs;
  for (const std::string& label : nights) {
    jobs.push_back(Submit(1, {label}, 0, {"nb"}));
    for (int r = 0; r < 2; ++r) {
      auto a = ClaimRun("nb");
      ASSERT_TRUE(a.ok() && a->has_value());
      EXPECT_EQ((*a)->kernel, label);
      ASSERT_TRUE(testing::StoreResult(store_->work(), "nb", (*a)->run_id, (*a)->attempt_id, true,
                                       "", GoodResult(3))
                      .ok());
    }
  }
  // A run's seconds as stored (GoodResult: 10 rounds in each of 3 seconds).
  auto samples = store_->jobs().RunSamples(jobs.back());
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  for (const auto& [run, seconds] : *samples) EXPECT_EQ(seconds, (std::vector<double>{10, 10, 10}));
  auto histories = store_->history().SeriesHistories(2);
  ASSERT_TRUE(histories.ok()) << histories.status();
  ASSERT_EQ(histories->size(), 2u);  // threads=2 and threads=4, both nights in each
  for (const auto& h : *histories) {
    EXPECT_EQ(h.key.kernel, "n@0123456789ab");
    EXPECT_EQ(h.job_ids, jobs);
  }
  auto snap = store_->history().Snapshot();
  ASSERT_TRUE(snap.ok());
  for (const auto& p : snap->series) EXPECT_EQ(p.kernel, "n@0123456789ab");
  // Other labels are their own series, '+' or not.
  EXPECT_EQ(Text("SELECT faultline_series_kernel('vanilla+20261203T0200')"),
            "vanilla+20261203T0200");
  EXPECT_EQ(Text("SELECT faultline_series_kernel('n@0123456789ab+20261203T02000')"),
            "n@0123456789ab+20261203T02000");
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
        testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, true, "", res)
            .ok());
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
      auto next = testing::NextWork(store_->work(), "aa");
      ASSERT_TRUE(next.ok() && next->run.has_value());
      ASSERT_TRUE(testing::StoreResult(store_->work(), "aa", next->run->run_id,
                                       next->run->attempt_id, true, "", GoodResult(3))
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
    ASSERT_TRUE(testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, i == 0,
                                     "", GoodResult(3))
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
  ASSERT_TRUE(testing::StoreResult(store_->work(), "box", (*a)->run_id, (*a)->attempt_id, true, "",
                                   GoodResult(3))
                  .ok());
  auto b = ClaimRun("box");
  ASSERT_TRUE(b.ok() && b->has_value());
  ASSERT_TRUE(store_->work().RenewLease("box", (*b)->run_id, (*b)->attempt_id).ok());
  expect_exact("and a live job");
  EXPECT_EQ(Count("SELECT runs_succeeded FROM jobs WHERE id = " + std::to_string(done)), 1);
  EXPECT_EQ(Count("SELECT runs_failed FROM jobs WHERE id = " + std::to_string(done)), 1);
  EXPECT_EQ(Count("SELECT runs_cancelled FROM jobs WHERE id = " + std::to_string(cancelled)), 4);
}

}  // namespace
}  // namespace faultline::controller
