// Proto <-> domain conversion (convert/convert.h): what goes out and comes back is what went in.
#include "services/controller/convert/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>

#include <cmath>

#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "services/controller/orchestration/report_builder.h"

namespace faultline::controller {
namespace {

using google::protobuf::util::MessageDifferencer;
using google::protobuf::util::TimeUtil;

v1::JobSpec FullSpec() {
  v1::JobSpec spec;
  spec.set_name("per-vma-lock");
  spec.set_benchmark("swap-in");
  spec.set_duration("30s");
  spec.set_repetitions(10);
  spec.add_kernels("vanilla");
  spec.add_kernels("patched");
  spec.mutable_memcg()->set_memory_max("256M");
  spec.mutable_memcg()->set_memory_high("192M");
  spec.mutable_memcg()->set_swap_max("0");
  (*spec.mutable_params())["region_size"] = "64M";
  auto& readers = (*spec.mutable_matrix())["readers"];
  readers.add_values("1");
  readers.add_values("8");
  spec.add_arches("x86_64");
  spec.add_boards("lab-01");
  return spec;
}

TEST(ConvertTest, AChangePointStateComesBackAsItWent) {
  for (ChangePointState s : {ChangePointState::kOpen, ChangePointState::kAcknowledged,
                             ChangePointState::kFixed, ChangePointState::kInvalid}) {
    const auto back = FromProto(ToProto(s));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(FromProto(v1::CHANGE_POINT_STATE_UNSPECIFIED).has_value());
  EXPECT_FALSE(FromProto(static_cast<v1::ChangePointState>(99)).has_value());
}

TEST(ConvertTest, AStoredSpecComesBackAsTheSubmittedSpec) {
  const v1::JobSpec spec = FullSpec();
  JobRecord job;
  job.id = 3;
  job.spec_json = SpecToJson(spec);
  job.state = JobState::kRunning;
  job.created_at_ms = 1'700'000'000'123;
  v1::Job out;
  JobToProto(job, &out);
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(spec, out.spec())) << diff;
  EXPECT_EQ(out.id(), 3);
  EXPECT_EQ(out.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(out.created_at()), job.created_at_ms);
  EXPECT_FALSE(out.has_finished_at());

  // The report reads the kernels of the stored spec without protobuf: the same list.
  EXPECT_EQ(SpecKernels(job.spec_json), (std::vector<std::string>{"vanilla", "patched"}));
  EXPECT_TRUE(SpecKernels("not json").empty());
}

// A retry under a request id is compared by the stored spec's digest: the same spec built
// twice must give the same text, whatever order its maps' hash tables hold their entries in
// (protobuf's JSON printer wrote them in that order; two messages differed 5 times in 6).
TEST(ConvertTest, TheStoredSpecTextDoesNotDependOnHowItsMapsWereFilled) {
  std::set<std::string> texts;
  for (int i = 0; i < 16; ++i) {
    auto spec = std::make_unique<v1::JobSpec>();
    std::vector<std::string> keys = {"threads", "file_size", "munmap_threads", "file_fill"};
    std::rotate(keys.begin(), keys.begin() + i % keys.size(), keys.end());
    for (const auto& k : keys) (*spec->mutable_params())[k] = k + "-value";
    for (const char* label : {"base@0123456789ab", "v5@ba9876543210"}) {
      (*spec->mutable_kernel_sources())[label].set_tree("/srv/linux.git");
    }
    texts.insert(SpecToJson(*spec));
  }
  EXPECT_EQ(texts.size(), 1u) << *texts.begin();
  EXPECT_LT(texts.begin()->find("\"file_fill\""), texts.begin()->find("\"threads\""))
      << "keys in order";
}

TEST(ConvertTest, AScheduleCarriesItsSpecAndSlots) {
  ScheduleRecord r;
  r.id = 9;
  r.name = "nightly";
  r.cron = "0 3 * * *";
  r.spec_json = SpecToJson(FullSpec());
  r.next_run_ms = 1'700'000'060'000;
  r.last_job_id = 41;
  r.last_error = "no board runs kernel patched";
  v1::Schedule out;
  ScheduleToProto(r, &out);
  EXPECT_EQ(out.id(), 9);
  EXPECT_EQ(out.name(), "nightly");
  EXPECT_EQ(out.cron(), "0 3 * * *");
  EXPECT_TRUE(MessageDifferencer::Equals(out.spec(), FullSpec()));
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(out.next_run()), r.next_run_ms);
  EXPECT_FALSE(out.has_last_run()) << "never ran: no last_run";
  EXPECT_EQ(out.last_job_id(), 41);
  EXPECT_EQ(out.last_error(), r.last_error);
}

TEST(ConvertTest, AChangePointKeepsEveryFigure) {
  ChangePointRecord c{5,
                      "study",
                      "swap-in",
                      "readers=8",
                      "aarch64",
                      "lab-02",
                      "patched",
                      77,
                      76,
                      100,
                      80,
                      -0.2,
                      1e-5,
                      ChangePointState::kFixed,
                      1'700'000'000'000};
  v1::ChangePoint out;
  ChangePointToProto(c, &out);
  EXPECT_EQ(out.id(), 5);
  EXPECT_EQ(out.study(), "study");
  EXPECT_EQ(out.benchmark(), "swap-in");
  EXPECT_EQ(out.config(), "readers=8");
  EXPECT_EQ(out.arch(), "aarch64");
  EXPECT_EQ(out.board(), "lab-02");
  EXPECT_EQ(out.kernel(), "patched");
  EXPECT_EQ(out.job_id(), 77);
  EXPECT_EQ(out.previous_job_id(), 76);
  EXPECT_DOUBLE_EQ(out.mean_before(), 100);
  EXPECT_DOUBLE_EQ(out.mean_after(), 80);
  EXPECT_DOUBLE_EQ(out.relative_change(), -0.2);
  EXPECT_DOUBLE_EQ(out.p_value(), 1e-5);
  EXPECT_EQ(FromProto(out.state()), ChangePointState::kFixed);
  EXPECT_EQ(TimeUtil::TimestampToMilliseconds(out.detected_at()), c.detected_at_ms);
}

TEST(ConvertTest, ABoardsFactsComeBackAndOnlyTheControllerSetsItsState) {
  v1::Board agent;
  agent.set_name("lab-01");
  agent.set_arch("riscv64");
  agent.set_cpu_count(4);
  agent.set_memory_bytes(8ull << 30);
  auto* k = agent.add_kernels();
  k->set_label("vanilla");
  k->set_release("6.12.117");
  k->set_boot_method("kexec");
  auto* m = agent.add_kernels();
  m->set_label("patched");
  m->set_boot_method("none");
  agent.set_running_kernel_label("vanilla");
  (*agent.mutable_labels())["rack"] = "3";
  agent.set_boot_id("b-1");
  agent.set_health(v1::BOARD_HEALTH_NEEDS_CHECK);
  agent.set_health_reason("kernel patched did not come back");
  agent.set_state(v1::BOARD_STATE_ONLINE);  // not the agent's to say
  agent.set_current_run_id(12);

  BoardRecord rec = BoardFromProto(agent);
  EXPECT_EQ(rec.summary.kernel_labels, (std::vector<std::string>{"vanilla", "patched"}));
  EXPECT_EQ(rec.summary.bootable_kernel_labels, (std::vector<std::string>{"vanilla"}));
  EXPECT_EQ(rec.summary.health, BoardHealth::kNeedsCheck);
  rec.online = false;
  rec.last_seen_ms = 1'700'000'000'000;
  v1::Board out;
  BoardToProto(rec, &out);

  v1::Board expected = agent;
  expected.set_state(v1::BOARD_STATE_OFFLINE);
  expected.set_current_run_id(0);
  *expected.mutable_last_seen() = TimeUtil::MillisecondsToTimestamp(rec.last_seen_ms);
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(expected, out)) << diff;

