// The report a user reads (BuildReport over the in-memory job store): throughput statistics
// and, under each comparison, the counters that explain the change.
#include "services/controller/orchestration/report_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "nlohmann/json.hpp"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/report_message.h"
#include "services/controller/orchestration/submission.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;

v1::JobSpec Spec(bool lock_waits = false) {
  v1::JobSpec spec;
  spec.set_mmap_lock_waits(lock_waits);
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("10s");
  spec.set_repetitions(8);
  spec.add_kernels("vanilla");
  spec.add_kernels("patched");
  spec.mutable_memcg()->set_memory_max("256M");
  return spec;
}

class ReportBuilderTest : public ::testing::Test {
 protected:
  int64_t SubmitAndFinish(const std::function<void(RunRecord&)>& result, bool lock_waits = false) {
    fake_.boards.AddBoard(fakes::VanillaBoard("b1", {"vanilla", "patched"}));
    auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, Spec(lock_waits), "");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    const int64_t job = submitted.ok() ? submitted->created.job_id : 0;
    fake_.jobs.EditRuns(job, [&](RunRecord& r) {
      r.state = RunState::kSucceeded;
      r.has_result = true;
      r.board = "b1";
      r.duration_seconds = 10;
      result(r);
    });
    return job;
  }
  FakeStores fake_;
};

TEST_F(ReportBuilderTest, CountersThatExplainTheChangeComeUnderTheComparison) {
  // Patched: 2x the rounds, the same faults per round, 40x fewer failed retries per round.
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    const bool patched = r.kernel == "patched";
    const double rounds = (patched ? 2000 : 1000) + 7 * r.repetition;
    r.rounds = static_cast<uint64_t>(rounds);
    r.throughput = rounds / 10;
    nlohmann::json counters = {
        {"vmstat.pgfault", rounds * 640 + 3 * r.repetition},
        {"vmstat.retry_io_miss", rounds * (patched ? 0.5 : 20) + r.repetition},
        {"memcg.peak_bytes", 1e8},
        {"measured_elapsed_seconds", 10.0},
    };
    if (patched) counters["vmstat.new_debug"] = 4;
    r.counters_json = counters.dump();
  });
  // What GetReport answers: the built report converted at the API's edge.
  auto built = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(built.ok()) << built.status();
  v1::GetReportResponse report;
  ReportToProto(built->job, built->report, &report);
  ASSERT_EQ(report.comparisons_size(), 1);
  const v1::Comparison& c = report.comparisons(0);
  EXPECT_EQ(c.verdict(), "improvement");
  EXPECT_TRUE(c.paired()) << "8 alternating pairs: the paired analysis decides";
  ASSERT_EQ(c.counters_size(), 3) << "memcg.peak_bytes and the elapsed time are not counters";
  const v1::CounterComparison& first = c.counters(0);
  EXPECT_EQ(first.name(), "vmstat.retry_io_miss");
  EXPECT_TRUE(first.significant());
  EXPECT_TRUE(first.paired());
  EXPECT_NEAR(first.ratio(), 0.5 / 20, 0.002);
  EXPECT_LT(first.ci_high(), 0.03);
  EXPECT_NEAR(first.baseline_median(), 20, 0.01);
  // Median over repetitions 1..8: (20 × 1031.5 + 4.5) / 10 s.
  EXPECT_NEAR(first.baseline_per_second(), (20 * 1031.5 + 4.5) / 10, 0.01);
  EXPECT_EQ(c.counters(1).name(), "vmstat.pgfault");
  EXPECT_NEAR(c.counters(1).ratio(), 1.0, 0.01);
  EXPECT_EQ(c.counters(2).name(), "vmstat.new_debug");
  EXPECT_EQ(c.counters(2).only_on(), "candidate");
  EXPECT_FALSE(c.counters(2).significant());
}

