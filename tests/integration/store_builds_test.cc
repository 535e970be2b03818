// PgBuildStore: builds created with their job and shared by label, claims under leases,
// fencing by attempt, artifacts by chunk, failures that fail the runs that needed them.
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

class BuildStoreTest : public StoreTest {
 protected:
  // A job on `label` (a built kernel) with its build for x86_64 from `source` (JSON).
  int64_t SubmitBuilt(const std::string& label,
                      const std::string& source = R"({"tree": "/srv/linux.git", "ref": "v6.12"})") {
    BoardRecord board;
    board.summary = {.name = "box",
                     .arch = "x86_64",
                     .memory_bytes = 8ull << 30,
                     .kernel_labels = {"vanilla", label},
                     .running_kernel_label = "vanilla",
                     .running_kernel_labels = {"vanilla"}};
    board.summary.boots_built_kernels = true;
    board.facts_json = R"({"name":"box"})";
    EXPECT_TRUE(store_->boards().UpsertBoard(board).ok());
    JobSpecInput spec;
    spec.benchmark = "filemap-thrash";
    spec.duration = "3s";
    spec.repetitions = 2;
    spec.kernels = {label};
    spec.memory_max = "256M";
    spec.shuffle_seed = 7;
    auto job = ValidateJobSpec(spec, {board.summary});
    EXPECT_TRUE(job.ok()) << job.status();
    job->builds = {{label, "x86_64", source}};
    auto id = store_->jobs().CreateJob(*job, "built", "{}", "");
    EXPECT_TRUE(id.ok()) << id.status();
    return id->job_id;
  }
  // The hello of board "box" on vanilla from boot `boot_id`, booting built kernels.
  static BoardRecord BoxHello(const std::string& boot_id) {
    BoardRecord hello;
    hello.summary = {.name = "box",
                     .arch = "x86_64",
                     .memory_bytes = 8ull << 30,
                     .kernel_labels = {"vanilla"},
                     .running_kernel_label = "vanilla",
                     .running_kernel_labels = {"vanilla"},
                     .boot_id = boot_id};
    hello.summary.boots_built_kernels = true;
    hello.facts_json = R"({"name":"box"})";
    return hello;
  }
  BuildRecord Outcome(const std::string& sha) {
    BuildRecord o;
    o.key = "k";
    o.release = "6.12.0-flabc";
    o.image_sha256 = sha;
    o.series = {"[PATCH] mm: x"};
    o.build_seconds = 12.5;
    return o;
  }
};

constexpr char kSha[] = "0000000000000000000000000000000000000000000000000000000000000abc";