  agent.set_health(v1::BOARD_HEALTH_SWITCHING);  // the controller's state, never the agent's
  EXPECT_EQ(BoardFromProto(agent).summary.health, BoardHealth::kOk);
}

TEST(ConvertTest, AReportKeepsItsRowsComparisonsCountersAndRuns) {
  JobRecord job;
  job.id = 4;
  job.spec_json = SpecToJson(FullSpec());
  JobReport report;
  report.matrix_keys = {"readers"};
  SummaryRow row;
  row.cell = {{"readers", "8"}};
  row.kernel = "patched";
  row.board = "lab-01";
  row.n = 10;
  row.median = 120;
  row.min = 100;
  row.max = 130;
  row.mean = 118;
  row.failed = 1;
  row.too_coarse = 2;
  row.median_pages_per_second = 5e5;
  report.rows.push_back(row);
  ReportComparison c;
  c.row.cell = row.cell;
  c.row.board = "lab-01";
  c.row.baseline = "vanilla";
  c.row.candidate = "patched";
  c.row.metric = "pages/s";
  c.row.stats.n_a = 10;
  c.row.stats.n_b = 9;
  c.row.stats.median_a = 100;
  c.row.stats.median_b = 120;
  c.row.stats.ratio = 1.2;
  c.row.stats.ci_low = 1.1;
  c.row.stats.ci_high = 1.3;
  c.row.stats.p_value = 1e-4;
  c.row.stats.q_value = 2e-4;
  c.row.stats.paired = true;
  c.row.stats.verdict = stats::Verdict::kImprovement;
  c.row.unpaired.ratio = 1.19;
  c.row.unpaired.ci_low = 1.05;
  c.row.unpaired.ci_high = 1.35;
  CounterComparison k;
  k.name = "vmstat.pgfault";
  k.unit = "round";
  k.median_a = 640;
  k.median_b = 600;
  k.ratio = 0.94;
  k.ci_low = 0.9;
  k.ci_high = 0.97;
  k.p_value = 0.001;
  k.q_value = 0.002;
  k.significant = true;
  k.paired = true;
  c.counters.push_back(k);
  MedianTable table{"mmap_lock Acquisitions And Wait Time", "Metric", "round", {}};
  MedianTableRow lock_row;
  lock_row.label = "Read Lock Count";
  lock_row.baseline = {10, 20.5, 19, 22};
  lock_row.candidate = {9, 5.5, std::nan(""), std::nan("")};
  lock_row.ratio = 0.27;
  lock_row.ci_low = 0.25;
  lock_row.ci_high = 0.3;
  table.rows.push_back(lock_row);
  c.tables.push_back(table);
  report.comparisons.push_back(c);
  report.alpha = 0.01;
  report.min_effect = 0.03;
  report.environment_differences["lab-01/kernel.release"] = "vanilla: a | patched: b";
  report.caveats.push_back("board lab-01 is emulated");
  report.run_results.push_back(
      {{{"readers", "8"}}, "patched", "lab-01", 3, 1200, 120, {{"vmstat.pgfault", 768000}}});

  v1::GetReportResponse out;
  ReportToProto(job, report, &out);
  EXPECT_EQ(out.job().id(), 4);
  EXPECT_EQ(out.job().spec().kernels_size(), 2);
  ASSERT_EQ(out.matrix_keys_size(), 1);
  ASSERT_EQ(out.rows_size(), 1);
  const v1::ReportRow& r = out.rows(0);
  EXPECT_EQ(r.cell().at("readers"), "8");
  EXPECT_EQ(r.kernel(), "patched");
  EXPECT_EQ(r.board(), "lab-01");
  EXPECT_EQ(r.n(), 10u);
  EXPECT_DOUBLE_EQ(r.median(), 120);
  EXPECT_DOUBLE_EQ(r.min(), 100);
  EXPECT_DOUBLE_EQ(r.max(), 130);
  EXPECT_DOUBLE_EQ(r.mean(), 118);
  EXPECT_EQ(r.failed(), 1u);
  EXPECT_EQ(r.too_coarse(), 2u);
  EXPECT_DOUBLE_EQ(r.median_pages_per_second(), 5e5);
  ASSERT_EQ(out.comparisons_size(), 1);
  const v1::Comparison& oc = out.comparisons(0);
  EXPECT_EQ(oc.cell().at("readers"), "8");
  EXPECT_EQ(oc.baseline(), "vanilla");
  EXPECT_EQ(oc.candidate(), "patched");
  EXPECT_EQ(oc.n_baseline(), 10u);
  EXPECT_EQ(oc.n_candidate(), 9u);
  EXPECT_DOUBLE_EQ(oc.baseline_median(), 100);
  EXPECT_DOUBLE_EQ(oc.candidate_median(), 120);
  EXPECT_DOUBLE_EQ(oc.ratio(), 1.2);
  EXPECT_DOUBLE_EQ(oc.ci_low(), 1.1);
  EXPECT_DOUBLE_EQ(oc.ci_high(), 1.3);
  EXPECT_DOUBLE_EQ(oc.p_value(), 1e-4);
  EXPECT_DOUBLE_EQ(oc.q_value(), 2e-4);
  EXPECT_EQ(oc.metric(), "pages/s");
  EXPECT_TRUE(oc.paired());
  EXPECT_DOUBLE_EQ(oc.unpaired_ratio(), 1.19);
  EXPECT_DOUBLE_EQ(oc.unpaired_ci_low(), 1.05);
  EXPECT_DOUBLE_EQ(oc.unpaired_ci_high(), 1.35);
  EXPECT_EQ(oc.verdict(), "improvement");
  ASSERT_EQ(oc.counters_size(), 1);
  EXPECT_EQ(oc.counters(0).name(), "vmstat.pgfault");
  EXPECT_EQ(oc.counters(0).unit(), "round");
  EXPECT_DOUBLE_EQ(oc.counters(0).baseline_median(), 640);
  EXPECT_DOUBLE_EQ(oc.counters(0).candidate_median(), 600);
  EXPECT_DOUBLE_EQ(oc.counters(0).ratio(), 0.94);
  EXPECT_DOUBLE_EQ(oc.counters(0).q_value(), 0.002);
  EXPECT_TRUE(oc.counters(0).significant());
  ASSERT_EQ(oc.tables_size(), 1);
  EXPECT_EQ(oc.tables(0).title(), "mmap_lock Acquisitions And Wait Time");
  EXPECT_EQ(oc.tables(0).first_column(), "Metric");
  EXPECT_EQ(oc.tables(0).unit(), "round");
  ASSERT_EQ(oc.tables(0).rows_size(), 1);
  const v1::MedianTableRow& lr = oc.tables(0).rows(0);
  EXPECT_EQ(lr.label(), "Read Lock Count");
  EXPECT_EQ(lr.baseline().n(), 10u);
  EXPECT_DOUBLE_EQ(lr.baseline().median(), 20.5);
  EXPECT_DOUBLE_EQ(lr.baseline().ci_low(), 19);
  EXPECT_DOUBLE_EQ(lr.baseline().ci_high(), 22);
  EXPECT_EQ(lr.candidate().n(), 9u);
  EXPECT_TRUE(std::isnan(lr.candidate().ci_low()));
  EXPECT_DOUBLE_EQ(lr.ratio(), 0.27);
  EXPECT_DOUBLE_EQ(lr.ci_low(), 0.25);
  EXPECT_DOUBLE_EQ(lr.ci_high(), 0.3);
  EXPECT_DOUBLE_EQ(out.alpha(), 0.01);
  EXPECT_DOUBLE_EQ(out.min_effect(), 0.03);
  EXPECT_EQ(out.environment_differences().at("lab-01/kernel.release"), "vanilla: a | patched: b");
  ASSERT_EQ(out.caveats_size(), 1);
  ASSERT_EQ(out.run_results_size(), 1);
  EXPECT_EQ(out.run_results(0).repetition(), 3u);
  EXPECT_EQ(out.run_results(0).rounds(), 1200u);
  EXPECT_DOUBLE_EQ(out.run_results(0).throughput(), 120);
  EXPECT_DOUBLE_EQ(out.run_results(0).counters().at("vmstat.pgfault"), 768000);
}

