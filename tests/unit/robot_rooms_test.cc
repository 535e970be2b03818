// The series robot's rooms over the in-memory stores (#57): no PostgreSQL, no public-inbox.
// The intake assembles a posted series once and stores it (its mbox, its patches' ids); the
// jobs room submits from the stored mbox and the outbox checks its patches by the stored ids,
// neither assembling it again; a series stored before mboxes were kept still goes through.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kernel_label.h"
#include "gtest/gtest.h"
#include "robot/mail.h"
#include "robot/series.h"
#include "services/controller/convert/convert.h"
#include "services/controller/orchestration/submission.h"
#include "services/controller/robot/intake.h"
#include "services/controller/robot/jobs.h"
#include "services/controller/robot/outbox.h"
#include "services/controller/robot/verdict.h"
#include "tests/support/fake_stores.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;

constexpr char kV4[] = "20260804095135.45897-1-zhanghongru@xiaomi.com";

std::string Testdata(const std::string& name) {
  std::ifstream in(std::string(FAULTLINE_ROBOT_TESTDATA) + "/" + name, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

class RobotRoomsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BoardSummary x86{.name = "lab-x86", .arch = "x86_64", .memory_bytes = 8ull << 30};
    x86.boots_built_kernels = true;
    x86.build_arches = {"x86_64"};
    fake_.boards.AddBoard(x86);
    options_.tree = "/srv/linux.git";
    options_.branch = "mm-unstable";
    options_.replies.patchwork = "http://patchwork.invalid";
    v1::JobSpec study;
    study.set_benchmark("filemap-thrash");
    study.set_duration("3s");
    study.set_repetitions(2);
    study.mutable_memcg()->set_memory_max("256M");
    options_.studies = {study};
  }
  // The mails kept as the intake keeps them (its archive read is public-inbox's, not here).
  void Keep(const std::vector<std::string>& names) {
    std::vector<KeptMail> kept;
    for (const std::string& name : names) {
      const std::string raw = Testdata(name);
      auto mail = robot::ParseMail(raw);
      ASSERT_TRUE(mail.ok()) << name << ": " << mail.status();
      auto tag = robot::ParseSubject(mail->subject);
      ASSERT_TRUE(tag.has_value()) << name;
      kept.push_back({.message_id = mail->message_id,
                      .thread_root = robot::ThreadRoot(*mail),
                      .version = tag->version,
                      .raw = raw});
    }
    ASSERT_TRUE(fake_.robot.KeepMails("mm", kept, {{0, "c1"}}).ok());
  }
  // The source of the kernel `label` a job brought to be built.
  v1::KernelSource Source(int64_t job_id, const std::string& label) {
    v1::KernelSource source;
    for (const BuildRequest& b : fake_.jobs.builds(job_id)) {
      if (KernelLabel::Parse(b.label).name != label) continue;  // "v4@<source hash>"
      return KernelSourceFromJson(b.source_json);
    }
    std::string labels;
    for (const BuildRequest& b : fake_.jobs.builds(job_id)) labels += " " + b.label;
    ADD_FAILURE() << "job " << job_id << " builds no " << label << ":" << labels;
    return source;
  }
  SeriesRecord Series(const std::string& id) {
    auto s = fake_.robot.GetSeries(id);
    EXPECT_TRUE(s.ok() && s->has_value()) << id;
    return s.ok() && s->has_value() ? **s : SeriesRecord{};
  }

  FakeStores fake_;
  RobotOptions options_;
};