TEST_F(BuildStoreTest, APrebuiltImageIsFetchedByABuilderOfAnyArch) {
  SubmitBuilt("prebuilt@bbbbbbbbbbbb",
              R"({"image": "https://example.org/bzImage", "image_arch": "x86_64"})");
  SubmitBuilt("vanilla@cccccccccccc");
  // An aarch64-only builder compiles nothing for x86_64 but fetches the image.
  auto claimed = store_->builds().ClaimBuild("arm-builder", {"aarch64"}, 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  EXPECT_EQ((*claimed)->label, "prebuilt@bbbbbbbbbbbb");
  EXPECT_FALSE(store_->builds().ClaimBuild("arm-builder", {"aarch64"}, 60)->has_value())
      << "the source build is x86_64's";
}

// Builds never wait behind unrelated work: a prebuilt image first, then builds on a warm
// object directory (the same tree, arch and config built before), then cold ones; a cold
// build queued for 30 minutes is passed over no more.
TEST_F(BuildStoreTest, TheShortestExpectedBuildIsClaimedFirst) {
  const std::string tree_b = R"({"tree": "/srv/b.git", "ref": "v1"})";
  SubmitBuilt("b1@aaaaaaaaaaaa", tree_b);
  auto first = store_->builds().ClaimBuild("builder", {"x86_64"}, 60);
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE(store_->builds().PutArtifact(kSha, "image").ok());
  ASSERT_TRUE(
      store_->builds().FinishBuild((*first)->id, (*first)->attempt_id, true, Outcome(kSha)).ok());
  SubmitBuilt("a1@bbbbbbbbbbbb", R"({"tree": "/srv/a.git", "ref": "v1"})");  // cold
  SubmitBuilt("b2@cccccccccccc",
              R"({"tree": "/srv/b.git", "ref": "v1", "series": [{"name": "x.mbox"}]})");
  SubmitBuilt("b3@dddddddddddd",  // tree b, another config: cold
              R"({"tree": "/srv/b.git", "ref": "v1", "config_base": "defconfig"})");
  SubmitBuilt("p@eeeeeeeeeeee",
              R"({"image": "https://example.org/bzImage", "image_arch": "x86_64"})");
  SubmitBuilt("b4@ffffffffffff", R"({"tree": "/srv/b.git", "ref": "v2"})");  // warm
  std::vector<std::string> order;
  auto claim = [&] {
    auto c = store_->builds().ClaimBuild("builder", {"x86_64"}, 60);
    EXPECT_TRUE(c.ok() && c->has_value());
    order.push_back(c.ok() && c->has_value() ? (*c)->label : "none");
  };
  claim();
  claim();
  // The cold a1 has waited 30 minutes: it goes before the warm b4 queued after it.
  ASSERT_TRUE(
      Exec("UPDATE builds SET created_at = now() - interval '31 minutes' "
           "WHERE label = 'a1@bbbbbbbbbbbb'"));
  claim();
  claim();
  claim();
  EXPECT_EQ(order, (std::vector<std::string>{"p@eeeeeeeeeeee", "b2@cccccccccccc", "a1@bbbbbbbbbbbb",
                                             "b4@ffffffffffff", "b3@dddddddddddd"}));
}

TEST_F(BuildStoreTest, AJobsTimelineHasItsBuildsClaimsAndEnds) {
  const int64_t job = SubmitBuilt("t1@aaaaaaaaaaaa");
  auto before = store_->jobs().Timeline(job);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->builds.size(), 1u);
  EXPECT_EQ(before->builds[0].arch, "x86_64");
  EXPECT_EQ(before->builds[0].started_ms, 0) << "queued: not claimed yet";
  EXPECT_EQ(before->builds[0].finished_ms, 0);
  auto claimed = store_->builds().ClaimBuild("builder", {"x86_64"}, 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  ASSERT_TRUE(store_->builds().PutArtifact(kSha, "image").ok());
  ASSERT_TRUE(store_->builds()
                  .FinishBuild((*claimed)->id, (*claimed)->attempt_id, true, Outcome(kSha))
                  .ok());
  auto after = store_->jobs().Timeline(job);
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->builds[0].started_ms, after->created_ms);
  EXPECT_GE(after->builds[0].finished_ms, after->builds[0].started_ms);
  EXPECT_FALSE(after->runs.empty());
  EXPECT_TRUE(absl::IsNotFound(store_->jobs().Timeline(job + 1000).status()));
}

TEST_F(BuildStoreTest, CancellingAJobStopsTheBuildsNoOtherJobNeeds) {
  const int64_t first = SubmitBuilt("c1@aaaaaaaaaaaa");
  const int64_t second = SubmitBuilt("c2@bbbbbbbbbbbb");
  SubmitBuilt("c2@bbbbbbbbbbbb");  // a third job shares the second's build
  auto claimed = store_->builds().ClaimBuild("builder", {"x86_64"}, 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  ASSERT_EQ((*claimed)->label, "c1@aaaaaaaaaaaa");
  ASSERT_TRUE(store_->jobs().CancelJob(first).ok());
  ASSERT_TRUE(store_->jobs().CancelJob(second).ok());
  auto first_builds = store_->builds().ListBuilds(first);
  ASSERT_TRUE(first_builds.ok());
  ASSERT_EQ(first_builds->size(), 1u);
  EXPECT_EQ((*first_builds)[0].state, BuildState::kFailed);
  EXPECT_NE((*first_builds)[0].error.find("cancelled: job"), std::string::npos);
  // The builder at work on it finds its lease gone.
  EXPECT_FALSE(*store_->builds().RenewBuild((*claimed)->id, (*claimed)->attempt_id, 60));
  // The shared one stays queued for the job that still wants it.
  auto second_builds = store_->builds().ListBuilds(second);
  ASSERT_TRUE(second_builds.ok());
  EXPECT_EQ((*second_builds)[0].state, BuildState::kQueued);
}

TEST_F(BuildStoreTest, ABuiltKernelThatDoesNotComeBackIsBadOnThatBoard) {
  auto& builds = store_->builds();
  const std::string label = "patched@dddddddddddd";
  const int64_t job = SubmitBuilt(label);
  auto claimed = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  ASSERT_TRUE(builds.PutArtifact(kSha, "image").ok());
  ASSERT_TRUE(builds.FinishBuild((*claimed)->id, (*claimed)->attempt_id, true, Outcome(kSha)).ok());
  auto order = testing::NextWork(store_->work(), "box");
  ASSERT_TRUE(order.ok() && order->kernel_switch);
  EXPECT_EQ(order->kernel_switch->label, label);
  // No hello from the new kernel by the deadline.
  {
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec("UPDATE boards SET switch_deadline = now() - interval '1 second'");
    w.commit();
  }
  EXPECT_EQ(*store_->work().ExpireKernelSwitches(), std::vector<std::string>{"box"});
  EXPECT_EQ(Text("SELECT bootable_kernel_labels::text FROM boards WHERE name = 'box'"), "[]");
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'failed' AND failure_reason LIKE "
                  "'kernel patched@dddddddddddd did not boot on board box and no other board can "
                  "boot it: switch to patched@dddddddddddd: no hello from the new kernel by %'"),
            2);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE failed_build IS NOT NULL"), 0)
      << "its build succeeded: a run that did not boot names no failed build";
  EXPECT_EQ(Text(absl::StrCat("SELECT state FROM jobs WHERE id = ", job)), "failed");
  auto listed = builds.ListBuilds(job);
  ASSERT_EQ(listed->size(), 1u);
  ASSERT_EQ(listed->front().bad_boots.size(), 1u);
  EXPECT_EQ(listed->front().bad_boots[0].board, "box");
  EXPECT_EQ(listed->front().bad_boots[0].console, "");
  // The watchdog brought the board back on its default kernel: its hello keeps the switch's
  // console tail, and the board still does not offer the kernel (nor after it is cleared).
  BoardRecord hello = BoxHello("boot-after-watchdog");
  hello.summary.bootable_kernel_labels = {label};  // its cache still has the image
  hello.previous_boot_log = "[  121.0] INFO: task init:1 blocked for more than 120 seconds.\n";
  auto health = store_->boards().UpsertBoard(hello);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(builds.ListBuilds(job)->front().bad_boots[0].console, hello.previous_boot_log);
  EXPECT_EQ(Text("SELECT bootable_kernel_labels::text FROM boards WHERE name = 'box'"), "[]");
  hello.previous_boot_log.clear();
  ASSERT_TRUE(store_->boards().UpsertBoard(hello).ok());
  EXPECT_EQ(Text("SELECT bootable_kernel_labels::text FROM boards WHERE name = 'box'"), "[]");
  EXPECT_EQ(builds.ListBuilds(job)->front().bad_boots[0].console.substr(0, 9), "[  121.0]")
      << "a later hello without a console keeps the one recorded";
  // A configured kernel that does not come back is the admin's: nothing is recorded.
  EXPECT_EQ(Count("SELECT count(*) FROM bad_boots"), 1);
}

// The agent restarted while fetching the image (no boot command ran): its hello from the
// same boot, healthy, is not a failed boot; the switch is ordered again.
TEST_F(BuildStoreTest, ASwitchWhoseAgentRestartedBeforeBootingIsOrderedAgain) {
  auto& builds = store_->builds();
  const std::string label = "patched@eeeeeeeeeeee";
  const int64_t job = SubmitBuilt(label);
  BoardRecord hello = BoxHello("boot-1");
  hello.summary.reports_unbooted_switches = true;
  ASSERT_TRUE(store_->boards().UpsertBoard(hello).ok());
  auto claimed = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  ASSERT_TRUE(builds.PutArtifact(kSha, "image").ok());
  ASSERT_TRUE(builds.FinishBuild((*claimed)->id, (*claimed)->attempt_id, true, Outcome(kSha)).ok());
  auto order = testing::NextWork(store_->work(), "box");
  ASSERT_TRUE(order.ok() && order->kernel_switch);
  EXPECT_EQ(Text("SELECT health FROM boards WHERE name = 'box'"), "switching");

  auto health = store_->boards().UpsertBoard(hello);  // same boot, healthy
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->health, BoardHealth::kOk);
  EXPECT_TRUE(health->switch_not_begun);
  EXPECT_EQ(Count("SELECT count(*) FROM bad_boots"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'failed'"), 0);
  EXPECT_EQ(Text(absl::StrCat("SELECT state FROM jobs WHERE id = ", job)), "queued");
  auto again = testing::NextWork(store_->work(), "box");
  ASSERT_TRUE(again.ok() && again->kernel_switch) << "the switch is ordered again";
  EXPECT_EQ(again->kernel_switch->label, label);

  // An agent without the capability on the same boot: the board did not reboot.
  hello.summary.reports_unbooted_switches = false;
  health = store_->boards().UpsertBoard(hello);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(health->health, BoardHealth::kNeedsCheck);
  EXPECT_EQ(Count("SELECT count(*) FROM bad_boots"), 1);
}

TEST_F(BuildStoreTest, ABuildIsSharedClaimedOnceFencedAndServedByChunk) {
  auto& builds = store_->builds();
  const int64_t first = SubmitBuilt("patched@aaaaaaaaaaaa");
  const int64_t second = SubmitBuilt("patched@aaaaaaaaaaaa");
  EXPECT_EQ(Count("SELECT count(*) FROM builds"), 1) << "the same label is one build";
  EXPECT_EQ(Count("SELECT count(*) FROM job_builds"), 2);
  EXPECT_EQ(builds.ListBuilds(first)->size(), 1u);
  EXPECT_EQ(builds.ListBuilds(second)->front().id, builds.ListBuilds(first)->front().id);

  EXPECT_FALSE(builds.ClaimBuild("b1", {"aarch64"}, 60)->has_value()) << "not its arch";
  auto claimed = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  const BuildRecord b = **claimed;
  EXPECT_EQ(b.attempts, 1u);
  EXPECT_FALSE(builds.ClaimBuild("b2", {"x86_64"}, 60)->has_value()) << "claimed once";
  EXPECT_TRUE(*builds.RenewBuild(b.id, b.attempt_id, 60));
  EXPECT_FALSE(*builds.RenewBuild(b.id, "another-attempt", 60));
  // Done needs the image stored first.
  EXPECT_EQ(builds.FinishBuild(b.id, b.attempt_id, true, Outcome(kSha)).code(),
            absl::StatusCode::kFailedPrecondition);
  std::string image((1 << 20) * 2 + 123, 'x');
  image[0] = 'A';
  image[(1 << 20) + 5] = 'B';
  ASSERT_TRUE(builds.PutArtifact(kSha, image).ok());
  ASSERT_TRUE(builds.PutArtifact(kSha, image).ok()) << "idempotent";
  EXPECT_EQ(*builds.ArtifactBytes(kSha), image.size());
  EXPECT_EQ(Count("SELECT count(*) FROM artifact_chunks"), 3);
  EXPECT_EQ(builds.FinishBuild(b.id, "stale", true, Outcome(kSha)).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(builds.FinishBuild(b.id, b.attempt_id, true, Outcome(kSha)).ok());
  const BuildRecord done = builds.ListBuilds(0)->front();
  EXPECT_EQ(done.state, BuildState::kDone);
  EXPECT_EQ(done.release, "6.12.0-flabc");
  EXPECT_EQ(done.image_bytes, image.size());
  EXPECT_EQ(done.series, std::vector<std::string>{"[PATCH] mm: x"});
  // The board that boots built kernels can now boot it.
  EXPECT_EQ(Text("SELECT bootable_kernel_labels::text FROM boards WHERE name = 'box'"),
            R"(["patched@aaaaaaaaaaaa"])");
  // Read back from an offset inside the second chunk.
  std::string read;
  uint64_t first_at = 0;
  ASSERT_TRUE(builds
                  .ReadArtifact(kSha, (1 << 20) + 5,
                                [&](const std::string& chunk, uint64_t at) {
                                  if (read.empty()) first_at = at;
                                  read += chunk;
                                  return absl::OkStatus();
                                })
                  .ok());
  EXPECT_EQ(first_at, (1u << 20) + 5);
  EXPECT_EQ(read, image.substr((1 << 20) + 5));
  EXPECT_EQ(builds.ArtifactBytes(std::string(64, 'f')).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(BuildStoreTest, ALapsedLeaseGoesToAnotherBuilderThenFailsAfterTheLastAttempt) {
  auto& builds = store_->builds();
  const int64_t job = SubmitBuilt("patched@bbbbbbbbbbbb");
  auto lapse = [&] {
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec("UPDATE builds SET lease_expires = now() - interval '1 second'");
    w.commit();
  };
  auto one = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(one->has_value());
  lapse();
  EXPECT_EQ(*builds.ExpireBuildLeases(2), 1);
  auto two = builds.ClaimBuild("b2", {"x86_64"}, 60);
  ASSERT_TRUE(two->has_value());
  EXPECT_EQ((*two)->attempts, 2u);
  EXPECT_EQ(builds.FinishBuild((*one)->id, (*one)->attempt_id, false, Outcome(kSha)).code(),
            absl::StatusCode::kFailedPrecondition)
      << "the first builder's attempt is fenced off";
  lapse();
  EXPECT_EQ(*builds.ExpireBuildLeases(2), 1);
  EXPECT_EQ(Text("SELECT state || ' ' || error FROM builds"),
            "failed builder lost 2 times (last: b2)");
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE state = 'failed' AND failure_reason LIKE "
                  "'kernel patched@bbbbbbbbbbbb: build % failed: builder lost 2 times%'"),
            2);
  // Which build failed them is a field (a bisection reads it, not the reason's words); a
  // run that did not boot names none.
  EXPECT_EQ(Count("SELECT count(*) FROM runs r JOIN builds b ON b.id = r.failed_build "
                  "WHERE r.kernel = b.label AND b.state = 'failed'"),
            2);
  EXPECT_EQ(Text("SELECT state FROM jobs WHERE id = " + std::to_string(job)), "failed");
}

TEST_F(BuildStoreTest, AFailedBuildFailsItsRunsNamingWhyAndANewJobRetriesIt) {
  auto& builds = store_->builds();
  const int64_t job = SubmitBuilt("patched@cccccccccccc");
  auto b = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(b->has_value());
  BuildRecord outcome;
  outcome.error = "series: patch 1 \"[PATCH] mm: x\" (x.mbox) does not apply: mm/memory.c";
  ASSERT_TRUE(builds.FinishBuild((*b)->id, (*b)->attempt_id, false, outcome).ok());
  EXPECT_EQ(Text("SELECT state FROM jobs WHERE id = " + std::to_string(job)), "failed");
  EXPECT_EQ(Count("SELECT count(*) FROM runs WHERE failure_reason LIKE '%does not apply: "
                  "mm/memory.c'"),
            2);
  SubmitBuilt("patched@cccccccccccc");
  EXPECT_EQ(Text("SELECT state FROM builds"), "queued") << "tried again for the new job";
}

// The failure of a series that did not apply is stored as itself (which patch, where) and
// read back whole, whatever a stranger's subject holds; a failure without one has none.
TEST_F(BuildStoreTest, ASeriesThatDidNotApplyIsStoredAsItsPatchAndHunk) {
  auto& builds = store_->builds();
  const int64_t job = SubmitBuilt("patched@dddddddddddd");
  auto b = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(b.ok() && b->has_value());
  BuildRecord outcome;
  outcome.error = "series: patch 2 ... does not apply";
  outcome.apply_failure = ApplyFailureRecord{.patch = 2,
                                             .subject = "[PATCH 2/2] mm: \"q\" \xe2\x80\x94 \xff",
                                             .source = "v2.mbox",
                                             .file = "mm/memory.c",
                                             .hunk = "@@ -2,3 +2,3 @@",
                                             .reason = ""};
  ASSERT_TRUE(builds.FinishBuild((*b)->id, (*b)->attempt_id, false, outcome).ok());
  auto listed = builds.ListBuilds(job);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  const BuildRecord& read = listed->front();
  EXPECT_EQ(read.state, BuildState::kFailed);
  ASSERT_TRUE(read.apply_failure.has_value());
  EXPECT_EQ(read.apply_failure->patch, 2);
  EXPECT_EQ(read.apply_failure->subject, "[PATCH 2/2] mm: \"q\" \xe2\x80\x94 \xef\xbf\xbd")
      << "a byte that is not UTF-8 comes back as U+FFFD, the rest as sent";
  EXPECT_EQ(read.apply_failure->source, "v2.mbox");
  EXPECT_EQ(read.apply_failure->file, "mm/memory.c");
  EXPECT_EQ(read.apply_failure->hunk, "@@ -2,3 +2,3 @@");
  EXPECT_EQ(read.image_sha256, "");

  const int64_t other = SubmitBuilt("patched@eeeeeeeeeeee");
  auto c = builds.ClaimBuild("b1", {"x86_64"}, 60);
  ASSERT_TRUE(c.ok() && c->has_value());
  BuildRecord broken;
  broken.error = "make: *** [vmlinux] Error 2";
  ASSERT_TRUE(builds.FinishBuild((*c)->id, (*c)->attempt_id, false, broken).ok());
  auto again = builds.ListBuilds(other);
  ASSERT_TRUE(again.ok() && again->size() == 1u);
  EXPECT_FALSE(again->front().apply_failure.has_value());
  EXPECT_EQ(again->front().error, "make: *** [vmlinux] Error 2");
}

}  // namespace
}  // namespace faultline::controller
