// The series robot's passes (orchestration/robot.h) on a real PostgreSQL and a real
// public-inbox archive fed the seed series: what it keeps, what it chooses, the jobs it
// submits (and never twice), and v5 compared with v4.
#include "services/controller/robot/robot.h"

#include <stdlib.h>

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/http_client.h"
#include "common/read_file.h"
#include "google/protobuf/util/json_util.h"
#include "kbuild/process.h"
#include "kbuild/series.h"
#include "nlohmann/json.hpp"
#include "robot/mail.h"
#include "robot/reply.h"
#include "robot/testing/test_inbox.h"
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

class SeriesRobotTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped()) return;
    if (std::string missing = robot::testing::TestInbox::Missing(); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
    archive_.Create();
    ASSERT_FALSE(HasFatalFailure());
    dir_ = archive_.dir();
    inbox_ = archive_.inbox();
    // Boards that boot built kernels and build them, on two arches; "box" (the fixture's)
    // boots only its own.
    for (const auto& [name, arch] : {std::pair{"lab-x86", "x86_64"}, {"lab-arm", "aarch64"}}) {
      BoardRecord b;
      b.summary = {.name = name,
                   .arch = arch,
                   .memory_bytes = 8ull << 30,
                   .kernel_labels = {"stock"},
                   .running_kernel_label = "stock",
                   .running_kernel_labels = {"stock"}};
      b.summary.boots_built_kernels = true;
      b.summary.build_arches = {arch};
      b.facts_json = "{}";
      ASSERT_TRUE(store_->boards().UpsertBoard(b).ok());
    }
    options_.archive = inbox_;
    options_.tree = "/srv/linux.git";
    options_.branch = "mm-unstable";
    v1::JobSpec study;
    study.set_benchmark("filemap-thrash");
    study.set_duration("3s");
    study.set_repetitions(2);
    study.mutable_memcg()->set_memory_max("256M");
    options_.studies = {study};
  }
  void Deliver(const std::vector<std::string>& names) {
    for (const auto& name : names) {
      archive_.Deliver(std::string(FAULTLINE_ROBOT_TESTDATA) + "/" + name);
    }
  }
  RobotPass Pass(const Clock* clock = nullptr) {
    SeriesRobot robot(store_->stores(), options_, clock);
    auto pass = robot.RunOnce();
    EXPECT_TRUE(pass.ok()) << pass.status();
    return pass.ok() ? *pass : RobotPass{};
  }
  SeriesRecord Series(const std::string& id) {
    auto s = store_->robot().GetSeries(id);
    EXPECT_TRUE(s.ok() && s->has_value()) << id;
    return s.ok() && s->has_value() ? **s : SeriesRecord{};
  }
  int64_t Count(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::read_transaction t(c);
    return t.exec1(sql)[0].as<int64_t>();
  }

  static constexpr char kV2[] = "20260430040427.4672-1-baohua@kernel.org";
  static constexpr char kV4[] = "20260804095135.45897-1-zhanghongru@xiaomi.com";
  static constexpr char kV5[] = "20260814085300.7356-1-zhanghongru@xiaomi.com";
  static constexpr char kNet[] = "20260901101010.1000-1-dev@example.org";

  robot::testing::TestInbox archive_;
  std::string dir_, inbox_;
  RobotOptions options_;
};

