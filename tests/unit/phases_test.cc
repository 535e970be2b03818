#include "services/controller/core/phases.h"

#include <gtest/gtest.h>

namespace faultline::controller {
namespace {

constexpr int64_t kT0 = 1'000'000;  // the job's submission, ms
int64_t At(double seconds) {
  return kT0 + static_cast<int64_t>(seconds * 1000);
}

const ArchPhases* Arch(const std::vector<ArchPhases>& all, const std::string& arch) {
  for (const auto& a : all) {
    if (a.arch == arch) return &a;
  }
  return nullptr;
}

double Sum(const ArchPhases& a) {
  double s = 0;
  for (double x : a.seconds) s += x;
  return s;
}

// One arch, two builds one after the other on one builder, then a board that switches to
// vanilla, runs, switches to patched, runs.
JobTimeline OneArch() {
  JobTimeline t;
  t.job_id = 7;
  t.created_ms = kT0;
  t.finished_ms = At(400);
  t.builds = {{"x86_64", At(10), At(100)}, {"x86_64", At(120), At(130)}};
  t.switches = {{"x86_64", "b1", At(135), At(160)}, {"x86_64", "b1", At(260), At(290)}};
  t.runs = {{"x86_64", "b1", At(160), At(260)}, {"x86_64", "b1", At(290), At(400)}};
  return t;
}

TEST(Phases, EveryInstantOfOneArchIsOnePhase) {
  const auto phases = PhasesOf(OneArch(), At(9999));
  ASSERT_EQ(phases.size(), 1u);
  const ArchPhases& a = phases[0];
  EXPECT_EQ(a.arch, "x86_64");
  EXPECT_TRUE(a.finished);
  // Queued 0-10 and 100-120 (the second build waited behind the first), building 90 + 10.
  EXPECT_DOUBLE_EQ(a.of(Phase::kBuildQueue), 30);
  EXPECT_DOUBLE_EQ(a.of(Phase::kBuilding), 100);
  // 130-135: no board yet; switches 25 + 30; runs 100 + 110.
  EXPECT_DOUBLE_EQ(a.of(Phase::kBoardWait), 5);
  EXPECT_DOUBLE_EQ(a.of(Phase::kSwitching), 55);
  EXPECT_DOUBLE_EQ(a.of(Phase::kMeasuring), 210);
  EXPECT_DOUBLE_EQ(a.total_seconds, 400);
  EXPECT_DOUBLE_EQ(Sum(a), a.total_seconds) << "the phases partition the time";
}

TEST(Phases, ArchesAreApartAndOverlapsCountOnce) {
  JobTimeline t = OneArch();
  // aarch64: two builds side by side, a board measuring while another one switches.
  t.builds.push_back({"aarch64", At(0), At(300)});
  t.builds.push_back({"aarch64", At(50), At(200)});
  t.switches.push_back({"aarch64", "a2", At(300), At(330)});
  t.runs.push_back({"aarch64", "a1", At(310), At(350)});
  t.runs.push_back({"aarch64", "a2", At(330), At(360)});
  t.finished_ms = At(400);
  const auto phases = PhasesOf(t, At(9999));
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].arch, "aarch64") << "sorted by arch";
  const ArchPhases& a = *Arch(phases, "aarch64");
  EXPECT_DOUBLE_EQ(a.of(Phase::kBuildQueue), 0);
  EXPECT_DOUBLE_EQ(a.of(Phase::kBuilding), 300) << "two builds at once count once";
  EXPECT_DOUBLE_EQ(a.of(Phase::kSwitching), 10) << "300-310; from 310 a board measures";
  EXPECT_DOUBLE_EQ(a.of(Phase::kMeasuring), 50);
  EXPECT_DOUBLE_EQ(a.total_seconds, 360);
  EXPECT_DOUBLE_EQ(Sum(a), 360);
  EXPECT_DOUBLE_EQ(Arch(phases, "x86_64")->of(Phase::kBuilding), 100) << "x86_64 unchanged";
}