// The report's header: what each board was (its facts, per-run values left out), and with
// `runs` every succeeded run in the order they finished.
TEST_F(ReportBuilderTest, BoardFactsAndEveryRunInTheOrderTheyFinished) {
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    r.rounds = 100;
    r.throughput = 10;
    r.finished_ms = 1000 - r.id;  // the last created finished first
    r.environment_json = nlohmann::json{
        {"cpu.model", "Xeon"},
        {"thp.enabled", "always [madvise] never"},
        {"kernel.release", r.kernel == "patched" ? "6.12.1" : "6.12.0"},
        {"memcg.path", "/sys/fs/cgroup/run-" + std::to_string(r.id)},
        {"work_dir",
         "/var/lib/x"}}.dump();
  });
  // The runs held in a local: `for (... : *ListRuns(job))` would walk a vector the
  // temporary StatusOr has already freed (operator* does not extend its life).
  const auto runs = fake_.jobs.ListRuns(job);
  ASSERT_TRUE(runs.ok()) << runs.status();
  for (const RunRecord& r : *runs) {
    fake_.jobs.SetRunSamples(r.id, {9, 10, static_cast<double>(r.id)});
  }
  ReportOptions options;
  options.runs = true;
  options.samples = true;
  auto built = BuildReport(&fake_.jobs, job, options);
  ASSERT_TRUE(built.ok()) << built.status();
  v1::GetReportResponse report;
  ReportToProto(built->job, built->report, &report);
  ASSERT_EQ(report.boards_size(), 1);
  const auto& facts = report.boards(0).facts();
  EXPECT_EQ(report.boards(0).board(), "b1");
  EXPECT_EQ(facts.at("cpu.model"), "Xeon");
  EXPECT_EQ(facts.at("thp.enabled"), "always [madvise] never");
  EXPECT_EQ(facts.at("kernel.release"), "6.12.0 | 6.12.1");
  EXPECT_FALSE(facts.contains("memcg.path"));
  EXPECT_FALSE(facts.contains("work_dir"));
  ASSERT_EQ(report.run_results_size(), 16);
  // Each row's order is its run's rank by finish time.
  std::map<std::pair<std::string, uint32_t>, int64_t> finished;  // (kernel, repetition)
  for (const RunRecord& r : *runs) {
    finished[{r.kernel, static_cast<uint32_t>(r.repetition)}] = r.finished_ms;
  }
  std::vector<std::pair<int64_t, uint32_t>> by_time;  // (finished_ms, order)
  for (const auto& r : report.run_results()) {
    by_time.emplace_back(finished.at({r.kernel(), r.repetition()}), r.order());
  }
  std::sort(by_time.begin(), by_time.end());
  for (size_t i = 0; i < by_time.size(); ++i) EXPECT_EQ(by_time[i].second, i + 1);
  // Each row carries its own run's seconds (the last one is the run's id here).
  std::map<std::pair<std::string, uint32_t>, int64_t> id_of;
  for (const RunRecord& r : *runs) {
    id_of[{r.kernel, static_cast<uint32_t>(r.repetition)}] = r.id;
  }
  for (const auto& r : report.run_results()) {
    ASSERT_EQ(r.samples_size(), 3);
    EXPECT_EQ(r.samples(2), static_cast<double>(id_of.at({r.kernel(), r.repetition()})));
  }
  // Without `runs`, no run rows.
  auto plain = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->report.run_results.empty());
}

// What older agents stored raw: the hypervisor's CPUID signature with its padding ("bhyve
// bhyve ") and the release twice (kernel.release and kernel_release). The report names the
// hypervisor once, without the trailing space, and the release once.
TEST_F(ReportBuilderTest, AnOlderAgentsRawFactsReadOnce) {
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    r.rounds = 100;
    r.throughput = r.kernel == "patched" ? 12 : 10;
    const std::string release = r.kernel == "patched" ? "6.12.1" : "6.12.0";
    r.environment_json = nlohmann::json{
        {"virt.accel", "bhyve bhyve "},
        {"kernel.release", release},
        {"kernel_release",
         release}}.dump();
  });
  auto built = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(built.ok()) << built.status();
  v1::GetReportResponse report;
  ReportToProto(built->job, built->report, &report);
  EXPECT_THAT(report.caveats(),
              ::testing::Contains("board b1 is a virtual machine (virt.accel=bhyve)"));
  ASSERT_EQ(report.boards_size(), 1);
  EXPECT_EQ(report.boards(0).facts().at("virt.accel"), "bhyve");
  int releases = 0;
  for (const auto& [key, value] : report.environment_differences()) {
    releases += key.find("release") != std::string::npos;
  }
  EXPECT_EQ(releases, 1) << "the release differs between the kernels: shown once";
  EXPECT_FALSE(report.boards(0).facts().contains("kernel_release"));
}

