// Counters in the A/B statistics (core/counters.h): per-round normalisation, the BH family
// of one comparison's counters, counters on one side only, pairing by repetition.
#include "services/controller/core/counters.h"
#include "services/controller/core/lock_wait_tables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace faultline::controller {
namespace {

RunCounters MakeRun(int repetition, double rounds, std::map<std::string, double> values,
                    double seconds = 10) {
  return RunCounters{repetition, rounds, seconds, std::move(values)};
}

const CounterComparison& Named(const std::vector<CounterComparison>& all, const std::string& name) {
  for (const auto& c : all) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << name << " not compared";
  static const CounterComparison none;
  return none;
}

TEST(CompareCounters, NormalisesPerRoundAndFindsTheCounterThatExplainsTheChange) {
  // Shaped like the seed: the series doubles throughput and almost removes failed retries,
  // while faults per round stay put.
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 6; ++i) {
    const double ra = 22'700 + 150 * i, rb = 54'000 + 300 * i;
    a.push_back(MakeRun(i + 1, ra,
                        {{"vmstat.retry_io_miss", 19.2 * ra + 3 * i},
                         {"vmstat.pgfault", 640 * ra + 7 * i},
                         {"memcg.peak_bytes", 1e8}}));
    b.push_back(MakeRun(i + 1, rb,
                        {{"vmstat.retry_io_miss", 0.37 * rb + 2 * i},
                         {"vmstat.pgfault", 640 * rb + 5 * (i % 2 ? 1 : -1) * i},
                         {"memcg.peak_bytes", 1e8}}));
  }
  const auto all = CompareCounters(a, b, /*paired=*/false, stats::CompareOptions{});
  ASSERT_EQ(all.size(), 2u) << "memcg.peak_bytes is a level, not compared";
  const auto& miss = all.front();
  EXPECT_EQ(miss.name, "vmstat.retry_io_miss") << "the significant change comes first";
  EXPECT_EQ(miss.unit, "round");
  EXPECT_NEAR(miss.median_a, 19.2, 0.01);
  EXPECT_NEAR(miss.median_b, 0.37, 0.01);
  EXPECT_NEAR(miss.ratio, 0.37 / 19.2, 0.002);
  EXPECT_LT(miss.ci_low, miss.ratio);
  EXPECT_GT(miss.ci_high, miss.ratio);
  EXPECT_LT(miss.ci_high, 0.05);
  EXPECT_TRUE(miss.significant);
  EXPECT_NEAR(miss.median_a_per_second, 19.2 * 23'075 / 10, 5);  // median rounds 23,075 in 10 s
  const auto& faults = Named(all, "vmstat.pgfault");
  EXPECT_NEAR(faults.ratio, 1.0, 0.001);
  EXPECT_FALSE(faults.significant) << "q " << faults.q_value;
}

TEST(CompareCounters, ACounterOnOneSideOnlyIsNamedNotRatioed) {
  std::vector<RunCounters> a = {MakeRun(1, 100, {{"vmstat.pgfault", 1000}}),
                                MakeRun(2, 100, {{"vmstat.pgfault", 1010}})};
  std::vector<RunCounters> b = {MakeRun(1, 100, {{"vmstat.pgfault", 990}, {"vmstat.new_debug", 5}}),
                                MakeRun(2, 100, {{"vmstat.pgfault", 1000}})};
  const auto all = CompareCounters(a, b, false, stats::CompareOptions{});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.back().name, "vmstat.new_debug");
  EXPECT_EQ(all.back().only_on, "candidate");
  EXPECT_TRUE(std::isnan(all.back().ratio));
  EXPECT_FALSE(all.back().significant);
  EXPECT_DOUBLE_EQ(all.back().median_b, 0.025);  // 5/100 and 0/100
}

