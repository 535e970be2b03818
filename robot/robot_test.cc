#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/read_file.h"
#include "common/strings.h"
#include "robot/choose.h"
#include "robot/mail.h"
#include "robot/reply.h"
#include "robot/series.h"

namespace faultline::robot {
namespace {

Mail Load(const std::string& name) {
  auto raw = ReadFile(std::string(FAULTLINE_ROBOT_TESTDATA) + "/" + name);
  EXPECT_TRUE(raw.ok()) << raw.status();
  auto mail = ParseMail(raw.ok() ? *raw : "");
  EXPECT_TRUE(mail.ok()) << name << ": " << mail.status();
  return mail.ok() ? *mail : Mail{};
}

std::vector<Mail> LoadAll(const std::vector<std::string>& names) {
  std::vector<Mail> out;
  for (const auto& n : names) out.push_back(Load(n));
  return out;
}

TEST(Mail, HeadersUnfoldedDecodedAndThreaded) {
  const Mail cover = Load("v2-0.eml");
  EXPECT_EQ(cover.message_id, "20260430040427.4672-1-baohua@kernel.org");
  EXPECT_EQ(cover.subject,
            "[PATCH v2 0/5] mm: reduce mmap_lock contention and improve page fault performance");
  EXPECT_EQ(cover.from_address, "baohua@kernel.org");
  EXPECT_EQ(cover.cc, (std::vector<std::string>{"david@kernel.org", "liam@infradead.org"}));
  const Mail patch = Load("v2-3.eml");
  EXPECT_EQ(patch.in_reply_to, cover.message_id);
  EXPECT_EQ(ThreadRoot(patch), cover.message_id);
  EXPECT_EQ(ThreadRoot(cover), cover.message_id);
}

TEST(Mail, EncodedWordsAndQuotedPrintableBodies) {
  EXPECT_EQ(DecodeWords("=?UTF-8?q?Barry_Song_=28Xiaomi=29?= <baohua@kernel.org>"),
            "Barry Song (Xiaomi) <baohua@kernel.org>");
  EXPECT_EQ(DecodeWords("=?utf-8?B?T3Zlbg==?= =?utf-8?B?IExpeWFuZw==?="), "Oven Liyang");
  EXPECT_EQ(DecodeWords("plain =?bogus"), "plain =?bogus");
  auto mail = ParseMail(
      "Message-ID: <a@b>\r\nSubject: =?UTF-8?Q?[PATCH]_mm:_caf=C3=A9?=\r\n"
      "Content-Transfer-Encoding: quoted-printable\r\n\r\nline=\r\n one =3D two\r\n");
  ASSERT_TRUE(mail.ok());
  EXPECT_EQ(mail->subject, "[PATCH] mm: caf\xC3\xA9");
  EXPECT_EQ(mail->body, "line one = two\n");
  EXPECT_FALSE(ParseMail("Subject: no id\n\nbody\n").ok());
}

TEST(Mail, DateReadAsATimeOrNone) {
  // 2026-12-07 05:00:00 UTC, written in another zone.
  auto mail = ParseMail("Message-ID: <a@b>\nDate: Mon, 7 Dec 2026 06:00:00 +0100\n\nx\n");
  ASSERT_TRUE(mail.ok());
  EXPECT_EQ(mail->date_ms, int64_t{1796619600} * 1000);
  // What a stranger may write instead of a date: none, never a guess.
  for (const char* date : {"yesterday", "", "\xff\xfe", "Mon, 99 Foo 99999 99:99:99 +9999"}) {
    auto odd = ParseMail(absl::StrCat("Message-ID: <a@b>\nDate: ", date, "\n\nx\n"));
    ASSERT_TRUE(odd.ok()) << date;
    EXPECT_EQ(odd->date_ms, 0) << date;
  }
  EXPECT_EQ(ParseMail("Message-ID: <a@b>\n\nx\n")->date_ms, 0);
}

TEST(Subject, TagsOfTheSeeds) {
  auto v2 = ParseSubject("[PATCH v2 3/5] mm: Don't retry page fault");
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->version, 2);
  EXPECT_EQ(v2->index, 3);
  EXPECT_EQ(v2->total, 5);
  EXPECT_FALSE(v2->rfc);
  EXPECT_EQ(v2->title, "mm: Don't retry page fault");
  auto v5 = ParseSubject("[RFC PATCH v5] mm: retry page faults once under the per-VMA lock");
  ASSERT_TRUE(v5);
  EXPECT_TRUE(v5->rfc);
  EXPECT_EQ(v5->version, 5);
  EXPECT_EQ(v5->index, 1);
  EXPECT_EQ(v5->total, 1);
  auto prefixed = ParseSubject("[PATCH mm-unstable v3 0/2] mm: x");
  ASSERT_TRUE(prefixed);
  EXPECT_EQ(prefixed->prefixes, "mm-unstable");
  EXPECT_EQ(prefixed->index, 0);
  EXPECT_TRUE(ParseSubject("Re: [PATCH v2 0/5] mm: x")->reply);
  EXPECT_FALSE(ParseSubject("mm: a question about folios"));
  EXPECT_EQ(ParseSubject("[PATCH] mm: x")->version, 1);
}

TEST(Series, TheSeedsAssembleIntoThreeVersionsAndAReviewIsNone) {
  const std::vector<Mail> mails =
      LoadAll({"v2-3.eml", "v2-0.eml", "v2-1.eml", "v2-review.eml", "v2-2.eml", "v2-4.eml",
               "v2-5.eml", "v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml", "v5.eml"});
  const std::vector<Series> series = AssembleSeries(mails);
  ASSERT_EQ(series.size(), 3u);
  const Series& v2 = series[0];
  EXPECT_EQ(v2.id, "20260430040427.4672-1-baohua@kernel.org");
  EXPECT_EQ(v2.version, 2);
  EXPECT_TRUE(v2.complete());
  EXPECT_EQ(v2.title, "mm: reduce mmap_lock contention and improve page fault performance");
  EXPECT_EQ(v2.BaseCommit(), "e737cebb8de0d38e8f64584a8bbfbcf9176c7537");
  EXPECT_EQ(v2.Mails().size(), 6u);
  EXPECT_EQ(v2.Mails()[1]->message_id, "20260430040427.4672-2-baohua@kernel.org")
      << "patches in order, whatever the archive's order";
  const Series& v4 = series[1];
  EXPECT_TRUE(v4.rfc);
  EXPECT_EQ(v4.total, 3);
  EXPECT_TRUE(v4.complete());
  EXPECT_EQ(v4.EarlierVersions(),
            (std::map<int, std::string>{{2, "20260430040427.4672-1-baohua@kernel.org"},
                                        {3, "20260626075019.1833065-1-zhanghongru@xiaomi.com"}}));
  const Series& v5 = series[2];
  EXPECT_EQ(v5.id, "20260814085300.7356-1-zhanghongru@xiaomi.com");
  EXPECT_TRUE(v5.complete());
  EXPECT_EQ(v5.EarlierVersions().at(4), v4.id);
  EXPECT_EQ(v5.BaseCommit(), "e737cebb8de0d38e8f64584a8bbfbcf9176c7537");
  EXPECT_EQ(v5.TouchedFiles().size(), 7u);
  EXPECT_EQ(v5.TouchedFiles().back(), "arch/x86/mm/fault.c");
}

TEST(Series, AMissingPatchLeavesItIncompleteAndTheMboxHoldsEveryMail) {
  const std::vector<Series> partial = AssembleSeries(LoadAll({"v4-0.eml", "v4-1.eml", "v4-3.eml"}));
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_FALSE(partial[0].complete());
  EXPECT_EQ(Choose(partial[0], {}).reason, "incomplete: 2 of 3 patches");
  const std::vector<Series> whole =
      AssembleSeries(LoadAll({"v4-0.eml", "v4-1.eml", "v4-2.eml", "v4-3.eml"}));
  const std::string mbox = whole[0].Mbox();
  size_t mails = 0;
  for (size_t at = 0; (at = mbox.find("\nFrom faultline-robot ", at)) != std::string::npos; ++at) {
    ++mails;
  }
  EXPECT_EQ(mails + 1, 4u) << "one \"From \" line per mail";
  EXPECT_NE(mbox.find("[RFC PATCH v4 2/3]"), std::string::npos);
}

TEST(Choose, MmSeriesAreChosenOthersAreNotUnlessTheyOptIn) {
  const std::vector<Series> series =
      AssembleSeries(LoadAll({"v2-0.eml", "v2-1.eml", "v2-2.eml", "v2-3.eml", "v2-4.eml",
                              "v2-5.eml", "v5.eml", "net-0.eml", "net-1.eml", "net-2.eml"}));
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(Choose(series[0], {}).reason, "touches mm/memory.c");
  EXPECT_TRUE(Choose(series[0], {}).chosen);
  EXPECT_EQ(Choose(series[1], {}).reason, "touches arch/arm/mm/fault.c");
  const Choice net = Choose(series[2], {});
  EXPECT_FALSE(net.chosen);
  EXPECT_EQ(net.reason, "touches no file of mm/*, include/linux/mm*, arch/*/mm/*");
  Series opted = series[2];
  opted.cover->body += "\nFaultline-Test: yes\n";
  EXPECT_TRUE(Choose(opted, {}).chosen);
  EXPECT_FALSE(Choose(opted, {.paths = {"mm/*"}, .opt_in_tag = ""}).chosen);
}

TEST(Reply, ThreadedUnderTheAnsweredMailWithOneIdPerSeriesAndKind) {
  const Mail cover = Load("v2-0.eml");
  const ReplyOptions options{.from = "faultline robot <robot@faultline.example>",
                             .cc = {"david@kernel.org", "tests@faultline.example"},
                             .date = "Sat, 05 Dec 2026 10:00:00 +0000"};
  const Reply reply = ComposeReply(cover, "results", "Body.\n", options);
  EXPECT_EQ(reply.message_id, ReplyMessageId(cover.message_id, "results", options.from));
  EXPECT_NE(reply.message_id, ReplyMessageId(cover.message_id, "check", options.from));
  EXPECT_EQ(reply.message_id.substr(reply.message_id.find('@')), "@faultline.example");
  EXPECT_TRUE(IsReplyMessageId(reply.message_id)) << "the robot knows its own mail";
  EXPECT_FALSE(IsReplyMessageId(cover.message_id));
  EXPECT_EQ(reply.recipients,
            (std::vector<std::string>{"baohua@kernel.org", "linux-mm@kvack.org", "david@kernel.org",
                                      "liam@infradead.org", "tests@faultline.example"}))
      << "the author, then each list and person once";
  auto parsed = ParseMail(reply.text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->subject,
            "Re: [PATCH v2 0/5] mm: reduce mmap_lock contention and improve page fault "
            "performance");
  EXPECT_LE(MaxLineWidth(reply.text), 80u) << "the long subject folded:\n" << reply.text;
  EXPECT_NE(reply.text.find(
                "Subject: Re: [PATCH v2 0/5] mm: reduce mmap_lock contention and improve page\n"
                " fault performance\n"),
            std::string::npos)
      << reply.text;
  EXPECT_EQ(parsed->in_reply_to, cover.message_id);
  EXPECT_EQ(parsed->references, std::vector<std::string>{cover.message_id});
  EXPECT_EQ(parsed->body, "Body.\n");
  const Reply again = ComposeReply(*parsed, "results", "x", options);
  EXPECT_EQ(again.text.find("Re: Re:"), std::string::npos);
  EXPECT_EQ(ParseMail(again.text)->references,
            (std::vector<std::string>{cover.message_id, reply.message_id}));
  EXPECT_EQ(MaxLineWidth("ab\n\xC3\xA9\xC3\xA9\xC3\xA9\n"), 3u) << "characters, not bytes";
}

TEST(Links, LoreUrlsGiveTheirMessageIds) {
  EXPECT_EQ(MessageIdOfLink("https://lore.kernel.org/lkml/20260804095135.45897-1-x@y.com/"),
            "20260804095135.45897-1-x@y.com");
  EXPECT_EQ(MessageIdOfLink("https://lore.kernel.org/all/a%2Bb@c/T/#u"), "a+b@c");
  EXPECT_EQ(MessageIdOfLink("https://github.com/lianux-mm/ioretry_test/"), "");
}

TEST(Series, HunkLinesQuoteTheHunkGitNamedAndNoMore) {
  Mail patch;
  patch.body =
      "Fix it.\n---\n"
      "diff --git a/mm/a.c b/mm/a.c\n--- a/mm/a.c\n+++ b/mm/a.c\n"
      "@@ -1,2 +1,2 @@ int a;\n-int b;\n+int B;\n \n"
      "diff --git a/mm/memory.c b/mm/memory.c\n--- a/mm/memory.c\n+++ b/mm/memory.c\n"
      "@@ -1 +1 @@\n-x\n+X\n"
      "@@ -40,3 +40,4 @@ static int f(void)\n a\n-b\n+c\n+d\n\n"
      "\\ No newline at end of file\n"
      "@@ -90,1 +91,1 @@\n-y\n+Y\n-- \n2.43.0\n";
  EXPECT_EQ(HunkLines(patch, "mm/memory.c", "@@ -40,3 +40,4 @@"),
            (std::vector<std::string>{"@@ -40,3 +40,4 @@ static int f(void)", " a", "-b", "+c",
                                      "+d", "", "\\ No newline at end of file"}));
  EXPECT_EQ(HunkLines(patch, "mm/memory.c", "@@ -1 +1 @@"),
            (std::vector<std::string>{"@@ -1 +1 @@", "-x", "+X"}));
  EXPECT_EQ(HunkLines(patch, "mm/memory.c", "@@ -40,3 +40,4 @@", 3),
            (std::vector<std::string>{"@@ -40,3 +40,4 @@ static int f(void)", " a", "-b",
                                      "[... 4 more lines]"}));
  EXPECT_TRUE(HunkLines(patch, "mm/a.c", "@@ -40,3 +40,4 @@").empty()) << "another file's";
  EXPECT_TRUE(HunkLines(patch, "mm/memory.c", "").empty());
}

}  // namespace
}  // namespace faultline::robot