TEST_F(ReportBuilderTest, MmapLockWaitsGetTheSeedsTablesAndLostRecordsACaveat) {
  // Patched: a quarter of the read acquisitions per round, each waiting a tenth as long. One
  // vanilla run lost records; patched could not trace at all in repetition 1 (the agent said
  // why).
  const int64_t job = SubmitAndFinish(
      [](RunRecord& r) {
        const bool patched = r.kernel == "patched";
        const double rounds = 1000 + 7 * r.repetition;
        r.rounds = static_cast<uint64_t>(rounds);
        r.throughput = rounds / 10;
        const double reads = rounds * (patched ? 5 : 20) + r.repetition;
        nlohmann::json counters = {
            {"mmap_lock_wait.read.count", reads},
            {"mmap_lock_wait.read.total_us", reads * (patched ? 50 : 500)},
            {"mmap_lock_wait.read.us_100_1000", reads},
            {"mmap_lock_wait.lost_records", !patched && r.repetition == 3 ? 12 : 0},
            {"measured_elapsed_seconds", 10.0},
        };
        r.counters_json = counters.dump();
        if (patched && r.repetition == 1) {
          r.environment_json = nlohmann::json{{"mmap_lock_wait.unsupported", "no tracefs"}}.dump();
        }
        if (!patched && r.repetition == 2) {
          r.environment_json =
              nlohmann::json{{"mmap_lock_contention.unsupported", "no lock:contention_begin"}}
                  .dump();
        }
      },
      /*lock_waits=*/true);
  auto built = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(built.ok()) << built.status();
  v1::GetReportResponse report;
  ReportToProto(built->job, built->report, &report);
  ASSERT_EQ(report.comparisons_size(), 1);
  const v1::Comparison& c = report.comparisons(0);
  ASSERT_EQ(c.tables_size(), 3);
  const v1::MedianTable& waits = c.tables(0);
  EXPECT_EQ(waits.unit(), "round");
  ASSERT_EQ(waits.rows_size(), 6);
  EXPECT_EQ(waits.rows(0).label(), "Read Lock Count");
  EXPECT_EQ(waits.rows(0).baseline().n(), 8u);
  EXPECT_NEAR(waits.rows(0).baseline().median(), 20, 0.01);
  EXPECT_NEAR(waits.rows(0).candidate().median(), 5, 0.01);
  EXPECT_NEAR(waits.rows(0).ratio(), 0.25, 0.01);
  EXPECT_EQ(waits.rows(2).label(), "Read Avg Wait (us)");
  EXPECT_NEAR(waits.rows(2).baseline().median(), 500, 1e-6);
  EXPECT_NEAR(waits.rows(2).candidate().median(), 50, 1e-6);
  EXPECT_EQ(c.tables(1).rows(3).label(), "[100, 1000)");
  EXPECT_NEAR(c.tables(1).rows(3).baseline().median(), 20, 0.01);
  // The counters are compared like any other, the tracer's bookkeeping is not.
  bool compared = false;
  for (const auto& k : c.counters()) {
    EXPECT_NE(k.name(), "mmap_lock_wait.lost_records");
    compared |= k.name() == "mmap_lock_wait.read.count" && k.significant();
  }
  EXPECT_TRUE(compared);
  EXPECT_THAT(report.caveats(),
              testing::Contains(testing::HasSubstr(
                  "board b1, kernel vanilla: 1 run(s) lost 12 mmap_lock trace record(s)")));
  EXPECT_THAT(
      report.caveats(),
      testing::Contains("board b1, kernel patched: mmap_lock waits were not traced: no tracefs"));
}

TEST_F(ReportBuilderTest, NoTablesForAJobThatDidNotTraceLockWaits) {
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    r.rounds = 1000;
    r.throughput = 100 + (r.kernel == "patched" ? 1 : 0) + r.repetition;
    r.counters_json = nlohmann::json{{"vmstat.pgfault", 1000.0 * r.repetition}}.dump();
  });
  auto built = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->report.comparisons.size(), 1u);
  EXPECT_TRUE(built->report.comparisons[0].tables.empty());
  EXPECT_TRUE(built->report.caveats.empty());
}