TEST(CompareCounters, AFrameOnOneKernelsStacksOnlyIsTestedAsADifference) {
  // The hidden x86 patch: every fault takes mmap_lock, none tries the per-VMA lock. Runs
  // leave out frames under 0.1% of their samples, so the frame is absent, not unknown.
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 10; ++i) {
    a.push_back(MakeRun(i + 1, 1000,
                        {{"profile.total.lock_vma_under_rcu", 40.0 + i},
                         {"profile.total.handle_mm_fault", 500.0 + i}}));
    b.push_back(MakeRun(i + 1, 1000,
                        {{"profile.total.lock_mm_and_find_vma", 60.0 + i},
                         {"profile.total.handle_mm_fault", 505.0 - i}}));
  }
  const auto all = CompareCounters(a, b, /*paired=*/true, stats::CompareOptions{0.01});
  const auto& gone = Named(all, "profile.total.lock_vma_under_rcu");
  EXPECT_EQ(gone.only_on, "");
  EXPECT_TRUE(gone.significant) << "q " << gone.q_value;
  EXPECT_LT(gone.difference_high, 0);
  const auto& taken = Named(all, "profile.total.lock_mm_and_find_vma");
  EXPECT_TRUE(taken.significant) << "q " << taken.q_value;
  EXPECT_GT(taken.difference_low, 0);
  EXPECT_FALSE(Named(all, "profile.total.handle_mm_fault").significant);
}

// The frames are a family of their own: hundreds of them do not take a clear counter
// change below the bar (14 pairs: the least p is 1.2e-4; among 400 frames and a counter in
// one family it would need five others at that p).
TEST(CompareCounters, FramesDoNotDiluteTheCounters) {
  std::mt19937 rng(20261206);
  std::lognormal_distribution<double> noise(0.0, 0.2);
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 14; ++i) {
    RunCounters ra = MakeRun(i + 1, 300, {{"perf.mmap_lock:mmap_lock_start_locking", 1000 + i}});
    RunCounters rb = MakeRun(i + 1, 300, {{"perf.mmap_lock:mmap_lock_start_locking", 24000 + i}});
    for (int k = 0; k < 200; ++k) {
      ra.values["profile.total.f" + std::to_string(k)] = 10 * noise(rng);
      rb.values["profile.total.f" + std::to_string(k)] = 10 * noise(rng);
      ra.values["profile.self.f" + std::to_string(k)] = 5 * noise(rng);
      rb.values["profile.self.f" + std::to_string(k)] = 5 * noise(rng);
    }
    a.push_back(std::move(ra));
    b.push_back(std::move(rb));
  }
  const auto all = CompareCounters(a, b, /*paired=*/true, stats::CompareOptions{0.01});
  const auto& locking = Named(all, "perf.mmap_lock:mmap_lock_start_locking");
  EXPECT_TRUE(locking.significant) << "q " << locking.q_value;
  EXPECT_NEAR(locking.q_value, locking.p_value, 1e-12) << "alone in its family";
  int frames_flagged = 0;
  for (const auto& c : all) frames_flagged += IsFrameCounter(c.name) && c.significant ? 1 : 0;
  EXPECT_EQ(frames_flagged, 0);
}

TEST(CompareCounters, AnAAOfFramesAroundTheCutFlagsNothing) {
  // 60 frames near the 0.1% cut: each run keeps a frame only above it, on both sides alike.
  std::mt19937 rng(20261205);
  std::lognormal_distribution<double> noise(0.0, 0.3);
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 14; ++i) {
    for (auto* side : {&a, &b}) {
      RunCounters r = MakeRun(i + 1, 1000, {});
      for (int k = 0; k < 60; ++k) {
        const double share = 0.001 * (0.5 + k / 30.0) * noise(rng);
        if (share >= 0.001) r.values["profile.self.f" + std::to_string(k)] = 2000 * share;
      }
      side->push_back(std::move(r));
    }
  }
  const auto all = CompareCounters(a, b, true, stats::CompareOptions{0.01});
  int significant = 0, one_side = 0;
  for (const auto& c : all) {
    significant += c.significant ? 1 : 0;
    one_side += c.only_on.empty() ? 0 : 1;
  }
  EXPECT_GT(all.size(), 40u);
  EXPECT_EQ(one_side, 0);
  EXPECT_EQ(significant, 0);
}

