// PgStore against a real PostgreSQL 15 (tests/integration/store_fixture.h): Boards and kernel
// switches (pg_boards.cc, the switch orders of pg_work.cc).
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

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
    auto next = testing::NextWork(store_->work(), "dual");
    ASSERT_TRUE(next.ok()) << next.status();
    if (next->kernel_switch) {
      const KernelSwitchOrder& order = *next->kernel_switch;
      EXPECT_NE(order.label, running) << "a switch to the kernel already running";
      EXPECT_EQ(BoardNamed(*store_, "dual").health, BoardHealth::kSwitching);
      // While the board reboots it is offered nothing.
      auto meanwhile = testing::NextWork(store_->work(), "dual");
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
    ASSERT_TRUE(testing::StoreResult(store_->work(), "dual", a.run_id, a.attempt_id, true, "",
                                     GoodResult(3))
                    .ok());
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
  // Every switch is kept for the job, ended by the hello that booted it: its timeline.
  EXPECT_EQ(Count(absl::StrCat("SELECT count(*) FROM kernel_switches WHERE job_id = ", job,
                               " AND board = 'dual' AND outcome = 'booted' AND ended_at >= "
                               "ordered_at")),
            static_cast<int64_t>(blocks) - 1);
  absl::StatusOr<JobTimeline> t = store_->jobs().Timeline(job);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(t->finished_ms, 0);
  EXPECT_EQ(t->switches.size(), blocks - 1);
  ASSERT_EQ(t->runs.size(), 16u);
  for (const auto& r : t->runs) {
    EXPECT_EQ(r.arch, "x86_64");
    EXPECT_GE(r.assigned_ms, t->created_ms);
    EXPECT_GE(r.finished_ms, r.assigned_ms);
  }
  const std::vector<ArchPhases> phases = PhasesOf(*t, 0);
  ASSERT_EQ(phases.size(), 1u);
  double sum = 0;
  for (double x : phases[0].seconds) sum += x;
  EXPECT_NEAR(sum, phases[0].total_seconds, 1e-6);
  // Recorded once: the second controller to try records nothing (and observes nothing).
  auto pending = store_->history().PendingPhases(10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ(pending->front().job_id, job);
  EXPECT_EQ(pending->front().switches.size(), blocks - 1);
  EXPECT_TRUE(*store_->history().StorePhases(job, phases));
  EXPECT_FALSE(*store_->history().StorePhases(job, phases));
  EXPECT_TRUE(store_->history().PendingPhases(10)->empty());
  EXPECT_EQ(Text(absl::StrCat("SELECT jsonb_typeof(phases->'x86_64'->'measuring') FROM jobs "
                              "WHERE id = ",
                              job)),
            "number");
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, KernelSwitchScheduling, ::testing::Values(1u, 2u, 4u));

TEST_F(StoreTest, AFailedSwitchNeedsACheckAndTheBoardGetsNoRuns) {
  DualHello(*store_, "vanilla", "boot-1");
  Submit(1, {"patched"}, 0, {"dual"});
  auto order = testing::NextWork(store_->work(), "dual");
  ASSERT_TRUE(order.ok() && order->kernel_switch);
  EXPECT_EQ(order->kernel_switch->label, "patched");
  EXPECT_NE(order->kernel_switch->reason.find("needs kernel patched"), std::string::npos);

  // Grub fell back to the default entry: a new boot, but on vanilla.
  HealthVerdict h = DualHello(*store_, "vanilla", "boot-2");
  EXPECT_EQ(h.health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(h.reason, "switch to 'patched': the board came back running [vanilla]");
  BoardSummary b = BoardNamed(*store_, "dual");
  EXPECT_EQ(b.health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(Text("SELECT outcome FROM kernel_switches WHERE board = 'dual'"), "other-kernel");
  auto nothing = testing::NextWork(store_->work(), "dual");
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->run || nothing->kernel_switch);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'queued'"), 2);

  // The agent keeps reporting the check until an operator clears it on the board.
  EXPECT_EQ(
      DualHello(*store_, "vanilla", "boot-2", BoardHealth::kNeedsCheck, "checked by nobody").health,
      BoardHealth::kNeedsCheck);
  EXPECT_EQ(DualHello(*store_, "vanilla", "boot-2").health, BoardHealth::kOk);
  auto again = testing::NextWork(store_->work(), "dual");
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
  auto order = testing::NextWork(store.work(), "dual");
  ASSERT_TRUE(order.ok() && order->kernel_switch);
  auto lapsed = store.work().ExpireKernelSwitches();
  ASSERT_TRUE(lapsed.ok());
  EXPECT_EQ(*lapsed, std::vector<std::string>{"dual"});
  BoardSummary b = BoardNamed(store, "dual");
  EXPECT_EQ(b.health, BoardHealth::kNeedsCheck);
  EXPECT_NE(b.health_reason.find("no hello from the new kernel"), std::string::npos);
  EXPECT_TRUE(store.work().ExpireKernelSwitches()->empty());
  EXPECT_EQ(Text("SELECT outcome FROM kernel_switches WHERE board = 'dual'"), "lapsed");
  // A late hello on the right kernel from a new boot settles it after all.
  EXPECT_EQ(DualHello(store, "patched", "boot-2").health, BoardHealth::kOk);
  auto run = testing::NextWork(store.work(), "dual");
  ASSERT_TRUE(run.ok() && run->run);
  EXPECT_EQ(run->run->kernel, "patched");
}

TEST_F(StoreTest, AnUndeliveredSwitchIsAbandoned) {
  DualHello(*store_, "vanilla", "boot-1");
  Submit(1, {"patched"}, 0, {"dual"});
  ASSERT_TRUE(testing::NextWork(store_->work(), "dual")->kernel_switch);
  ASSERT_TRUE(store_->work().AbandonKernelSwitch("dual").ok());
  BoardSummary b = BoardNamed(*store_, "dual");
  EXPECT_EQ(b.health, BoardHealth::kOk);
  EXPECT_EQ(b.kernel_switches, 0u);
  EXPECT_TRUE(testing::NextWork(store_->work(), "dual")->kernel_switch);  // ordered again
  EXPECT_EQ(Count("SELECT count(*) FROM kernel_switches WHERE outcome = 'abandoned'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM kernel_switches WHERE ended_at IS NULL"), 1);
}

}  // namespace
}  // namespace faultline::controller