// A profiled job's stacks (each result's folded_stacks) per side and cell, per round and
// averaged over the side's runs, when the request asks for them (the page's flame graphs).
TEST_F(ReportBuilderTest, EachSidesCallStacksPerRoundWhenAsked) {
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    const bool patched = r.kernel == "patched";
    r.rounds = 100;
    r.throughput = 10 + r.repetition;
    r.folded_stacks = patched ? "[user];exc_page_fault;lock_mm_and_find_vma 50\n[user] 20\n"
                              : "[user];exc_page_fault;lock_vma_under_rcu 30\n[user] 20\n";
  });
  ReportOptions options;
  options.profiles = true;
  auto built = BuildReport(&fake_.jobs, job, options);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(built->report.comparisons.size(), 1u);
  const ReportComparison& c = built->report.comparisons[0];
  ASSERT_EQ(c.baseline_stacks.size(), 2u);
  EXPECT_EQ(c.baseline_stacks[0].stack, "[user];exc_page_fault;lock_vma_under_rcu");
  EXPECT_DOUBLE_EQ(c.baseline_stacks[0].per_round, 0.3);
  ASSERT_EQ(c.candidate_stacks.size(), 2u);
  EXPECT_EQ(c.candidate_stacks[0].stack, "[user];exc_page_fault;lock_mm_and_find_vma");
  EXPECT_DOUBLE_EQ(c.candidate_stacks[1].per_round, 0.2);
  v1::GetReportRequest request;
  request.set_job_id(job);
  request.set_profiles(true);
  auto response = ReportResponse(&fake_.jobs, nullptr, request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->comparisons(0).candidate_stacks(0).stack(),
            "[user];exc_page_fault;lock_mm_and_find_vma");
  auto plain = BuildReport(&fake_.jobs, job);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->report.comparisons[0].baseline_stacks.empty()) << "not asked: none";
  // The stacks differ between the kernels, and are a result: no "environment difference".
  for (const BuiltReport* b : {&*built, &*plain}) {
    for (const auto& [key, text] : b->report.environment_differences) {
      EXPECT_EQ(key.find("profile.folded"), std::string::npos) << key << ": " << text.substr(0, 80);
    }
  }
}

// The controller renders a job's report itself (what it will send to a list): the same text
// `faultline report JOB --format F` prints from GetReport's response, for every format;
// lkp asks a second time for the counters that changed, per run.
TEST_F(ReportBuilderTest, TheControllerRendersWhatTheCliPrints) {
  const int64_t job = SubmitAndFinish([](RunRecord& r) {
    const bool patched = r.kernel == "patched";
    const double rounds = (patched ? 1500 : 1000) + 11 * r.repetition;
    r.rounds = static_cast<uint64_t>(rounds);
    r.throughput = rounds / 10;
    r.counters_json = nlohmann::json{{"vmstat.pgfault", rounds * (patched ? 300 : 640)}}.dump();
  });
  for (const char* name : {"table", "markdown", "csv", "json", "mail", "mmtests", "lkp", "html"}) {
    const report::ReportFormat format = *report::ParseReportFormat(name);
    v1::GetReportRequest request = report::ReportRequest(job, format, {}, false);
    if (format == report::ReportFormat::kLkp) request.add_run_counters("vmstat.pgfault");
    auto response = ReportResponse(&fake_.jobs, nullptr, request);
    ASSERT_TRUE(response.ok()) << name << ": " << response.status();
    auto rendered = RenderJobReport(&fake_.jobs, nullptr, job, format);
    ASSERT_TRUE(rendered.ok()) << name << ": " << rendered.status();
    EXPECT_EQ(*rendered, report::RenderReport(*response, format)) << name;
  }
  auto mail = RenderJobReport(&fake_.jobs, nullptr, job, report::ReportFormat::kMail);
  ASSERT_TRUE(mail.ok());
  EXPECT_THAT(*mail, ::testing::HasSubstr("Kernels:"));
  EXPECT_THAT(*mail, ::testing::HasSubstr("vmstat.pgfault"));
  auto lkp = RenderJobReport(&fake_.jobs, nullptr, job, report::ReportFormat::kLkp);
  ASSERT_TRUE(lkp.ok());
  EXPECT_THAT(*lkp, ::testing::HasSubstr("vmstat.pgfault")) << "the counter that changed, per run";
}

TEST_F(ReportBuilderTest, AReportRequestOutOfBoundsNamesTheFieldAndTheLimit) {
  const int64_t job = SubmitAndFinish([](RunRecord& r) { r.throughput = 100; });
  v1::GetReportRequest request;
  request.set_job_id(job);
  for (int i = 0; i <= report::kMaxRunCounters; ++i)
    request.add_run_counters("c" + std::to_string(i));
  auto too_many = ReportResponse(&fake_.jobs, nullptr, request);
  ASSERT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_many.status().message()),
              ::testing::HasSubstr("run_counters: at most 64 counter names"));
  request.clear_run_counters();
  request.add_run_counters("");
  auto empty = ReportResponse(&fake_.jobs, nullptr, request);
  ASSERT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), ::testing::HasSubstr("1..128 characters"));
}

}  // namespace
}  // namespace faultline::controller
