// The bisection driver over the in-memory stores: the test plays the boards, giving each
// step job's runs a throughput by the commit their kernel was built from.
#include "services/controller/orchestration/bisection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "faultline/v1/values.h"
#include "google/protobuf/util/json_util.h"
#include "services/controller/convert/bisection.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Sha(int i) {
  std::string s = absl::StrCat(absl::Hex(0x1000 + i, absl::kZeroPad8));
  while (s.size() < 40) s += "abcdef0123";
  return s.substr(0, 40);
}

v1::BisectRequest Request(int commits) {
  v1::BisectRequest r;
  r.set_tree("/srv/linux");
  for (int i = 0; i < commits; ++i) {
    auto* c = r.add_commits();
    c->set_sha(Sha(i));
    c->set_subject(absl::StrCat("commit ", i));
    c->set_author("A U Thor <a@example.org>");
  }
  v1::JobSpec& spec = *r.mutable_spec();
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("5s");
  spec.set_repetitions(3);
  spec.mutable_memcg()->set_memory_max("256M");
  (*spec.mutable_matrix())["threads"].add_values("4");
  (*spec.mutable_matrix())["threads"].add_values("8");
  (*r.mutable_cell())["threads"] = "8";
  r.set_board("x1");
  r.set_metric("throughput");
  return r;
}

class BisectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BoardSummary x86{.name = "x1", .arch = "x86_64", .memory_bytes = 8ull << 30};
    x86.boots_built_kernels = true;
    x86.build_arches = {"x86_64"};
    fake_.boards.AddBoard(x86);
    stores_ = fake_.stores();
  }

  // The commit a run's kernel label names ("good@…", "bad@…", "c<12 hex>@…", "revert@…").
  int IndexOf(const v1::BisectRequest& r, const std::string& kernel) {
    const std::string label = kernel.substr(0, kernel.find('@'));
    if (label == "good") return 0;
    if (label == "bad") return r.commits_size() - 1;
    if (label == "revert") return -1;
    for (int i = 0; i < r.commits_size(); ++i) {
      if (label == "c" + r.commits(i).sha().substr(0, 12)) return i;
    }
    ADD_FAILURE() << "unknown label " << kernel;
    return 0;
  }

  // Plays the boards until the bisection ends: commits from `culprit` on are 20% slower,
  // `broken` ones fail to build; a little deterministic noise on every run.
  v1::Bisection Drive(int64_t id, int culprit, int broken = -1, int max_passes = 200) {
    v1::Bisection b;
    for (int pass = 0; pass < max_passes; ++pass) {
      auto advanced = AdvanceBisections(stores_);
      EXPECT_TRUE(advanced.ok()) << advanced.status();
      auto loaded = LoadBisection(stores_, id);
      EXPECT_TRUE(loaded.ok()) << loaded.status();
      b = *loaded;
      if (b.state() != "running") return b;
      const int64_t job = b.current_job();
      EXPECT_NE(job, 0);
      ++jobs_;
      fake_.jobs.EditRuns(job, [&](RunRecord& run) {
        const int index = IndexOf(b.request(), run.kernel);
        if (index == broken) {
          run.state = RunState::kFailed;
          run.failure_reason = "build failed: mm/memory.c:42: error: expected ';'";
          run.failed_build = 40 + index;  // what the build store sets with the reason
          return;
        }
        run.state = RunState::kSucceeded;
        run.has_result = true;
        run.duration_seconds = 5;
        run.rounds = 100;
        const double jitter = 1 + 0.01 * std::sin(static_cast<double>(run.id));
        const double slow = jobs_ > 1 ? later_slowdown_ : 0.8;  // the first job: the endpoints
        run.throughput = 1000 * jitter * (index >= culprit ? slow : 1.0);
      });
    }
    ADD_FAILURE() << "not finished after " << max_passes << " passes";
    return b;
  }

  FakeStores fake_;
  Stores stores_;
  int jobs_ = 0;
  double later_slowdown_ = 0.8;  // bad/good in the jobs after the endpoints' first
};

