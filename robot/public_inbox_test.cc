// ReadNewMails against a real public-inbox v2 archive made by public-inbox-init and fed by
// public-inbox-mda, as a list server delivers (Debian's public-inbox).
#include "robot/public_inbox.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "robot/mail.h"
#include "robot/testing/test_inbox.h"

namespace faultline::robot {
namespace {

class PublicInboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string missing = testing::TestInbox::Missing(); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
    archive_.Create();
    ASSERT_FALSE(HasFatalFailure());
    inbox_ = archive_.inbox();
  }

  void Deliver(const std::string& name) {
    archive_.Deliver(std::string(FAULTLINE_ROBOT_TESTDATA) + "/" + name);
  }
  static std::string IdOf(const ArchivedMail& m) {
    auto mail = ParseMail(m.raw);
    return mail.ok() ? mail->message_id : "";
  }

  testing::TestInbox archive_;
  std::string inbox_;
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
  auto wrong = ReadNewMails(archive_.dir(), {}, 10);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(wrong.status().message().find("not a public-inbox v2 archive"), std::string::npos);
}

}  // namespace
}  // namespace faultline::robot