TEST(Phases, ABuildAnotherJobMadeEarlierCostsNothing) {
  JobTimeline t;
  t.created_ms = kT0;
  t.finished_ms = At(100);
  t.builds = {{"riscv64", At(-5000), At(-10)}};  // done before the job was submitted
  t.runs = {{"riscv64", "r1", At(2), At(100)}};
  const ArchPhases a = PhasesOf(t, At(9999))[0];
  EXPECT_DOUBLE_EQ(a.of(Phase::kBuildQueue), 0);
  EXPECT_DOUBLE_EQ(a.of(Phase::kBuilding), 0);
  EXPECT_DOUBLE_EQ(a.of(Phase::kBoardWait), 2);
  EXPECT_DOUBLE_EQ(a.of(Phase::kMeasuring), 98);
}

TEST(Phases, AnUnfinishedJobCountsUpToNow) {
  JobTimeline t;
  t.created_ms = kT0;
  t.builds = {{"x86_64", At(5), 0}};          // still building
  t.runs = {{"", "", 0, 0}, {"", "", 0, 0}};  // queued: no board, no arch yet
  const auto phases = PhasesOf(t, At(65));
  ASSERT_EQ(phases.size(), 1u) << "queued runs make no arch of their own";
  EXPECT_FALSE(phases[0].finished);
  EXPECT_DOUBLE_EQ(phases[0].of(Phase::kBuildQueue), 5);
  EXPECT_DOUBLE_EQ(phases[0].of(Phase::kBuilding), 60);
  EXPECT_DOUBLE_EQ(phases[0].total_seconds, 65);

  // Built; a board took one run while the other is queued.
  t.builds[0].finished_ms = At(65);
  t.runs[0] = {"x86_64", "b1", At(70), At(80)};
  const ArchPhases a = PhasesOf(t, At(100))[0];
  EXPECT_FALSE(a.finished) << "a run is still queued";
  EXPECT_DOUBLE_EQ(a.of(Phase::kBoardWait), 5 + 20);
  EXPECT_DOUBLE_EQ(a.of(Phase::kMeasuring), 10);
  EXPECT_DOUBLE_EQ(a.total_seconds, 100);
}

TEST(Phases, AFinishedJobsRunsThatNoBoardTookAreLeftOut) {
  JobTimeline t;
  t.created_ms = kT0;
  t.finished_ms = At(50);
  t.runs = {{"x86_64", "b1", At(1), At(20)}, {"", "", 0, 0}};  // the other was cancelled
  const ArchPhases a = PhasesOf(t, At(9999))[0];
  EXPECT_TRUE(a.finished);
  EXPECT_DOUBLE_EQ(a.total_seconds, 20);
  EXPECT_DOUBLE_EQ(a.of(Phase::kMeasuring), 19);
}

TEST(Phases, Words) {
  EXPECT_STREQ(PhaseName(Phase::kBuildQueue), "build_queue");
  EXPECT_STREQ(PhaseWords(Phase::kBoardWait), "waiting for a board");
  EXPECT_EQ(HumanSeconds(0.4), "0 s");
  EXPECT_EQ(HumanSeconds(48), "48 s");
  EXPECT_EQ(HumanSeconds(310), "5 min 10 s");
  EXPECT_EQ(HumanSeconds(600), "10 min");
  EXPECT_EQ(HumanSeconds(3720), "1 h 2 min");
  EXPECT_EQ(HumanSeconds(-3), "0 s");
  EXPECT_EQ(HumanSeconds(2 * 86400 + 3 * 3600 + 100), "2 d 3 h");
  EXPECT_EQ(HumanSeconds(86400 + 59), "1 d");

  const auto lines = PhaseLines(PhasesOf(OneArch(), 0)[0], 60);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "x86_64, 6 min 40 s: queued for a build 30 s,");
  EXPECT_EQ(lines[1], "  building 1 min 40 s, waiting for a board 5 s,");
  EXPECT_EQ(lines[2], "  switching kernels 55 s, measuring 3 min 30 s.");
  for (const auto& l : lines) EXPECT_LE(l.size(), 60u);
  ArchPhases none{.arch = "riscv64"};
  none.finished = false;
  EXPECT_EQ(PhaseLines(none), std::vector<std::string>{"riscv64, 0 s so far."});
}

}  // namespace
}  // namespace faultline::controller