// A profiled run's stacks are a result of their own: from the field, or moved out of the
// environment where an agent before the field sent them; never an environment fact.
TEST(ConvertTest, AResultsStacksAreTheirOwnWhicheverAgentSentThem) {
  v1::WorkloadResult now;
  now.set_folded_stacks("main;handle_mm_fault 9\n");
  (*now.mutable_environment())["kernel.release"] = "6.12.0";
  ResultRecord r = ResultFromProto(now);
  EXPECT_EQ(r.folded_stacks, "main;handle_mm_fault 9\n");
  EXPECT_EQ(r.environment_json.find("handle_mm_fault"), std::string::npos) << r.environment_json;

  v1::WorkloadResult older;  // an agent before WorkloadResult.folded_stacks
  (*older.mutable_environment())["profile.folded"] = "main;lock_mm_and_find_vma 3\n";
  (*older.mutable_environment())["kernel.release"] = "6.12.0";
  r = ResultFromProto(older);
  EXPECT_EQ(r.folded_stacks, "main;lock_mm_and_find_vma 3\n");
  EXPECT_EQ(r.environment_json.find("profile.folded"), std::string::npos) << r.environment_json;
  EXPECT_NE(r.environment_json.find("kernel.release"), std::string::npos);

  v1::WorkloadResult plain;
  EXPECT_EQ(ResultFromProto(plain).folded_stacks, "");
}

