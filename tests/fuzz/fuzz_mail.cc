// libFuzzer: a stranger's mail into the series robot's front door. The input is split at
// "\n\x01\n" into up to 8 mails (a thread: a cover letter, patches, a late one); each is read
// by ParseMail (GMime), the series are assembled, each series' mbox built and split again by
// kbuild's SplitMbox (what a builder reads), every patch's paths checked and its diff
// keyed, the hunks quoted as a reply would, and the apply failure described and read back.
// Checked: no crash, leak or sanitizer report; every text the robot stores or sends (ids,
// subject, names, addresses, quoted lines, the mbox's headers) is valid UTF-8 without NUL; a
// reply's headers are ASCII.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "kbuild/series.h"
#include "robot/mail.h"
#include "robot/reply.h"
#include "robot/series.h"

using namespace faultline;

namespace {

void MustBeUtf8(const std::string& text) {
  if (ValidUtf8(text) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<robot::Mail> mails;
  for (absl::string_view raw : absl::StrSplit(input, "\n\x01\n")) {
    if (mails.size() == 8) break;
    absl::StatusOr<robot::Mail> mail = robot::ParseMail(raw);
    if (!mail.ok()) continue;
    for (const std::string* s : {&mail->message_id, &mail->in_reply_to, &mail->subject, &mail->from,
                                 &mail->from_address, &mail->date}) {
      MustBeUtf8(*s);
    }
    for (const auto& list : {mail->references, mail->to, mail->cc}) {
      for (const std::string& s : list) MustBeUtf8(s);
    }
    robot::ReplyOptions options;
    options.from = "robot <robot@example.org>";
    options.date = "Mon, 7 Dec 2026 06:00:00 +0000";
    const robot::Reply reply = robot::ComposeReply(*mail, "results", "Body.\n", options);
    for (char c : reply.text.substr(0, reply.text.find("\n\n"))) {
      if (c != '\n' && (c < 0x20 || c > 0x7e)) std::abort();
    }
    mails.push_back(*std::move(mail));
  }
  for (const robot::Series& series : robot::AssembleSeries(mails)) {
    MustBeUtf8(series.BaseCommit());
    for (const std::string& file : series.TouchedFiles()) MustBeUtf8(file);
    for (const auto& [version, id] : series.EarlierVersions()) MustBeUtf8(id);
    const std::string mbox = series.Mbox();
    absl::StatusOr<std::vector<kbuild::Patch>> patches = kbuild::SplitMbox(mbox, "v1.mbox");
    if (!patches.ok()) continue;
    for (const kbuild::Patch& patch : *patches) {
      for (const std::string& path : kbuild::PatchPaths(patch)) kbuild::PathInsideTree(path);
      (void)kbuild::PatchDiff(patch.text);
      const std::string reason = kbuild::DescribeApplyFailure(
          patch, "error: patch failed: " + (patch.files.empty() ? "x" : patch.files[0]) + ":1");
      (void)kbuild::ParseApplyFailure(reason);
      for (const auto& [index, mail] : series.patches) {
        for (const std::string& file : patch.files) {
          for (const std::string& line : robot::HunkLines(mail, file, "@@ -1")) MustBeUtf8(line);
        }
      }
    }
    (void)kbuild::SeriesKey(*patches);
  }
  return 0;
}