TEST(CompareCounters, AnAALeavesEveryCounterInsignificant) {
  // 40 counters, 10 runs a side, the same distribution (fixed seed: deterministic).
  std::mt19937 rng(20261201);
  std::lognormal_distribution<double> noise(0.0, 0.1);
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 10; ++i) {
    for (auto* side : {&a, &b}) {
      RunCounters r = MakeRun(i + 1, 1000 * noise(rng), {});
      for (int k = 0; k < 40; ++k) {
        r.values["vmstat.c" + std::to_string(k)] = r.rounds * (k + 1) * noise(rng);
      }
      side->push_back(std::move(r));
    }
  }
  const auto all = CompareCounters(a, b, false, stats::CompareOptions{0.01});
  ASSERT_EQ(all.size(), 40u);
  int significant = 0;
  for (const auto& c : all) significant += c.significant ? 1 : 0;
  EXPECT_EQ(significant, 0);
}

TEST(CompareCounters, PairedByRepetitionCancelsDrift) {
  // The board drifts 3x over the study; B takes 8% more faults per round than A in every
  // adjacent pair. Unpaired, the drift hides it; paired, it is plain.
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 10; ++i) {
    const double level = 100 * std::pow(1.13, i) * (1 + 0.004 * (i % 3));
    a.push_back(MakeRun(i + 1, 1000, {{"vmstat.pgmajfault", 1000 * level}}));
    b.push_back(
        MakeRun(i + 1, 1000, {{"vmstat.pgmajfault", 1080 * level * (1 + 0.002 * (i % 2))}}));
  }
  std::reverse(b.begin(), b.end());  // pairing goes by repetition, not by position
  const auto unpaired = CompareCounters(a, b, false, stats::CompareOptions{});
  const auto paired = CompareCounters(a, b, true, stats::CompareOptions{});
  EXPECT_FALSE(unpaired.front().significant);
  ASSERT_EQ(paired.size(), 1u);
  EXPECT_TRUE(paired.front().paired);
  EXPECT_TRUE(paired.front().significant) << "q " << paired.front().q_value;
  EXPECT_NEAR(paired.front().ratio, 1.081, 0.003);
}

TEST(CompareCounters, TooFewRoundsComparesPerSecond) {
  std::vector<RunCounters> a = {MakeRun(1, 2, {{"vmstat.pswpin", 500}}, 5),
                                MakeRun(2, 3, {{"vmstat.pswpin", 600}}, 5)};
  std::vector<RunCounters> b = {MakeRun(1, 40, {{"vmstat.pswpin", 50}}, 5),
                                MakeRun(2, 41, {{"vmstat.pswpin", 60}}, 5)};
  const auto all = CompareCounters(a, b, false, stats::CompareOptions{});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].unit, "second");
  EXPECT_DOUBLE_EQ(all[0].median_a, 110);
  EXPECT_DOUBLE_EQ(all[0].median_b, 11);
}

// A counter most baseline runs never hit: its ratio would be ×1e9 from the clamp of log 0
// and lead the table. It is compared by its difference instead, and the ratios are ranked
// by the least change their CI allows, so the real effect (×28.8) leads.
TEST(CompareCounters, ZeroBasesAreDifferencesAndDoNotLead) {
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 10; ++i) {
    const double rounds = 1000 + 10 * i;
    // Baseline: 0 in 7 of 10 runs (median 0); candidate: 7.6 per round.
    a.push_back(MakeRun(i + 1, rounds,
                        {{"vmstat.pgmajfault", i % 4 == 0 ? 3.0 * rounds : 0.0},
                         {"vmstat.pgscan", 10 * rounds * (1 + 0.01 * i)}}));
    b.push_back(MakeRun(i + 1, rounds,
                        {{"vmstat.pgmajfault", (7.6 + 0.05 * i) * rounds},
                         {"vmstat.pgscan", 288 * rounds * (1 + 0.012 * (9 - i))}}));
  }
  const auto all = CompareCounters(a, b, /*paired=*/true, stats::CompareOptions{});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "vmstat.pgscan") << "the real ratio leads";
  EXPECT_NEAR(all[0].ratio, 28.8, 0.5);
  EXPECT_TRUE(all[0].significant);
  EXPECT_TRUE(std::isnan(all[0].difference));
  const CounterComparison& zero = all[1];
  EXPECT_EQ(zero.name, "vmstat.pgmajfault");
  EXPECT_DOUBLE_EQ(zero.median_a, 0);
  EXPECT_TRUE(std::isnan(zero.ratio)) << "no ratio against a zero: " << zero.ratio;
  EXPECT_TRUE(zero.significant) << "q " << zero.q_value;
  // Paired differences: 7.6+ in 7 runs, 4.6+ in the 3 that hit it on A.
  EXPECT_GT(zero.difference, 4.5);
  EXPECT_LT(zero.difference, 8.1);
  EXPECT_LE(zero.difference_low, zero.difference);
  EXPECT_GE(zero.difference_high, zero.difference);
  EXPECT_GT(zero.difference_low, 0);
}