namespace faultline::robot {
namespace {

// A stranger's mail as lists carry them: a Latin-1 name in an encoded word, a raw byte that
// is no UTF-8 in the subject, a patch sent quoted-printable.
constexpr char kStrangersPatch[] =
    "From: =?iso-8859-1?q?J=F6rg_R=F6del?= <joro@example.org>\n"
    "To: linux-mm@kvack.org\n"
    "Subject: [PATCH] mm: caf\xe9 \xff fault\n"
    "Message-ID: <stranger-1@example.org>\n"
    "Date: Mon, 7 Dec 2026 05:00:00 +0000\n"
    "MIME-Version: 1.0\n"
    "Content-Type: text/plain; charset=iso-8859-1\n"
    "Content-Transfer-Encoding: quoted-printable\n"
    "\n"
    "A change.\n"
    "---\n"
    "diff --git a/mm/memory.c b/mm/memory.c\n"
    "--- a/mm/memory.c\n"
    "+++ b/mm/memory.c\n"
    "@@ -1,3 +1,3 @@\n"
    " int a;\n"
    "-int b =3D 1;\n"
    "+int b =3D 2; /* a long line that a mailer wrapped with a soft line break ri=\n"
    "ght here */\n"
    " int c;\n"
    "From the list's footer, a line that would start a new mail\n";

TEST(StrangersMail, CharsetsComeOutAsUtf8AndBadBytesAsReplacementCharacters) {
  absl::StatusOr<Mail> mail = ParseMail(kStrangersPatch);
  ASSERT_TRUE(mail.ok()) << mail.status();
  EXPECT_EQ(mail->from,
            "J\xc3\xb6rg R\xc3\xb6"
            "del <joro@example.org>");
  EXPECT_EQ(mail->from_address, "joro@example.org");
  // Raw bytes that are no UTF-8 are read as Latin-1 (GMime's fallback): text, never bytes.
  EXPECT_EQ(mail->subject, "[PATCH] mm: caf\xc3\xa9 \xc3\xbf fault");
  EXPECT_EQ(ValidUtf8(mail->subject), mail->subject);
}

// Found by fuzz_mail: a byte that is no ASCII in a Message-ID went back out in a reply's
// In-Reply-To. A Message-ID is printable ASCII: such a mail is unreadable (skipped with its
// reason), and such a reference is left out.
TEST(StrangersMail, AMessageIdThatIsNoneMakesTheMailUnreadable) {
  const std::string head = "From: S <s@example.org>\nSubject: [PATCH] mm: x\n";
  for (const std::string id : {"\xcb<a@b>", "<caf\xc3\xa9@b>", "<a b@c>"}) {
    absl::StatusOr<Mail> mail = ParseMail(head + "Message-ID: " + id + "\n\nBody.\n");
    EXPECT_EQ(mail.status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
  absl::StatusOr<Mail> mail = ParseMail(head +
                                        "Message-ID: <ok@b>\nIn-Reply-To: <caf\xe9@b>\n"
                                        "References: <r1@b> <caf\xe9@b> <r2@b>\n\nBody.\n");
  ASSERT_TRUE(mail.ok()) << mail.status();
  EXPECT_EQ(mail->in_reply_to, "");
  EXPECT_EQ(mail->references, (std::vector<std::string>{"r1@b", "r2@b"}));
  const Reply reply =
      ComposeReply(*mail, "results", "Body.\n",
                   {.from = "robot <r@example.org>", .cc = {}, .date = "Mon, 7 Dec 2026"});
  for (char c : reply.text.substr(0, reply.text.find("\n\n"))) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c <= 0x7e)) << reply.text;
  }
}

// Found by fuzz_mail: an address with bytes that are no ASCII (in the From, in the To) went
// out raw in the reply's To and Cc. Such an address is neither written nor sent to.
TEST(StrangersMail, AnAddressThatIsNotAsciiIsNotAnsweredTo) {
  absl::StatusOr<Mail> mail = ParseMail(
      "From: \"B (X)\" <ba\x8doh@kernel.org>\nTo: linux-mm@kvack\xc9\x90rg, ok@example.org\n"
      "Subject: [PATCH] mm: x\nMessage-ID: <a@b>\n\nBody.\n");
  ASSERT_TRUE(mail.ok()) << mail.status();
  const Reply reply = ComposeReply(*mail, "results", "Body.\n",
                                   {.from = "robot <r@example.org>", .cc = {}, .date = "Mon"});
  const std::string headers = reply.text.substr(0, reply.text.find("\n\n"));
  for (char c : headers) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c <= 0x7e)) << headers;
  EXPECT_NE(headers.find("To: undisclosed-recipients:;\n"), std::string::npos) << headers;
  EXPECT_EQ(reply.recipients, std::vector<std::string>{"ok@example.org"});
}