TEST_F(SeriesRobotTest, ChoosesMmSeriesSubmitsTheirJobsOnceAndComparesV5WithV4) {
  options_.include = {"mm/*", "arch/x86/*"};
  // v2 arrives in two parts: nothing is decided until it is whole.
  Deliver({"v2-0.eml", "v2-1.eml", "v2-2.eml", "v2-review.eml"});
  RobotPass first = Pass();
  EXPECT_EQ(first.mails, 4);
  EXPECT_EQ(first.kept, 3) << "the review is not kept";
  EXPECT_EQ(first.decided, 0);
  Deliver({"v2-3.eml", "v2-4.eml", "v2-5.eml", "net-0.eml", "net-1.eml", "net-2.eml", "v4-0.eml",
           "v4-1.eml", "v4-2.eml", "v4-3.eml"});
  RobotPass second = Pass();
  EXPECT_EQ(second.mails, 10);
  EXPECT_EQ(second.decided, 3);
  EXPECT_EQ(second.chosen, 2);
  EXPECT_EQ(second.submitted, 2);
  const SeriesRecord v2 = Series(kV2);
  EXPECT_EQ(v2.state, SeriesState::kSubmitted);
  EXPECT_EQ(v2.reason, "touches mm/memory.c");
  EXPECT_EQ(v2.base, "e737cebb8de0d38e8f64584a8bbfbcf9176c7537");
  EXPECT_EQ(v2.jobs.size(), 2u) << "one study x two arches";
  const SeriesRecord net = Series(kNet);
  EXPECT_EQ(net.state, SeriesState::kSkipped);
  EXPECT_TRUE(net.jobs.empty());
  // The jobs: base against base + series, on each arch, built from the tree.
  auto job = store_->jobs().GetJob(v2.jobs[0]);
  ASSERT_TRUE(job.ok());
  EXPECT_NE(job->name.find("robot: mm: reduce mmap_lock contention"), std::string::npos)
      << job->name;
  // Labels carry their source's hash (v2@<hash>); the series' source alone has the paths.
  for (const auto& [label, source] :
       nlohmann::json::parse(job->spec_json)["kernel_sources"].items()) {
    EXPECT_EQ(source.value("include", nlohmann::json::array()),
              label.rfind("v2@", 0) == 0 ? nlohmann::json({"mm/*", "arch/x86/*"})
                                         : nlohmann::json::array())
        << label;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM builds"), 6)
      << "the base (one build for v2 and v4: the same key), v2 and v4, for two arches";

  // v5 links v4, which was tested: v5 runs against its base and against v4.
  Deliver({"v5.eml"});
  RobotPass third = Pass();
  EXPECT_EQ(third.chosen, 1);
  const SeriesRecord v5 = Series(kV5);
  EXPECT_EQ(v5.previous, kV4);
  EXPECT_EQ(v5.reason, "touches arch/arm/mm/fault.c");
  ASSERT_EQ(v5.jobs.size(), 4u) << "(vs base, vs v4) x two arches";
  std::set<std::string> names;
  for (int64_t id : v5.jobs) names.insert(store_->jobs().GetJob(id)->name);
  EXPECT_EQ(names.count("robot: mm: retry page faults once under the per-VMA lock v5 vs v4 "
                        "(filemap-thrash, x86_64)"),
            1u);

  // What /metrics shows (faultline_robot_series, faultline_robot_patch_mails).
  auto snapshot = store_->history().Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->robot_series_by_state,
            (std::map<std::string, int64_t>{{"skipped", 1}, {"submitted", 3}}));
  EXPECT_EQ(snapshot->robot_mails, 14) << "v2 6, v4 4, v5 1, netdev 3; not the review";

  // Another controller (or this one restarted) reads nothing again and submits nothing.
  const int64_t jobs = Count("SELECT count(*) FROM jobs");
  RobotPass again = Pass();
  EXPECT_EQ(again.mails, 0);
  EXPECT_EQ(again.decided, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs"), jobs);
  // A pass cut short after submitting and before recording it submits under the same
  // request ids: the same jobs.
  SeriesRecord cut = Series(kV2);
  cut.state = SeriesState::kChosen;
  cut.jobs.clear();
  ASSERT_TRUE(store_->robot().PutSeries(cut).ok());
  Pass();
  EXPECT_EQ(Series(kV2).jobs, v2.jobs);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs"), jobs);

  // Every job of v2 ends: measured.
  for (int64_t id : v2.jobs) ASSERT_TRUE(store_->jobs().CancelJob(id).ok());
  EXPECT_EQ(Pass().measured, 1);
  EXPECT_EQ(Series(kV2).state, SeriesState::kMeasured);
}

TEST_F(SeriesRobotTest, WithoutBoardsThatBootBuiltKernelsAChosenSeriesFailsOnceSayingWhy) {
  options_.arches.clear();
  for (const char* name : {"lab-x86", "lab-arm"}) {
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec_params("DELETE FROM boards WHERE name = $1", std::string(name));
    w.commit();
  }
  Deliver({"v5.eml"});
  Pass();
  const SeriesRecord v5 = Series(kV5);
  EXPECT_EQ(v5.state, SeriesState::kFailed);
  EXPECT_EQ(v5.reason, "no registered board boots built kernels");
  EXPECT_EQ(Pass().submitted, 0) << "decided once";
}

// A stranger's mails (#56): none of them may jam the robot. Each bad one costs itself only
// (kept apart as bytes, its reason counted), and an honest series posted after them still
// gets its jobs.
TEST_F(SeriesRobotTest, NoStrangersMailJamsTheRobot) {
  options_.max_mail_bytes = 64 << 10;
  const std::string dir = dir_ + "/strangers";
  std::filesystem::create_directories(dir);
  auto post = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name, std::ios::binary) << text;
    archive_.Deliver(dir + "/" + name);
  };
  const std::string diff =
      "---\ndiff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n+++ b/mm/memory.c\n"
      "@@ -1,3 +1,3 @@\n int a;\n-int b;\n+int B;\n int c;\n";
  // Invalid UTF-8 in the name, the subject and the body (PostgreSQL's text refuses it).
  post("bytes.eml",
       "From: J\xf6rg \xff <joro@example.org>\nTo: linux-mm@kvack.org\n"
       "Subject: [PATCH] mm: caf\xe9 \xfe\nMessage-ID: <bytes-1@example.org>\n"
       "Date: Mon, 7 Dec 2026 05:00:00 +0000\n\nA change \xc3\x28.\n" +
           diff);
  // A 10,000-patch "series".
  post("bomb.eml",
       "From: S <s@example.org>\nTo: linux-mm@kvack.org\n"
       "Subject: [PATCH 1/10000] mm: one of many\nMessage-ID: <bomb-1@example.org>\n"
       "Date: Mon, 7 Dec 2026 05:00:00 +0000\n\n" +
           diff);
  // A mail larger than the bound.
  post("huge.eml",
       "From: S <s@example.org>\nTo: linux-mm@kvack.org\n"
       "Subject: [PATCH] mm: a large one\nMessage-ID: <huge-1@example.org>\n"
       "Date: Mon, 7 Dec 2026 05:00:00 +0000\n\n" +
           std::string(100 << 10, 'x') + "\n" + diff);
  RobotPass first = Pass();
  EXPECT_EQ(first.errors, 0);
  EXPECT_EQ(first.skipped, 2);
  EXPECT_EQ(
      Count("SELECT count(*) FROM robot_skipped_mails WHERE reason LIKE 'too many patches:%'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_skipped_mails WHERE reason LIKE 'too large:%'"), 1);
  const SeriesRecord bytes = Series("bytes-1@example.org");
  EXPECT_EQ(bytes.state, SeriesState::kSubmitted) << bytes.reason;
  // The mail is kept as the bytes it came as.
  absl::StatusOr<std::vector<std::string>> raws =
      store_->robot().ThreadMails("bytes-1@example.org", 1);
  ASSERT_TRUE(raws.ok()) << raws.status();
  ASSERT_EQ(raws->size(), 1u);
  EXPECT_NE((*raws)[0].find("caf\xe9 \xfe"), std::string::npos);
  // The /metrics snapshot counts them by reason.
  auto snapshot = store_->history().Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->robot_skipped_mails_by_reason["too many patches"], 1);
  EXPECT_EQ(snapshot->robot_skipped_mails_by_reason["too large"], 1);
  // And an honest series after them gets its jobs.
  Deliver({"v5.eml"});
  RobotPass second = Pass();
  EXPECT_EQ(second.errors, 0);
  EXPECT_EQ(Series(kV5).state, SeriesState::kSubmitted);
}