// Among significant ratios, a wide interval of a few runs (×40, CI down to ×1.5) does not
// lead a precise one (×8, CI [×7.6, ×8.4]): ranked by the end of the CI nearest ×1.
TEST(CompareCounters, RankedByTheLeastChangeTheirIntervalAllows) {
  std::vector<RunCounters> a, b;
  for (int i = 0; i < 12; ++i) {
    a.push_back(
        MakeRun(i + 1, 100,
                {{"vmstat.precise", 100 * (1 + 0.01 * i)}, {"vmstat.wild", i < 6 ? 1.0 : 50.0}}));
    b.push_back(MakeRun(i + 1, 100,
                        {{"vmstat.precise", 800 * (1 + 0.01 * ((i * 5) % 12))},
                         {"vmstat.wild", i < 6 ? 80.0 : 60.0 + i}}));
  }
  const auto all = CompareCounters(a, b, false, stats::CompareOptions{});
  ASSERT_EQ(all.size(), 2u);
  ASSERT_TRUE(all[0].significant && all[1].significant)
      << all[0].name << " q " << all[0].q_value << ", " << all[1].name << " q " << all[1].q_value;
  EXPECT_EQ(all[0].name, "vmstat.precise");
  EXPECT_GT(Named(all, "vmstat.wild").ratio, Named(all, "vmstat.precise").ratio)
      << "the wild one is larger, and still second";
}

TEST(IsComparableCounter, CountsOfWorkOnly) {
  for (const char* yes :
       {"vmstat.pgfault", "memcg.pgscan", "memcg.events.high", "psi.memory_some_us", "rusage.nvcsw",
        "perf.mmap_lock:mmap_lock_start_locking", "cpu_seconds", "munmap_rounds",
        "mmap_lock_wait.read.count", "mmap_lock_wait.write.us_10_100",
        "mmap_lock_contention.read.count", "mmap_lock_contention.write.total_us",
        "profile.total.handle_mm_fault", "profile.self.down_read", "profile.user"}) {
    EXPECT_TRUE(IsComparableCounter(yes)) << yes;
  }
  for (const char* no : {"memcg.peak_bytes", "rounds_per_thread_min", "measured_elapsed_seconds",
                         "ns_per_iteration", "memcg_event.oom_kill", "mmap_lock_wait.lost_records",
                         "mmap_lock_wait.unpaired", "profile.samples", "profile.lost"}) {
    EXPECT_FALSE(IsComparableCounter(no)) << no;
  }
}

// A run that traced mmap_lock waits, shaped like the seed: `reads` acquisitions per round
// waiting `read_us` each on average, split over the first three decades.
RunCounters LockRun(int repetition, double rounds, double reads, double read_us, double writes,
                    double contended = 0) {
  const double n = reads * rounds;
  std::map<std::string, double> v{
      {"mmap_lock_wait.read.count", n},           {"mmap_lock_wait.read.total_us", n * read_us},
      {"mmap_lock_wait.read.us_0_1", n * 0.5},    {"mmap_lock_wait.read.us_1_10", n * 0.4},
      {"mmap_lock_wait.read.us_10_100", n * 0.1}, {"mmap_lock_wait.lost_records", 0},
  };
  if (contended > 0) {
    v["mmap_lock_contention.read.count"] = contended * rounds;
    v["mmap_lock_contention.read.total_us"] = contended * rounds * 100;
    v["mmap_lock_contention.read.max_us"] = 900;
  }
  if (writes > 0) {
    v["mmap_lock_wait.write.count"] = writes * rounds;
    v["mmap_lock_wait.write.total_us"] = writes * rounds * 50;
    v["mmap_lock_wait.write.us_10_100"] = writes * rounds;
  }
  return MakeRun(repetition, rounds, std::move(v));
}