TEST(StrangersMail, AQuotedPrintablePatchReachesTheMboxDecoded) {
  absl::StatusOr<Mail> mail = ParseMail(kStrangersPatch);
  ASSERT_TRUE(mail.ok()) << mail.status();
  const std::vector<Series> series = AssembleSeries({*mail});
  ASSERT_EQ(series.size(), 1u);
  const std::string mbox = series[0].Mbox();
  EXPECT_NE(mbox.find("\n-int b = 1;\n"), std::string::npos) << mbox;
  EXPECT_NE(mbox.find("\n+int b = 2; /* a long line that a mailer wrapped with a soft line "
                      "break right here */\n"),
            std::string::npos)
      << mbox;
  EXPECT_EQ(mbox.find("=3D"), std::string::npos);
  EXPECT_NE(mbox.find("\n>From the list's footer"), std::string::npos) << "escaped, one mail";
  EXPECT_EQ(mbox.find("\nFrom the list"), std::string::npos);
}

TEST(StrangersMail, ANameThatIsNotAsciiGoesOutEncodedAndComesBackTheSame) {
  absl::StatusOr<Mail> mail = ParseMail(kStrangersPatch);
  ASSERT_TRUE(mail.ok()) << mail.status();
  ReplyOptions options;
  options.from = "faultline robot <robot@example.org>";
  options.date = "Mon, 7 Dec 2026 06:00:00 +0000";
  const Reply reply = ComposeReply(*mail, "results", "Body.\n", options);
  std::string to, subject;
  for (absl::string_view line : absl::StrSplit(reply.text, '\n')) {
    if (absl::ConsumePrefix(&line, "To: ")) to = std::string(line);
    if (absl::ConsumePrefix(&line, "Subject: ")) subject = std::string(line);
    if (line.empty()) break;
  }
  EXPECT_EQ(to, "=?UTF-8?B?SsO2cmcgUsO2ZGVs?= <joro@example.org>");
  EXPECT_EQ(DecodeWords(to), mail->from);
  const size_t header_end = reply.text.find("\n\n");
  for (char c : reply.text.substr(0, header_end)) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "a header byte that is not ASCII";
  }
  EXPECT_EQ(DecodeWords(subject), "Re: " + mail->subject);
  // Long text: several words, none over 75 characters, split between characters.
  std::string words =
      EncodeWords(std::string(30, 'x') + "\xc3\xb6\xc3\xb6\xc3\xb6" + std::string(60, 'y'));
  for (absl::string_view w : absl::StrSplit(words, ' ')) EXPECT_LE(w.size(), 75u) << w;
  EXPECT_EQ(DecodeWords(words),
            std::string(30, 'x') + "\xc3\xb6\xc3\xb6\xc3\xb6" + std::string(60, 'y'));
}

}  // namespace
}  // namespace faultline::robot
