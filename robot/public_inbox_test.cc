// ReadNewMails against a real public-inbox v2 archive made by public-inbox-init and fed by
// public-inbox-mda, as a list server delivers (Debian's public-inbox).
#include "robot/public_inbox.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
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
  auto first = ReadNewMails(inbox_, {}, {.mails = 2});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->mails.size(), 2u) << "the limit";
  EXPECT_EQ(IdOf(first->mails[0]), "20260430040427.4672-1-baohua@kernel.org");
  EXPECT_EQ(IdOf(first->mails[1]), "20260430040427.4672-2-baohua@kernel.org");
  EXPECT_EQ(first->cursor.at(0), first->mails[1].commit);
  auto rest = ReadNewMails(inbox_, first->cursor, {.mails = 100});
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->mails.size(), 1u);
  EXPECT_EQ(IdOf(rest->mails[0]), "aSip2mWX13sqPW_l@casper.infradead.org");
  auto none = ReadNewMails(inbox_, rest->cursor, {.mails = 100});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->mails.empty()) << "nothing read twice";
  EXPECT_EQ(none->cursor, rest->cursor);
  Deliver("v5.eml");
  auto later = ReadNewMails(inbox_, rest->cursor, {.mails = 100});
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->mails.size(), 1u);
  EXPECT_EQ(IdOf(later->mails[0]), "20260814085300.7356-1-zhanghongru@xiaomi.com");
}

TEST_F(PublicInboxTest, AnEmptyArchiveHasNothingAndADirectoryThatIsNoneSaysSo) {
  auto empty = ReadNewMails(inbox_, {}, {.mails = 10});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->mails.empty());
  auto wrong = ReadNewMails(archive_.dir(), {}, {.mails = 10});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(wrong.status().message().find("not a public-inbox v2 archive"), std::string::npos);
}

// A stranger decides how many mails and bytes a pass meets: however many mails, a read runs
// a few git processes per epoch; a mail over mail_bytes is never read (its size and place
// only); the bytes of one read stay near their bound, the rest comes next time.
TEST_F(PublicInboxTest, AFloodCostsAFewGitProcessesAndABombIsNeverRead) {
  auto post = [&](int n, size_t body) {
    const std::string file = archive_.dir() + "/post.eml";
    std::ofstream(file) << "From: Flood <flood@example.org>\nTo: linux-mm@kvack.org\n"
                        << "Date: Thu, 14 Aug 2026 08:53:00 +0000\n"
                        << "Subject: [PATCH] mm: flood " << n << "\nMessage-ID: <flood-" << n
                        << "@example.org>\n\n"
                        << std::string(body, 'x') << "\n";
    archive_.Deliver(file);
  };
  for (int i = 0; i < 12; ++i) post(i, 100);
  post(12, 3 << 20);  // the bomb
  Deliver("v5.eml");
  constexpr size_t kMails = 14;
  // Every git the read starts goes through this wrapper, which counts it.
  const std::string bin = archive_.dir() + "/bin";
  std::filesystem::create_directories(bin);
  const std::string count = archive_.dir() + "/git-count";
  {
    std::ofstream wrapper(bin + "/git");
    wrapper << "#!/bin/sh\necho x >> " << count << "\nexec /usr/bin/git \"$@\"\n";
  }
  std::filesystem::permissions(bin + "/git", std::filesystem::perms::owner_all);
  const std::string path = ::getenv("PATH");
  ::setenv("PATH", (bin + ":" + path).c_str(), 1);
  auto read = ReadNewMails(inbox_, {}, {.mails = 500, .mail_bytes = 1 << 20});
  ::setenv("PATH", path.c_str(), 1);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->mails.size(), kMails);
  std::ifstream counted(count);
  const std::string calls((std::istreambuf_iterator<char>(counted)),
                          std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 4) << "rev-parse, rev-list, 2 cat-file";
  const ArchivedMail& bomb = read->mails[12];
  EXPECT_GT(bomb.size, 3u << 20);
  EXPECT_TRUE(bomb.raw.empty()) << "over mail_bytes: not read";
  EXPECT_EQ(IdOf(read->mails[13]), "20260814085300.7356-1-zhanghongru@xiaomi.com");
  EXPECT_EQ(IdOf(read->mails[11]), "flood-11@example.org");
  EXPECT_EQ(read->mails[0].raw.size(), read->mails[0].size);

  // A byte budget of one mail: one mail per read, each read on from the last.
  const size_t one = read->mails[0].size;
  ArchiveCursor cursor;
  std::vector<std::string> ids;
  for (int reads = 0; reads < 40 && ids.size() < kMails; ++reads) {
    auto part = ReadNewMails(inbox_, cursor, {.mails = 500, .mail_bytes = 1 << 20, .bytes = one});
    ASSERT_TRUE(part.ok()) << part.status();
    ASSERT_FALSE(part->mails.empty()) << "every read goes on";
    int read_mails = 0;  // the bomb is never read
    for (const ArchivedMail& m : part->mails) {
      read_mails += m.raw.empty() ? 0 : 1;
      ids.push_back(m.commit);
    }
    EXPECT_EQ(read_mails, 1) << "the mail that reaches the bound is the last";
    cursor = part->cursor;
  }
  ASSERT_EQ(ids.size(), kMails);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], read->mails[i].commit) << i;
}

}  // namespace
}  // namespace faultline::robot