const MedianTableRow& RowOf(const MedianTable& table, const std::string& label) {
  for (const auto& r : table.rows) {
    if (r.label == label) return r;
  }
  ADD_FAILURE() << label << " not in " << table.title;
  static const MedianTableRow none;
  return none;
}

TEST(LockWaitTables, TheSeedsThreeTablesFromMediansOverRuns) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 0.03);
  std::vector<RunCounters> before, after;
  for (int rep = 0; rep < 10; ++rep) {
    // Before: 20 reads a round waiting 500 us; after: 6 waiting 70 us, and more rounds.
    before.push_back(LockRun(rep, 100 * std::exp(noise(rng)), 20 * std::exp(noise(rng)),
                             500 * std::exp(noise(rng)), 0));
    after.push_back(LockRun(rep, 180 * std::exp(noise(rng)), 6 * std::exp(noise(rng)),
                            70 * std::exp(noise(rng)), 1));
  }
  const auto tables = LockWaitTables(before, after, /*paired=*/true, stats::CompareOptions{});
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].title, "mmap_lock Acquisitions And Wait Time");
  EXPECT_EQ(tables[0].unit, "round");
  ASSERT_EQ(tables[0].rows.size(), 6u);
  EXPECT_EQ(tables[1].title, "Read Lock Waiting Time Distribution of mmap_lock");
  EXPECT_EQ(tables[1].first_column, "Range (us)");
  ASSERT_EQ(tables[1].rows.size(), 8u);
  EXPECT_EQ(tables[1].rows[0].label, "[0, 1)");
  EXPECT_EQ(tables[2].rows[7].label, "[1000000, +)");

  const MedianTableRow& count = RowOf(tables[0], "Read Lock Count");
  EXPECT_EQ(count.baseline.n, 10);
  EXPECT_NEAR(count.baseline.median, 20, 1.5);  // per round, not per run
  EXPECT_NEAR(count.candidate.median, 6, 0.5);
  EXPECT_LE(count.baseline.low, count.baseline.median);
  EXPECT_GE(count.baseline.high, count.baseline.median);
  EXPECT_NEAR(count.ratio, 0.3, 0.03);
  EXPECT_LT(count.ci_low, count.ratio);
  EXPECT_GT(count.ci_high, count.ratio);
  EXPECT_LT(count.ci_high, 1);
  EXPECT_TRUE(count.significant) << "q " << count.q_value;
  EXPECT_LE(count.q_value, 0.01);

  const MedianTableRow& avg = RowOf(tables[0], "Read Avg Wait (us)");
  EXPECT_NEAR(avg.baseline.median, 500, 30);  // per acquisition, whatever the rounds
  EXPECT_NEAR(avg.candidate.median, 70, 5);
  EXPECT_NEAR(RowOf(tables[0], "Read Total Wait (us)").baseline.median, 20 * 500, 1500);

  // Writes only after: no ratio (the seed prints N/A), the medians still there.
  const MedianTableRow& writes = RowOf(tables[0], "Write Lock Count");
  EXPECT_DOUBLE_EQ(writes.baseline.median, 0);
  EXPECT_NEAR(writes.candidate.median, 1, 1e-9);
  EXPECT_TRUE(std::isnan(writes.ratio));
  EXPECT_TRUE(std::isnan(RowOf(tables[0], "Write Avg Wait (us)").baseline.median))
      << "no acquisitions: no average";
  EXPECT_NEAR(RowOf(tables[1], "[1, 10)").baseline.median, 8, 0.8);
  EXPECT_DOUBLE_EQ(RowOf(tables[1], "[1000, 10000)").candidate.median, 0);
}