// A flood of series is submitted series_per_pass at a time, oldest first; each waits its
// turn and none is lost.
TEST_F(SeriesRobotTest, AFloodOfSeriesIsSubmittedAFewAPass) {
  options_.series_per_pass = 2;
  const std::string dir = dir_ + "/flood";
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 5; ++i) {
    const std::string file = absl::StrCat(dir, "/", i, ".eml");
    std::ofstream(file) << "From: S <s@example.org>\nTo: linux-mm@kvack.org\n"
                        << "Subject: [PATCH] mm: flood " << i << "\nMessage-ID: <flood-" << i
                        << "@example.org>\nDate: Mon, 7 Dec 2026 05:00:0" << i << " +0000\n\n"
                        << "---\ndiff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n"
                        << "+++ b/mm/memory.c\n@@ -1,3 +1,3 @@\n int a;\n-int b;\n+int B" << i
                        << ";\n int c;\n";
    archive_.Deliver(file);
  }
  RobotPass first = Pass();
  EXPECT_EQ(first.chosen, 5);
  EXPECT_EQ(first.submitted, 2);
  EXPECT_EQ(Pass().submitted, 2);
  EXPECT_EQ(Pass().submitted, 1);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Series(absl::StrCat("flood-", i, "@example.org")).state, SeriesState::kSubmitted);
  }
}