TEST_F(RobotRoomsTest, ASeriesIsAssembledOnceThenSubmittedAndCheckedFromTheStore) {
  Keep({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml"});
  ASSERT_FALSE(HasFatalFailure());
  const Stores stores = fake_.stores();
  RobotIntake intake(stores, options_);
  RobotPass pass;
  ASSERT_TRUE(intake.Decide(kV4, 4, pass).ok());
  EXPECT_EQ(pass.chosen, 1);
  SeriesRecord v4 = Series(kV4);
  EXPECT_EQ(v4.state, SeriesState::kChosen) << v4.reason;
  ASSERT_EQ(v4.patch_ids.size(), 3u);
  EXPECT_EQ(v4.patch_ids[0], "20260804095135.45897-2-zhanghongru@xiaomi.com");
  const std::string mbox = *fake_.robot.SeriesMbox(kV4);
  EXPECT_NE(mbox.find("[RFC PATCH v4 1/3]"), std::string::npos);
  EXPECT_NE(mbox.find("[RFC PATCH v4 3/3]"), std::string::npos);
  EXPECT_EQ(fake_.robot.thread_mails_calls(), 1) << "assembled once, by the intake";

  RobotOutbox outbox(stores, options_, &fake_.own_clock);
  RobotJobs jobs(stores, options_, outbox);
  ASSERT_TRUE(jobs.Submit(v4, pass).ok());
  v4 = Series(kV4);
  ASSERT_EQ(v4.state, SeriesState::kSubmitted) << v4.reason;
  ASSERT_EQ(v4.jobs.size(), 1u) << "one study on one arch, against its base";
  const v1::KernelSource patched = Source(v4.jobs[0], "v4");
  ASSERT_EQ(patched.series_size(), 1);
  EXPECT_EQ(patched.series(0).name(), robot::SeriesMboxName(4));
  EXPECT_EQ(patched.series(0).content(), mbox) << "built from the stored mbox, byte for byte";
  EXPECT_TRUE(patched.untrusted());
  auto due = fake_.robot.DueChecks(fake_.own_clock.NowMs(), 10);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 3u) << "a pending check per patch";
  for (size_t i = 0; i < due->size(); ++i) {
    EXPECT_EQ((*due)[i].patch_message_id, v4.patch_ids[i]);
    EXPECT_EQ((*due)[i].kind, CheckKind::kPending);
  }
  EXPECT_EQ(fake_.robot.thread_mails_calls(), 1) << "neither jobs nor outbox assembled it again";
}

// Stored before the intake kept mboxes and patch ids (an older controller's row): the rooms
// assemble it from its kept mails, once each, and it goes through the same.
TEST_F(RobotRoomsTest, ASeriesStoredWithoutItsMboxIsAssembledFromItsMails) {
  Keep({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml"});
  ASSERT_FALSE(HasFatalFailure());
  SeriesRecord old{.id = kV4,
                   .thread_root = kV4,
                   .version = 4,
                   .title = "mm: retry under the VMA lock",
                   .from = "Hongru Zhang <zhanghongru@xiaomi.com>",
                   .state = SeriesState::kChosen,
                   .reason = "touches mm/memory.c",
                   .base = "mm-unstable"};
  ASSERT_TRUE(fake_.robot.PutSeries(old).ok());
  const Stores stores = fake_.stores();
  RobotOutbox outbox(stores, options_, &fake_.own_clock);
  RobotJobs jobs(stores, options_, outbox);
  RobotPass pass;
  ASSERT_TRUE(jobs.Submit(old, pass).ok());
  const SeriesRecord submitted = Series(kV4);
  ASSERT_EQ(submitted.state, SeriesState::kSubmitted) << submitted.reason;
  const v1::KernelSource patched = Source(submitted.jobs.at(0), "v4");
  ASSERT_EQ(patched.series_size(), 1);
  EXPECT_NE(patched.series(0).content().find("[RFC PATCH v4 2/3]"), std::string::npos);
  EXPECT_EQ(fake_.robot.DueChecks(fake_.own_clock.NowMs(), 10)->size(), 3u);
  EXPECT_EQ(fake_.robot.thread_mails_calls(), 2) << "once for the mbox, once for the checks";
}

// Its kept mails gone (nothing to build): the series fails once, saying why; no job.
TEST_F(RobotRoomsTest, ASeriesWhoseMailsAreGoneFailsSayingWhy) {
  SeriesRecord lost{.id = "lost@x",
                    .thread_root = "lost@x",
                    .version = 1,
                    .title = "t",
                    .from = "f",
                    .state = SeriesState::kChosen,
                    .base = "mm-unstable"};
  ASSERT_TRUE(fake_.robot.PutSeries(lost).ok());
  const Stores stores = fake_.stores();
  RobotOutbox outbox(stores, options_, &fake_.own_clock);
  RobotJobs jobs(stores, options_, outbox);
  RobotPass pass;
  ASSERT_TRUE(jobs.Submit(lost, pass).ok());
  const SeriesRecord failed = Series("lost@x");
  EXPECT_EQ(failed.state, SeriesState::kFailed);
  EXPECT_EQ(failed.reason, "series lost@x: its mails are not kept");
  EXPECT_TRUE(failed.jobs.empty());
}

}  // namespace
// The kinds of the robot's mails and checks are stored by name and read back; a name the
// store does not know is no kind.
// A reply's footer says where the time went: from the posting (the mail's Date, when it is
// one a list could have carried) to the reply, and each job's phases per arch.
TEST_F(RobotRoomsTest, AReplySaysWhereTheTimeWent) {
  fake_.boards.AddBoard(fakes::VanillaBoard("lab-x86-stock", {"vanilla"}));
  v1::JobSpec spec = options_.studies[0];
  spec.add_kernels("vanilla");
  auto submitted = SubmitSpec(&fake_.boards, &fake_.jobs, spec, "");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t job = submitted->created.job_id;
  constexpr int64_t kPosted = int64_t{1796619600} * 1000;  // 2026-12-07 05:00 UTC
  JobTimeline t;
  t.job_id = job;
  t.created_ms = kPosted + 40'000;  // the robot read it 40 s after posting
  t.finished_ms = kPosted + 640'000;
  t.builds = {{"x86_64", kPosted + 45'000, kPosted + 345'000}};
  t.switches = {{"x86_64", "lab-x86", kPosted + 350'000, kPosted + 380'000}};
  t.runs = {{"x86_64", "lab-x86", kPosted + 380'000, kPosted + 640'000}};
  fake_.jobs.SetTimeline(t);
  SeriesRecord series;
  series.jobs = {job};
  const int64_t now = kPosted + 650'000;
  auto text = TimingParagraph(fake_.stores(), series, kPosted, now);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, absl::StrCat("Time: posted 2026-12-07 05:00 UTC, this reply 10 min 50 s later.\n"
                                "Job ",
                                job,
                                ", from its submission:\n"
                                "  x86_64, 10 min: queued for a build 5 s, building 5 min,\n"
                                "    waiting for a board 5 s, switching kernels 30 s, measuring "
                                "4 min 20 s.\n"));
  // A Date a stranger wrote: in the future, or from before any list carried the series.
  for (int64_t posted : {now + 1000, now - int64_t{31} * 24 * 3600 * 1000, int64_t{0}}) {
    auto odd = TimingParagraph(fake_.stores(), series, posted, now);
    ASSERT_TRUE(odd.ok());
    EXPECT_EQ(odd->substr(0, 6), "Time:\n") << posted;
  }
}

TEST(RobotKinds, AreStoredByNameAndReadBack) {
  for (ReplyKind k : {ReplyKind::kResults, ReplyKind::kApply, ReplyKind::kCulprit}) {
    EXPECT_EQ(ParseReplyKind(ToString(k)), k) << ToString(k);
  }
  for (CheckKind k : {CheckKind::kPending, CheckKind::kVerdict}) {
    EXPECT_EQ(ParseCheckKind(ToString(k)), k) << ToString(k);
  }
  EXPECT_EQ(ToString(ReplyKind::kApply), "apply") << "the stored spelling (robot_replies.kind)";
  EXPECT_FALSE(ParseReplyKind("pending").has_value());
  EXPECT_FALSE(ParseCheckKind("results").has_value());
  // What a check says: patchwork's words, stored and posted as they are.
  for (CheckState c :
       {CheckState::kPending, CheckState::kSuccess, CheckState::kWarning, CheckState::kFail}) {
    EXPECT_EQ(ParseCheckState(ToString(c)), c) << ToString(c);
  }
  EXPECT_EQ(ToString(CheckState::kWarning), "warning") << "patchwork's spelling";
  EXPECT_FALSE(ParseCheckState("verdict").has_value());
}

}  // namespace faultline::controller