TEST_F(BisectionTest, NamesTheCulpritSkipsABrokenCommitAndConfirms) {
  auto started = StartBisection(stores_, Request(17), "r1");
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->state(), "running");
  EXPECT_EQ(started->request().board(), "x1");
  // 16 commits after good; 8 is the first midpoint and does not build.
  const v1::Bisection b = Drive(started->id(), /*culprit=*/11, /*broken=*/8);
  ASSERT_EQ(b.state(), "done") << b.failure();
  EXPECT_EQ(b.culprit(), 11);
  EXPECT_EQ(b.confirmation(), "bad");
  EXPECT_EQ(b.revert(), "good");
  EXPECT_EQ(b.marks(8), "broken");
  EXPECT_NEAR(std::exp(b.effect()), 0.8, 0.01);
  int steps = 0;
  for (const auto& s : b.steps()) {
    if (s.role() == "step") ++steps;
    EXPECT_FALSE(s.jobs().empty()) << s.role();
    if (s.role() == "step" && s.outcome() == "broken") {
      EXPECT_THAT(s.note(), HasSubstr("build failed"));
      // Known from the runs' failed build, not from the reason's words.
      EXPECT_TRUE(s.has_build_failed() && s.build_failed());
    } else {
      EXPECT_FALSE(v1::BuildFailedOf(s)) << s.role();
    }
  }
  EXPECT_LE(steps, 6);  // log2(16) + the broken one + one more
  EXPECT_GT(b.runs(), 0u);
  // Each step's job ran the one cell on the pinned board, triples with both ends.
  auto spec_of = [&](int64_t job) {
    auto record = fake_.jobs.GetJob(job);
    EXPECT_TRUE(record.ok());
    v1::JobSpec spec;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(record->spec_json, &spec).ok());
    return spec;
  };
  const v1::JobSpec step = spec_of(b.steps(1).jobs(0));
  EXPECT_TRUE(step.matrix().empty());
  EXPECT_EQ(step.params().at("threads"), "8");
  EXPECT_THAT(step.boards(), ::testing::ElementsAre("x1"));
  ASSERT_EQ(step.kernels_size(), 3);
  EXPECT_THAT(step.kernels(0), StartsWith("good@"));
  EXPECT_THAT(step.kernels(2), StartsWith("bad@"));
  // The revert: the bad end with the culprit reverted.
  const v1::JobSpec revert = spec_of(b.steps(b.steps_size() - 1).jobs(0));
  bool found = false;
  for (const auto& [label, source] : revert.kernel_sources()) {
    if (label.rfind("revert@", 0) == 0) {
      found = true;
      EXPECT_EQ(source.ref(), Sha(16));
      EXPECT_THAT(source.revert(), ::testing::ElementsAre(Sha(11)));
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(BisectionTest, ResumesFromTheStoreAfterARestart) {
  auto started = StartBisection(stores_, Request(9), "r1");
  ASSERT_TRUE(started.ok()) << started.status();
  // A retry of the start is the same bisection.
  auto again = StartBisection(stores_, Request(9), "r1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), started->id());
  // Nothing but the store carries it: the driver is a free function over the stores, so a
  // new controller's first pass continues the same document.
  const v1::Bisection b = Drive(started->id(), /*culprit=*/3);
  ASSERT_EQ(b.state(), "done") << b.failure();
  EXPECT_EQ(b.culprit(), 3);
}

// A document stored by a controller before the types (the words only) reads back as the
// same bisection, and is written with both from then on.
TEST_F(BisectionTest, ADocumentStoredBeforeTheTypesReadsTheSame) {
  auto started = StartBisection(stores_, Request(17), "r1");
  ASSERT_TRUE(started.ok()) << started.status();
  const v1::Bisection done = Drive(started->id(), /*culprit=*/11, /*broken=*/8);
  ASSERT_EQ(v1::BisectionStateOf(done), v1::BISECTION_STATE_DONE) << done.failure();
  EXPECT_EQ(done.state(), "done") << "the word, for clients of a release before the types";
  EXPECT_EQ(v1::ConfirmationOf(done), v1::BISECT_MARK_BAD);
  EXPECT_EQ(done.confirmation(), "bad");
  ASSERT_EQ(done.commit_marks_size(), done.marks_size());
  EXPECT_EQ(v1::CommitMarkOf(done, 8), v1::BISECT_MARK_BROKEN);
  EXPECT_EQ(done.marks(8), "broken");

  auto record = fake_.bisections.GetBisection(started->id());
  ASSERT_TRUE(record.ok());
  v1::Bisection doc;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(record->doc_json, &doc).ok());
  EXPECT_EQ(doc.bisect_phase(), v1::BISECT_PHASE_DONE) << "stored typed";
  // What an older controller stored: every typed field cleared, the words kept.
  doc.clear_bisect_phase();
  doc.clear_commit_marks();
  doc.clear_confirmed();
  doc.clear_reverted();
  for (v1::BisectStep& step : *doc.mutable_steps()) {
    step.clear_step_role();
    step.clear_step_outcome();
  }
  BisectionRecord older = *record;
  older.doc_json.clear();  // the printer appends
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(doc, &older.doc_json).ok());
  EXPECT_EQ(older.doc_json.find("BISECT_"), std::string::npos) << older.doc_json;
  absl::StatusOr<Bisection> fresh = BisectionFromRecord(*record);
  absl::StatusOr<Bisection> read = BisectionFromRecord(older);
  ASSERT_TRUE(fresh.ok() && read.ok());
  const v1::Bisection a = BisectionToProto(*fresh);
  const v1::Bisection b = BisectionToProto(*read);
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << a.DebugString() << "\nvs\n"
                                                          << b.DebugString();
  EXPECT_EQ(v1::RoleOf(b.steps(0)), v1::BISECT_ROLE_ENDPOINTS);
  EXPECT_EQ(v1::RevertOf(b), v1::BISECT_MARK_GOOD);
}

// A bisection started from a change point says so in a field; one stored before the field
// is known by its origin's words.
TEST(BisectionOrigin, TheChangePointIsAFieldElseTheOriginOfAnOlderController) {
  v1::BisectRequest typed;
  v1::SetChangePoint(&typed, 42);
  EXPECT_EQ(typed.change_point(), 42);
  EXPECT_EQ(typed.origin(), "change point 42");
  EXPECT_EQ(v1::ChangePointOf(typed), 42);
  v1::BisectRequest older;
  older.set_origin("change point 7");
  EXPECT_EQ(v1::ChangePointOf(older), 7);
  for (const char* origin : {"job 7", "change point ", "change point 7x", "change point -1",
                             "change point 99999999999999999999", ""}) {
    older.set_origin(origin);
    EXPECT_EQ(v1::ChangePointOf(older), 0) << origin;
  }
}

TEST_F(BisectionTest, CancellingStopsItsJob) {
  auto started = StartBisection(stores_, Request(9), "r1");
  ASSERT_TRUE(started.ok());
  ASSERT_TRUE(AdvanceBisections(stores_).ok());
  auto running = LoadBisection(stores_, started->id());
  ASSERT_TRUE(running.ok());
  const int64_t job = running->current_job();
  ASSERT_NE(job, 0);
  auto cancelled = CancelBisection(stores_, started->id());
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), "cancelled");
  EXPECT_EQ(fake_.jobs.GetJob(job)->state, JobState::kCancelled);
  ASSERT_TRUE(AdvanceBisections(stores_).ok());
  EXPECT_EQ(LoadBisection(stores_, started->id())->state(), "cancelled");
}

