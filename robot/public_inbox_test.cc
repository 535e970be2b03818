// ReadNewMails against a real public-inbox v2 archive made by public-inbox-init and fed by
// public-inbox-mda, as a list server delivers (Debian's public-inbox).
#include "robot/public_inbox.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "kbuild/process.h"
#include "robot/mail.h"

namespace faultline::robot {
namespace {

class PublicInboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kbuild::Run({.argv = {"sh", "-c", "command -v public-inbox-init public-inbox-mda"}})
             .value_or(kbuild::Finished{.exit_code = 1})
             .exit_code == 0) {
      GTEST_SKIP() << "public-inbox is not installed (scripts/install-deps.sh test)";
    }
    char tmpl[] = "/tmp/faultline-inbox-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    inbox_ = dir_ + "/mm";
    env_ = {{"HOME", dir_},
            {"PI_CONFIG", dir_ + "/config"},
            {"ORIGINAL_RECIPIENT", "linux-mm@kvack.org"}};
    Ok({"public-inbox-init", "-V2", "-L", "basic", "mm", inbox_, "http://localhost/mm",
        "linux-mm@kvack.org"});
    Ok({"git", "config", "-f", dir_ + "/config", "publicinboxmda.spamcheck", "none"});
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Ok(std::vector<std::string> argv) {
    auto done = kbuild::Run({.argv = std::move(argv), .env = env_});
    ASSERT_TRUE(done.ok()) << done.status();
    ASSERT_EQ(done->exit_code, 0) << done->output;
  }
  void Deliver(const std::string& name) {
    Ok({"sh", "-c",
        "public-inbox-mda --no-precheck < " + std::string(FAULTLINE_ROBOT_TESTDATA) + "/" + name});
  }
  static std::string IdOf(const ArchivedMail& m) {
    auto mail = ParseMail(m.raw);
    return mail.ok() ? mail->message_id : "";
  }

  std::string dir_, inbox_;
  std::vector<std::pair<std::string, std::string>> env_;
};

TEST_F(PublicInboxTest, ReadsMailsInArrivalOrderAndOnFromItsCursor) {
  Deliver("v2-0.eml");
  Deliver("v2-1.eml");
  Deliver("v2-review.eml");
  auto first = ReadNewMails(inbox_, {}, 2);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->mails.size(), 2u) << "the limit";
  EXPECT_EQ(IdOf(first->mails[0]), "20260430040427.4672-1-baohua@kernel.org");
  EXPECT_EQ(IdOf(first->mails[1]), "20260430040427.4672-2-baohua@kernel.org");
  EXPECT_EQ(first->cursor.at(0), first->mails[1].commit);
  auto rest = ReadNewMails(inbox_, first->cursor, 100);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->mails.size(), 1u);
  EXPECT_EQ(IdOf(rest->mails[0]), "aSip2mWX13sqPW_l@casper.infradead.org");
  auto none = ReadNewMails(inbox_, rest->cursor, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->mails.empty()) << "nothing read twice";
  EXPECT_EQ(none->cursor, rest->cursor);
  Deliver("v5.eml");
  auto later = ReadNewMails(inbox_, rest->cursor, 100);
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->mails.size(), 1u);
  EXPECT_EQ(IdOf(later->mails[0]), "20260814085300.7356-1-zhanghongru@xiaomi.com");
}

TEST_F(PublicInboxTest, AnEmptyArchiveHasNothingAndADirectoryThatIsNoneSaysSo) {
  auto empty = ReadNewMails(inbox_, {}, 10);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->mails.empty());
  auto wrong = ReadNewMails(dir_, {}, 10);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(wrong.status().message().find("not a public-inbox v2 archive"), std::string::npos);
}

}  // namespace
}  // namespace faultline::robot