// A cover letter that arrives after its patches (lists reorder mail) makes no second series,
// and the series decided from patch 1 is still found by its id.
TEST_F(SeriesRobotTest, ACoverLetterAfterItsPatchesMakesNoSecondSeries) {
  Deliver({"v4-1.eml", "v4-2.eml", "v4-3.eml"});
  RobotPass first = Pass();
  EXPECT_EQ(first.decided, 1);
  const std::string patch1 = "20260804095135.45897-2-zhanghongru@xiaomi.com";
  EXPECT_EQ(Series(patch1).state, SeriesState::kSubmitted);
  Deliver({"v4-0.eml"});
  RobotPass second = Pass();
  EXPECT_EQ(second.decided, 0) << "the late cover letter made another series";
  EXPECT_EQ(second.errors, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_series"), 1);
  // Its jobs read back its mails by the first patch's id, the cover letter now among them.
  EXPECT_EQ(Pass().errors, 0);
}

// Replies through a real SMTP server (tests/support/smtp_sink.py) that hands each mail to
// public-inbox-mda, as the list would: threaded under the series, within 80 columns, one per
// version whatever happens, a crash between sending and recording never sends again, and the
// rate limit holds.
class SeriesRobotReplyTest : public SeriesRobotTest {
 protected:
  void SetUp() override {
    SeriesRobotTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    sink_dir_ = dir_ + "/sent";
    std::filesystem::create_directories(sink_dir_);
    const std::string deliver = archive_.EnvPrefix() + "public-inbox-mda --no-precheck";
    const std::string port =
        Start("smtp_sink.py --dir " + sink_dir_ + " --deliver-cmd '" + deliver + "'");
    ASSERT_FALSE(port.empty()) << "the SMTP sink did not start";
    const std::string pw_port =
        Start("patchwork_standin.py --token s3cret --patches " +
              std::string(FAULTLINE_ROBOT_TESTDATA) + "/patchwork-patches.json");
    ASSERT_FALSE(pw_port.empty()) << "the patchwork stand-in did not start";
    patchwork_ = "http://127.0.0.1:" + pw_port;
    options_.replies.patchwork = patchwork_;
    options_.replies.patchwork_token = "s3cret";
    options_.replies.from = "faultline robot <robot@faultline.example>";
    options_.replies.smtp = "127.0.0.1:" + port;
    options_.replies.cc = {"mm-tests@faultline.example"};
  }
  void AnswersASeriesThatDoesNotApply(bool typed);
  void TearDown() override {
    for (pid_t pid : servers_) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    SeriesRobotTest::TearDown();
  }
  // Starts tests/support/<script and args> in the background; its port once it is up ("":
  // it did not come up).
  std::string Start(const std::string& script) {
    const std::string port_file = dir_ + "/" + std::to_string(servers_.size()) + ".port";
    auto started = kbuild::Run(
        {.argv = {"sh", "-c",
                  "python3 -W ignore " + std::string(FAULTLINE_TESTS_DIR) + "/support/" + script +
                      " --port-file " + port_file + " >/dev/null 2>&1 & echo $!"}});
    if (!started.ok() || started->exit_code != 0) return "";
    servers_.push_back(std::stoi(started->output));
    // Up once it wrote its port (it writes it after binding).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::string port;
    while (port.empty() && std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      std::getline(in, port);
      if (port.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return port;
  }
  // The faultline checks patchwork holds for a patch, oldest first: "state: description".
  std::vector<std::string> Checks(int64_t patch) {
    auto got = http_client::Send(
        {.url = patchwork_ + "/api/1.2/patches/" + std::to_string(patch) + "/checks/"});
    std::vector<std::string> out;
    if (!got.ok()) return {got.status().ToString()};
    for (const auto& c : nlohmann::json::parse(got->body)) {
      out.push_back(c["state"].get<std::string>() + ": " + c["description"].get<std::string>());
    }
    return out;
  }
  std::vector<std::string> Sent() {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(sink_dir_)) {
      if (e.path().extension() == ".eml") out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  void FinishJobs(const std::string& id) {
    for (int64_t job : Series(id).jobs) ASSERT_TRUE(store_->jobs().CancelJob(job).ok());
  }
  std::string sink_dir_, patchwork_;
  std::vector<pid_t> servers_;
};

TEST_F(SeriesRobotReplyTest, OneThreadedReplyPerVersionNeverTwice) {
  Deliver({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml"});
  Pass();
  FinishJobs(kV4);
  RobotPass replied = Pass();
  EXPECT_EQ(replied.measured, 1);
  EXPECT_EQ(replied.replied, 1);
  ASSERT_EQ(Sent().size(), 1u);
  auto raw = ReadFile(Sent()[0]);
  ASSERT_TRUE(raw.ok());
  auto mail = robot::ParseMail(*raw);
  ASSERT_TRUE(mail.ok()) << mail.status();
  EXPECT_EQ(mail->in_reply_to, kV4);
  EXPECT_EQ(mail->references, std::vector<std::string>{kV4});
  EXPECT_EQ(mail->subject, "Re: [RFC PATCH v4 0/3] mm: retry page faults under the per-VMA lock");
  EXPECT_EQ(mail->from_address, "robot@faultline.example");
  EXPECT_LE(robot::MaxLineWidth(*raw), 80u) << *raw;
  EXPECT_EQ(mail->body.rfind("Nothing measured: no job of 2 compared its kernels", 0), 0u)
      << "the verdict first: " << mail->body;
  EXPECT_NE(mail->body.find("against its base"), std::string::npos) << mail->body;
  EXPECT_NE(mail->body.find("faultline job "), std::string::npos) << "each job's mail report";
  auto rcpt = ReadFile(Sent()[0].substr(0, Sent()[0].size() - 4) + ".rcpt");
  EXPECT_EQ(*rcpt,
            "robot@faultline.example\nzhanghongru@xiaomi.com\nlinux-mm@kvack.org\n"
            "mm-tests@faultline.example\n");
  // Patchwork: each of v4's patches shows the check pending while the jobs ran, then the
  // verdict (these jobs were cancelled: nothing measured).
  for (int64_t patch : {2231101, 2231102, 2231103}) {
    EXPECT_EQ(Checks(patch),
              (std::vector<std::string>{"pending: 2 A/B jobs running (2 arches)",
                                        "fail: no job of 2 measured: see the reply"}))
        << patch;
  }
  // The list archived it: the next pass reads it back and keeps nothing of it.
  RobotPass after = Pass();
  EXPECT_EQ(after.mails, 1);
  EXPECT_EQ(after.kept, 0);
  EXPECT_EQ(after.replied, 0);
  EXPECT_EQ(Sent().size(), 1u);
  EXPECT_EQ(Series(kV4).state, SeriesState::kReplied);

  // v5: its reply is handed to the server, and the controller dies before recording it
  // ("sending" left behind; the archive has the mail). The next pass sends nothing.
  Deliver({"v5.eml"});
  Pass();
  FinishJobs(kV5);
  options_.replies.per_hour = 0;  // the reply is queued, not sent
  Pass();
  auto queued = store_->robot().ListReplies(ReplyState::kQueued, 10);
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->size(), 1u) << "the rate limit held it";
  const ReplyRecord v5_reply = queued->front();
  ASSERT_TRUE(
      *store_->robot().MoveReply(v5_reply.message_id, ReplyState::kQueued, ReplyState::kSending));
  const std::string handed = dir_ + "/handed.eml";
  std::ofstream(handed) << v5_reply.text;
  archive_.Deliver(handed);
  options_.replies.per_hour = 10;
  Pass();
  EXPECT_EQ(Sent().size(), 1u) << "nothing sent again";
  auto settled = store_->robot().ListReplies(ReplyState::kSent, 10);
  ASSERT_TRUE(settled.ok());
  EXPECT_EQ(settled->size(), 2u) << "the archive's copy made it sent";
  for (int i = 0; i < 2; ++i) Pass();
  EXPECT_EQ(Sent().size(), 1u);
  auto v5_mail = robot::ParseMail(v5_reply.text);
  ASSERT_TRUE(v5_mail.ok());
  EXPECT_EQ(v5_mail->in_reply_to, kV5);
  EXPECT_LE(robot::MaxLineWidth(v5_reply.text), 80u) << v5_reply.text;
  EXPECT_NE(v5_mail->body.find("and against v4"), std::string::npos);
  EXPECT_EQ(Checks(2232001),
            (std::vector<std::string>{"pending: 4 A/B jobs running (2 arches)",
                                      "fail: no job of 4 measured: see the reply"}));
}

// Patchwork may refuse a check or not know the patch yet (it reads the list too): the check
// stays in the outbox and is tried again later, backing off, until patchwork takes it or
// it was refused 8 times. A verdict supersedes a pending check not posted yet.
// A pass sends and posts for pass_seconds at most: with servers so slow that every call
// takes a minute, the reply waits for the next pass (and is sent then, once).
TEST_F(SeriesRobotReplyTest, APassStopsItsNetworkWorkAtItsDeadline) {
  class SlowClock final : public Clock {  // a minute passes whenever anyone looks
   public:
    std::chrono::system_clock::time_point Now() const override {
      return start_ + std::chrono::minutes(++looks_);
    }

   private:
    const std::chrono::system_clock::time_point start_ = std::chrono::system_clock::now();
    mutable int looks_ = 0;
  } slow;
  options_.pass_seconds = 90;
  Deliver({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml"});
  Pass();
  FinishJobs(kV4);
  RobotPass late = Pass(&slow);
  EXPECT_EQ(late.measured, 1);
  EXPECT_EQ(late.replied, 0) << "past the deadline: left for the next pass";
  EXPECT_TRUE(Sent().empty());
  EXPECT_EQ(Pass().replied, 1);
  EXPECT_EQ(Sent().size(), 1u);
}

// v5 links v4, v3, v2 and v1; only v2 was tested: it is compared with v2, and its reply says
// v2 (not "v4", the version before it).
TEST_F(SeriesRobotReplyTest, TheReplyNamesTheVersionItWasComparedWith) {
  Deliver({"v2-0.eml", "v2-1.eml", "v2-2.eml", "v2-3.eml", "v2-4.eml", "v2-5.eml"});
  Pass();
  FinishJobs(kV2);
  Pass();
  Deliver({"v5.eml"});
  Pass();
  EXPECT_EQ(Series(kV5).previous, kV2);
  FinishJobs(kV5);
  Pass();
  std::string body;
  for (const std::string& path : Sent()) {
    auto mail = robot::ParseMail(*ReadFile(path));
    ASSERT_TRUE(mail.ok());
    if (mail->in_reply_to == kV5) body = mail->body;
  }
  EXPECT_NE(body.find("against its base and against v2:"), std::string::npos) << body;
  EXPECT_EQ(body.find("against v4"), std::string::npos) << body;
}

TEST_F(SeriesRobotReplyTest, ChecksWaitInTheOutboxUntilPatchworkTakesThem) {
  FakeClock clock(std::chrono::system_clock::now());
  // Patchwork unreachable: one check is tried, the rest wait for a later pass (a pass does
  // not wait a timeout per check).
  options_.replies.patchwork = "http://127.0.0.1:1";
  Deliver({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml", "v2-0.eml", "v2-1.eml", "v2-2.eml",
           "v2-3.eml", "v2-4.eml", "v2-5.eml"});
  EXPECT_EQ(Pass(&clock).checks, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE attempts = 1"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE attempts = 0"), 7);
  // v4 is in patchwork (the token is refused); v2 is not there at all.
  options_.replies.patchwork = patchwork_;
  options_.replies.patchwork_token = "wrong";
  EXPECT_EQ(Pass(&clock).checks, 0);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE status = 'queued' AND attempts = 1 "
                  "AND kind = 'pending'"),
            8)
      << "v4's 3 patches and v2's 5";
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE error LIKE '%403%'"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE error LIKE 'cannot connect%'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE error = "
                  "'patchwork has no patch of that Message-ID yet'"),
            5);
  EXPECT_TRUE(Checks(2231101).empty());
  Pass(&clock);
  EXPECT_EQ(Count("SELECT max(attempts) FROM robot_checks"), 1) << "not due again yet";

  // Patchwork takes the token: v4's pending checks go out on the next due pass.
  options_.replies.patchwork_token = "s3cret";
  clock.Advance(std::chrono::seconds(options_.poll_seconds));
  EXPECT_EQ(Pass(&clock).checks, 3);
  EXPECT_EQ(Checks(2231102), std::vector<std::string>{"pending: 2 A/B jobs running (2 arches)"});

  // Both series end. v4's verdict follows its pending check; v2's supersedes its pending
  // ones, which never went out.
  FinishJobs(kV4);
  FinishJobs(kV2);
  EXPECT_EQ(Pass(&clock).checks, 3);
  EXPECT_EQ(Checks(2231102),
            (std::vector<std::string>{"pending: 2 A/B jobs running (2 arches)",
                                      "fail: no job of 2 measured: see the reply"}));
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE status = 'superseded'"), 5);
  // v2 never reaches patchwork: its verdicts are given up after 8 refusals, backing off
  // (poll_seconds doubling, at most an hour).
  for (int i = 0; i < 12; ++i) {
    clock.Advance(std::chrono::hours(1));
    Pass(&clock);
  }
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE status = 'failed' AND attempts = 8 "
                  "AND kind = 'verdict'"),
            5);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_checks WHERE status = 'posted'"), 6);
  EXPECT_EQ(Checks(2231102).size(), 2u) << "nothing posted twice";
  auto snapshot = store_->history().Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->robot_checks_by_status,
            (std::map<std::string, int64_t>{{"posted", 6}, {"superseded", 5}, {"failed", 5}}));
  EXPECT_EQ(snapshot->robot_replies_by_state, (std::map<std::string, int64_t>{{"sent", 2}}));
}