TEST_F(BisectionTest, GoodAndBadThatDoNotDifferSaySoWithTheCi) {
  v1::BisectRequest r = Request(5);
  r.set_max_pairs(12);
  auto started = StartBisection(stores_, r, "");
  ASSERT_TRUE(started.ok());
  const v1::Bisection b = Drive(started->id(), /*culprit=*/100);  // no commit is slower
  ASSERT_EQ(b.state(), "failed");
  EXPECT_THAT(b.failure(), HasSubstr("good and bad do not differ"));
  EXPECT_THAT(b.failure(), HasSubstr("99% CI ["));
}

TEST_F(BisectionTest, TheEffectAndItsIntervalComeFromTheSameSamples) {
  // The endpoints measure bad/good 0.8, every later job 0.6 (a board whose slowdown grew):
  // the displayed d pools every ln(bad/good), and its CI must be that of the same samples
  // (it was the endpoints' CI, around 0.8, next to a d near 0.6).
  later_slowdown_ = 0.6;
  auto started = StartBisection(stores_, Request(9), "r1");
  ASSERT_TRUE(started.ok()) << started.status();
  const v1::Bisection b = Drive(started->id(), /*culprit=*/5);
  ASSERT_EQ(b.state(), "done") << b.failure();
  std::vector<double> y;  // every ln(bad/good): the endpoints' pairs, the triples' bad ends
  std::vector<double> ends;
  for (const auto& s : b.steps()) {
    for (const auto& p : s.pairs()) {
      if (s.role() == "endpoints") {
        y.push_back(std::log(p.candidate() / p.reference()));
        ends.push_back(y.back());
      } else if (s.with_bad() && s.reference() == 0) {
        y.push_back(std::log(p.bad() / p.reference()));
      }
    }
  }
  ASSERT_GT(y.size(), ends.size());
  double mean = 0, ends_mean = 0;
  for (double v : y) mean += v / static_cast<double>(y.size());
  for (double v : ends) ends_mean += v / static_cast<double>(ends.size());
  EXPECT_NEAR(b.effect(), mean, 1e-9);
  EXPECT_LT(b.effect_low(), b.effect());
  EXPECT_GT(b.effect_high(), b.effect());
  EXPECT_NEAR(b.effect() - b.effect_low(), b.effect_high() - b.effect(), 1e-9);
  // The two sources do differ here: the endpoints' own mean is outside the pooled CI.
  EXPECT_TRUE(ends_mean < b.effect_low() || ends_mean > b.effect_high())
      << ends_mean << " [" << b.effect_low() << ", " << b.effect_high() << "]";
}