TEST(LockWaitTables, AFourthTableWhereTrueContentionWasTraced) {
  std::vector<RunCounters> before, after;
  for (int rep = 0; rep < 8; ++rep) {
    before.push_back(LockRun(rep, 100 + rep, 20, 500, 0, /*contended=*/2));
    after.push_back(LockRun(rep, 100 + rep, 6, 70, 0, /*contended=*/0.5));
  }
  const auto tables = LockWaitTables(before, after, true, stats::CompareOptions{});
  ASSERT_EQ(tables.size(), 4u);
  EXPECT_EQ(tables[3].title, "mmap_lock Contention (lock:contention_begin/end)");
  const MedianTableRow& count = RowOf(tables[3], "Read Contended Count");
  EXPECT_NEAR(count.baseline.median, 2, 1e-9);
  EXPECT_NEAR(count.ratio, 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(RowOf(tables[3], "Read Max Wait (us)").baseline.median, 900);
  EXPECT_DOUBLE_EQ(RowOf(tables[3], "Write Contended Count").baseline.median, 0);
}

TEST(LockWaitTables, RowsWhereSomeRunsSawNoneCompareTheMedians) {
  // A rare bucket: most runs see none. The log-scale estimate would swing on the zeros.
  std::vector<RunCounters> a, b;
  for (int rep = 0; rep < 8; ++rep) {
    auto ra = LockRun(rep, 100, 10, 5, 0);
    auto rb = LockRun(rep, 100, 10, 5, 0);
    ra.values["mmap_lock_wait.read.us_1000_10000"] = rep % 2 == 0 ? 0 : 20;
    rb.values["mmap_lock_wait.read.us_1000_10000"] = rep % 3 == 0 ? 0 : 10;
    a.push_back(ra);
    b.push_back(rb);
  }
  const auto tables = LockWaitTables(a, b, true, stats::CompareOptions{});
  const MedianTableRow& rare = RowOf(tables[1], "[1000, 10000)");
  EXPECT_DOUBLE_EQ(rare.baseline.median, 0.1);
  EXPECT_DOUBLE_EQ(rare.candidate.median, 0.1);
  EXPECT_DOUBLE_EQ(rare.ratio, 1.0);
  EXPECT_TRUE(std::isnan(rare.ci_low)) << "no CI from the medians' ratio";
}

// A/A: the same kernel on both sides. Each row's 95% CI excludes 1 in about 5% of rows by
// chance (4 of 31 once); the star is q <= alpha after Benjamini-Hochberg over the rows.
// 40 A/A studies of 10 runs a side (fixed seeds): uncorrected CIs star rows in many of
// them, the corrected stars appear in at most 2 (FWER under the null is at most alpha).
TEST(LockWaitTables, AnAAStarsNothingByChance) {
  int ci_excludes = 0, starred = 0, studies_with_star = 0;
  for (int seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919);
    std::lognormal_distribution<double> noise(0, 0.15);
    std::vector<RunCounters> a, b;
    for (int rep = 0; rep < 10; ++rep) {
      for (auto* side : {&a, &b}) {
        RunCounters r = LockRun(rep, 100 * noise(rng), 20 * noise(rng), 500 * noise(rng),
                                2 * noise(rng), /*contended=*/1.5 * noise(rng));
        for (auto& [name, value] : r.values) {
          if (name.starts_with("mmap_lock")) value *= noise(rng);
        }
        side->push_back(std::move(r));
      }
    }
    bool any = false;
    for (const auto& table : LockWaitTables(a, b, true, stats::CompareOptions{0.01})) {
      for (const auto& row : table.rows) {
        ci_excludes += std::isfinite(row.ci_low) && (row.ci_low > 1 || row.ci_high < 1);
        starred += row.significant;
        any |= row.significant;
      }
    }
    studies_with_star += any;
  }
  EXPECT_GE(ci_excludes, 10) << "the uncorrected CIs would star these";
  EXPECT_LE(studies_with_star, 2) << starred << " stars in " << studies_with_star << " studies";
}

TEST(LockWaitTables, NoneWithoutTracingAndPerSecondForCoarseRuns) {
  std::vector<RunCounters> plain{MakeRun(0, 100, {{"vmstat.pgfault", 5}})};
  EXPECT_TRUE(LockWaitTables(plain, plain, false, stats::CompareOptions{}).empty());
  std::vector<RunCounters> a{LockRun(0, 2, 10, 5, 0), LockRun(1, 2, 10, 5, 0)};
  const auto tables = LockWaitTables(a, a, false, stats::CompareOptions{});
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].unit, "second");
  // 20 acquisitions over 10 s: 2 per second.
  EXPECT_DOUBLE_EQ(RowOf(tables[0], "Read Lock Count").baseline.median, 2);
  EXPECT_TRUE(std::isnan(RowOf(tables[0], "Read Lock Count").baseline.low)) << "2 runs: no CI";
}

}  // namespace
}  // namespace faultline::controller