// A series whose build says it does not apply to its base: its jobs are cancelled and it is
// answered once, naming the patch, the file and the hunk, quoted; patchwork says fail. The
// build carries the failure as a message (what builders send: `typed`), or, stored before
// builds carried it, only its error's words.
void SeriesRobotReplyTest::AnswersASeriesThatDoesNotApply(bool typed) {
  Deliver({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml"});
  Pass();
  const SeriesRecord v4 = Series(kV4);
  ASSERT_EQ(v4.state, SeriesState::kSubmitted);
  // The builder of x86_64 takes v4's kernel and git apply refuses patch 3's hunk: the error
  // as kbuild writes it.
  const int64_t build =
      Count("SELECT id FROM builds WHERE arch = 'x86_64' AND source::text LIKE '%v4.mbox%'");
  std::optional<BuildRecord> claimed;
  for (int i = 0; i < 4 && (!claimed || claimed->id != build); ++i) {
    auto c = store_->builds().ClaimBuild("builder-1", {"x86_64"}, 600);
    ASSERT_TRUE(c.ok()) << c.status();
    claimed = *c;
  }
  ASSERT_TRUE(claimed && claimed->id == build);
  auto mbox = ReadFile(std::string(FAULTLINE_ROBOT_TESTDATA) + "/v4-3.eml");
  ASSERT_TRUE(mbox.ok());
  auto patches = kbuild::SplitMbox("From x\n" + *mbox, "v4.mbox", 3);
  ASSERT_TRUE(patches.ok() && patches->size() == 1u) << patches.status();
  const std::string git_said =
      "error: patch failed: mm/memory.c:10\nerror: mm/memory.c: patch does not apply\n";
  BuildRecord outcome;
  if (typed) {
    // As the builder sends it: the failure kbuild's error carries, beside words the robot
    // does not read (here none it could).
    const std::optional<kbuild::ApplyFailure> f =
        kbuild::ApplyFailureOf(kbuild::ApplyFailureError(patches->front(), git_said));
    ASSERT_TRUE(f.has_value());
    outcome.error = "series: the words of a newer builder";
    outcome.apply_failure = ApplyFailureRecord{.patch = f->index,
                                               .subject = f->subject,
                                               .source = f->source,
                                               .file = f->file,
                                               .hunk = f->hunk,
                                               .reason = f->reason};
  } else {
    outcome.error = "series: " + kbuild::DescribeApplyFailure(patches->front(), git_said);
  }
  ASSERT_TRUE(store_->builds().FinishBuild(build, claimed->attempt_id, false, outcome).ok());

  RobotPass answered = Pass();
  EXPECT_EQ(answered.replied, 1);
  EXPECT_EQ(Series(kV4).state, SeriesState::kReplied);
  auto snapshot = store_->history().Snapshot();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  int64_t builds = 0;
  for (const auto& [state, n] : snapshot->robot_builds_by_state) builds += n;
  EXPECT_EQ(builds, 4) << "the base and v4, on two arches";
  EXPECT_EQ(snapshot->robot_builds_by_state["failed"], 1) << "v4's on x86_64";
  EXPECT_EQ(snapshot->robot_builds_by_state["cancelled"], 3) << "with the series' jobs";
  for (int64_t job : v4.jobs) {
    EXPECT_EQ(store_->jobs().GetJob(job)->state, JobState::kCancelled) << "nothing to measure";
  }
  ASSERT_EQ(Sent().size(), 1u);
  auto raw = ReadFile(Sent()[0]);
  ASSERT_TRUE(raw.ok());
  auto mail = robot::ParseMail(*raw);
  ASSERT_TRUE(mail.ok()) << mail.status();
  EXPECT_EQ(mail->in_reply_to, kV4);
  EXPECT_LE(robot::MaxLineWidth(*raw), 80u) << *raw;
  EXPECT_NE(mail->body.find("faultline could not test this series (v4): it does not apply to\n"
                            "/srv/linux.git\nat e737cebb8de0d38e8f64584a8bbfbcf9176c7537.\n"),
            std::string::npos)
      << mail->body;
  EXPECT_NE(mail->body.find("Patch 3 of 3 fails in mm/memory.c, the hunk @@ -10,3 +10,4 @@:\n"
                            "  [RFC PATCH v4 3/3] mm/swap: allow swap faults to retry under the "
                            "VMA lock\n\n> @@ -10,3 +10,4 @@\n>  int x;\n> +int y;\n"),
            std::string::npos)
      << mail->body;
  EXPECT_EQ(mail->body.find("faultline job "), std::string::npos) << "no report: nothing ran";
  for (int64_t patch : {2231101, 2231102, 2231103}) {
    EXPECT_EQ(Checks(patch),
              (std::vector<std::string>{"pending: 2 A/B jobs running (2 arches)",
                                        "fail: does not apply to e737cebb8de0: patch 3"}))
        << patch;
  }
  // Once: the other arch's build failing the same way changes nothing.
  for (int i = 0; i < 2; ++i) Pass();
  EXPECT_EQ(Sent().size(), 1u);
  EXPECT_EQ(Count("SELECT count(*) FROM robot_replies"), 1);
}

TEST_F(SeriesRobotReplyTest, ASeriesThatDoesNotApplyIsAnsweredOnceWithItsHunk) {
  AnswersASeriesThatDoesNotApply(/*typed=*/true);
}
TEST_F(SeriesRobotReplyTest, ABuildStoredBeforeItCarriedTheFailureIsReadFromItsError) {
  AnswersASeriesThatDoesNotApply(/*typed=*/false);
}

// The nightly side: a bisection started from a change point (a schedule following a branch)
// found its first bad commit and confirmed it: the commit's author gets one mail with the
// bisection and the command that runs it again. One started by hand, or not confirmed,
// gets none.
TEST_F(SeriesRobotReplyTest, TheAuthorOfAConfirmedCulpritGetsOneMail) {
  options_.replies.culprits = true;
  auto add = [&](const std::string& request_id, const std::string& origin,
                 const std::string& confirmation) {
    v1::Bisection doc;
    v1::BisectRequest* r = doc.mutable_request();
    r->set_tree("/srv/linux.git");
    for (int i = 0; i < 3; ++i) {
      v1::BisectCommit* c = r->add_commits();
      c->set_sha(std::string(40, "abc"[i]));
      c->set_subject(absl::StrCat("mm: change ", i));
      c->set_author(absl::StrCat("Dev ", i, " <dev", i, "@example.org>"));
    }
    r->mutable_spec()->set_benchmark("filemap-thrash");
    r->set_origin(origin);
    r->set_command("faultline bisect --from-change 7");
    doc.set_phase("done");
    for (const char* mark : {"good", "bad", "bad"}) doc.add_marks(mark);
    doc.set_culprit(1);
    doc.set_confirmation(confirmation);
    doc.set_revert("good");
    std::string json;
    google::protobuf::util::JsonPrintOptions print;
    print.preserve_proto_field_names = true;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(doc, &json, print).ok());
    auto created = store_->bisections().CreateBisection(request_id, json);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(store_->bisections()
                    .UpdateBisection(created->record.id, BisectionState::kDone, json, 0)
                    .ok());
  };
  add("nightly", "change point 7", "bad");
  add("by-hand", "job 12", "bad");
  add("unconfirmed", "change point 8", "untested");
  ASSERT_FALSE(HasFatalFailure());
  Pass();
  Pass();
  ASSERT_EQ(Sent().size(), 1u) << "one mail, once";
  auto raw = ReadFile(Sent()[0]);
  ASSERT_TRUE(raw.ok());
  auto mail = robot::ParseMail(*raw);
  ASSERT_TRUE(mail.ok()) << mail.status();
  EXPECT_EQ(mail->subject, "[faultline] first bad commit: mm: change 1");
  EXPECT_TRUE(mail->in_reply_to.empty());
  EXPECT_LE(robot::MaxLineWidth(*raw), 80u) << *raw;
  EXPECT_NE(mail->body.find("to your commit:\n\n  bbbbbbbbbbbb mm: change 1\n"), std::string::npos)
      << mail->body;
  EXPECT_NE(mail->body.find("faultline bisect --from-change 7"), std::string::npos)
      << "the command that runs it again: " << mail->body;
  auto rcpt = ReadFile(Sent()[0].substr(0, Sent()[0].size() - 4) + ".rcpt");
  EXPECT_EQ(*rcpt, "robot@faultline.example\ndev1@example.org\nmm-tests@faultline.example\n");
  EXPECT_EQ(Count("SELECT count(*) FROM robot_replies WHERE kind = 'culprit'"), 1);
}

// robot.yaml: the studies and fragments read relative to it, every error naming the field.
TEST(RobotConfig, ReadsTheStudiesAndSaysWhatIsWrong) {
  char tmpl[] = "/tmp/faultline-robot-config-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  write("study.yaml", "benchmark: filemap-thrash\nduration: 5s\nmemcg: {memory_max: 256M}\n");
  write("lab.config", "CONFIG_SWAP=y\n");
  const std::string path = write("robot.yaml",
                                 "archive: mm\ntree: /srv/linux.git\nbranch: mm-unstable\n"
                                 "studies: [study.yaml]\nfragments: [lab.config]\n"
                                 "poll_seconds: 30\ninclude: [mm/*, arch/x86/*]\n");
  auto options = LoadRobotConfig(path);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->archive, (dir / "mm").string());
  EXPECT_EQ(options->studies.size(), 1u);
  EXPECT_EQ(options->studies[0].benchmark(), "filemap-thrash");
  ASSERT_EQ(options->fragments.size(), 1u);
  EXPECT_EQ(options->fragments[0].name(), "lab.config");
  EXPECT_EQ(options->poll_seconds, 30u);
  EXPECT_EQ(options->include, (std::vector<std::string>{"mm/*", "arch/x86/*"}));
  EXPECT_EQ(options->rules.paths.size(), 3u) << "the defaults";
  write("kernels.yaml", "benchmark: filemap-thrash\nduration: 5s\nkernels: [vanilla]\n");
  auto refused = LoadRobotConfig(write(
      "bad.yaml", "archive: mm\ntree: /srv/linux.git\nstudies: [study.yaml, kernels.yaml]\n"));
  EXPECT_EQ(refused.status().message(),
            (dir / "bad.yaml").string() +
                ": studies[1]: names kernels; the robot sets them (base and the series)");
  auto relative = LoadRobotConfig(write("rel.yaml", "archive: mm\ntree: linux\nstudies: [x]\n"));
  EXPECT_NE(relative.status().message().find("tree: an absolute path"), std::string::npos);
  auto nowhere = LoadRobotConfig(write("nowhere.yaml",
                                       "archive: mm\ntree: /srv/linux.git\nstudies: [study.yaml]\n"
                                       "replies: {from: 'robot <r@example.org>'}\n"));
  EXPECT_NE(nowhere.status().message().find("replies: smtp (host:port) or dry_run_dir"),
            std::string::npos)
      << nowhere.status();
  auto dry = LoadRobotConfig(
      write("dry.yaml",
            "archive: mm\ntree: /srv/linux.git\nstudies: [study.yaml]\n"
            "replies: {from: 'robot <r@example.org>', dry_run_dir: out, per_hour: 3}\n"));
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_EQ(dry->replies.dry_run_dir, (dir / "out").string());
  EXPECT_EQ(dry->replies.per_hour, 3u);
  auto unreadable = LoadRobotConfig(
      write("nightly.yaml",
            "archive: mm\ntree: /srv/linux.git\nstudies: [study.yaml]\nbisect_changes: true\n"));
  EXPECT_NE(unreadable.status().message().find(
                "bisect_changes: the controller lists the commits from tree /srv/linux.git"),
            std::string::npos)
      << unreadable.status();
  auto nightly = LoadRobotConfig(write(
      "nightly2.yaml",
      "archive: mm\ntree: " + dir.string() + "\nstudies: [study.yaml]\nbisect_changes: true\n"));
  ASSERT_TRUE(nightly.ok()) << nightly.status();
  EXPECT_TRUE(nightly->bisect_changes);
  auto limited =
      LoadRobotConfig(write("limits.yaml",
                            "archive: mm\ntree: /srv/linux.git\nstudies: [study.yaml]\n"
                            "limits: {mails_per_pass: 50, pass_bytes: 32M, mail_bytes: 1MiB,\n"
                            "         patches: 30, series_bytes: 2M, series_per_pass: 5}\n"));
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->mails_per_pass, 50u);
  EXPECT_EQ(limited->max_pass_bytes, 32u << 20);
  EXPECT_EQ(limited->max_mail_bytes, 1u << 20);
  EXPECT_EQ(limited->max_patches, 30);
  EXPECT_EQ(limited->max_series_bytes, 2u << 20);
  EXPECT_EQ(limited->series_per_pass, 5);
  EXPECT_EQ(options->max_mail_bytes, 8u << 20) << "the default";
  auto bad_size = LoadRobotConfig(write("badsize.yaml",
                                        "archive: mm\ntree: /srv/linux.git\nstudies: [study.yaml]\n"
                                        "limits: {mail_bytes: lots}\n"));
  EXPECT_NE(bad_size.status().message().find("limits.mail_bytes: \"lots\" is not a size above 0"),
            std::string::npos)
      << bad_size.status();
  auto unknown = LoadRobotConfig(write("unk.yaml", "archive: mm\ntreee: /x\n"));
  EXPECT_NE(unknown.status().message().find("treee"), std::string::npos) << unknown.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace faultline::controller