TEST_F(BisectionTest, BadInputIsRefusedNamingTheField) {
  struct Case {
    std::function<void(v1::BisectRequest&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.mutable_commits()->DeleteSubrange(1, 4); }, "commits: a good and a bad"},
      {[](auto& r) { r.mutable_commits(2)->set_sha("xyz"); }, "commits[2].sha: a full commit id"},
      {[](auto& r) { r.set_tree("relative/path"); }, "tree: an absolute path"},
      {[](auto& r) { r.set_metric("counter:perf.sw:page-faults"); },
       "metric: the spec does not count sw:page-faults"},
      {[](auto& r) { r.set_metric("counter:mmap_lock_wait.read.count"); },
       "metric: mmap_lock_wait.read.count needs run_options.mmap_lock_waits: true"},
      {[](auto& r) { r.set_metric("counter:bogus.thing"); },
       "metric: the spec does not produce counter bogus.thing"},
      {[](auto& r) { r.clear_cell(); }, "cell: the spec sweeps threads"},
      {[](auto& r) { (*r.mutable_cell())["threads"] = "3"; }, "cell.threads: '3' is not in"},
      {[](auto& r) { (*r.mutable_cell())["file_size"] = "1G"; },
       "cell.file_size: the spec does not sweep"},
      {[](auto& r) { r.set_board("ghost"); }, "board: no registered board named ghost"},
      {[](auto& r) {
         r.clear_board();
         r.set_arch("riscv64");
       },
       "arch: no registered board of arch riscv64"},
      {[](auto& r) { r.mutable_spec()->set_duration("0s"); }, "spec (as a step's job): "},
  };
  for (const auto& c : cases) {
    v1::BisectRequest r = Request(5);
    c.edit(r);
    auto started = StartBisection(stores_, r, "");
    ASSERT_FALSE(started.ok()) << c.message;
    EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(started.status().message()), StartsWith(c.message));
  }
}

TEST(BisectionMetric, ThroughputOrACounterPerRound) {
  EXPECT_EQ(MetricValue("throughput", 12.5, 10, "{}"), 12.5);
  EXPECT_EQ(MetricValue("counter:vmstat.pgfault", 12.5, 10, R"({"vmstat.pgfault": 200})"), 20);
  EXPECT_TRUE(std::isnan(MetricValue("counter:vmstat.pgfault", 12.5, 10, R"({"x": 1})")));
}

}  // namespace
}  // namespace faultline::controller