TEST(ConvertTest, AnAssignmentCarriesItsLimitsAndWarmupParsed) {
  Assignment a;
  a.run_id = 1;
  a.memcg.memory_max = 256ull << 20;
  a.memcg.swap_max = 0;
  a.warmup_ms = 1500;
  a.lease_seconds = 140;
  v1::Assignment out;
  AssignmentToProto(a, &out);
  EXPECT_EQ(out.limits().memory_max(), 256ull << 20);
  EXPECT_FALSE(out.limits().has_memory_high()) << "unset: no memory.high";
  ASSERT_TRUE(out.limits().has_swap_max());
  EXPECT_EQ(out.limits().swap_max(), 0u) << "0 is a limit (no swap), not unset";
  EXPECT_EQ(out.warmup_ms(), 1500u);
  EXPECT_EQ(out.lease_seconds(), 140u);

  a.memcg.swap_max.reset();
  a.memcg.memory_high = 192ull << 20;
  out.Clear();
  AssignmentToProto(a, &out);
  EXPECT_FALSE(out.limits().has_swap_max()) << "unset: unlimited";
  EXPECT_EQ(out.limits().memory_high(), 192ull << 20);
}

// The job's run options go whole (options), and in the older fields for older agents.
TEST(ConvertTest, AnAssignmentCarriesItsRunOptionsWhole) {
  Assignment a;
  a.run_options =
      R"({"events":["sw:page-faults"],"mmap_lock_waits":true,"profile":{"frequency_hz":499}})";
  v1::Assignment out;
  AssignmentToProto(a, &out);
  EXPECT_THAT(out.options().events(), ::testing::ElementsAre("sw:page-faults"));
  EXPECT_TRUE(out.options().mmap_lock_waits());
  EXPECT_EQ(out.options().profile().frequency_hz(), 499u);
  EXPECT_FALSE(out.options().profile().pmu());
  EXPECT_THAT(out.events(), ::testing::ElementsAre("sw:page-faults")) << "older agents";
  EXPECT_TRUE(out.mmap_lock_waits());
  EXPECT_EQ(out.profile().frequency_hz(), 499u);

  a.run_options = "{}";
  out.Clear();
  AssignmentToProto(a, &out);
  EXPECT_EQ(out.options().ByteSizeLong(), 0u);
  EXPECT_FALSE(out.has_profile()) << "no profile: an older agent samples nothing";

  // An option of a newer controller (a rollback) is skipped; the known ones still go.
  a.run_options = R"({"mmap_lock_waits":true,"page_table_walks":true})";
  out.Clear();
  AssignmentToProto(a, &out);
  EXPECT_TRUE(out.options().mmap_lock_waits());
}

}  // namespace
}  // namespace faultline::controller
