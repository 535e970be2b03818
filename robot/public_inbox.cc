#include "robot/public_inbox.h"

#include <sys/stat.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kbuild/process.h"

namespace faultline::robot {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The epochs of a v2 inbox, in order.
std::vector<int> Epochs(const std::string& inbox) {
  std::vector<int> out;
  for (int n = 0; IsDirectory(absl::StrCat(inbox, "/git/", n, ".git")); ++n) out.push_back(n);
  return out;
}

// The commits of `git_dir`'s current branch after `last` (all when ""), oldest first.
absl::StatusOr<std::vector<std::string>> CommitsAfter(const std::string& git_dir,
                                                      const std::string& last) {
  kbuild::Command head{
      .argv = {"git", "--git-dir=" + git_dir, "rev-parse", "--verify", "-q", "HEAD"}};
  absl::StatusOr<kbuild::Finished> has_head = kbuild::Run(head);
  if (!has_head.ok()) return has_head.status();
  if (has_head->exit_code != 0) return std::vector<std::string>{};  // an empty epoch
  std::vector<std::string> argv = {"git", "--git-dir=" + git_dir, "rev-list", "--reverse",
                                   "--first-parent"};
  argv.push_back(last.empty() ? "HEAD" : last + "..HEAD");
  absl::StatusOr<std::string> out = kbuild::RunForOutput({.argv = argv});
  if (!out.ok()) return out.status();
  std::vector<std::string> commits;
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipEmpty())) {
    commits.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return commits;
}

}  // namespace

absl::StatusOr<ArchiveRead> ReadNewMails(const std::string& inbox, const ArchiveCursor& cursor,
                                         size_t limit) {
  const std::vector<int> epochs = Epochs(inbox);
  if (epochs.empty()) {
    return absl::NotFoundError(absl::StrCat(inbox, ": not a public-inbox v2 archive (no ", inbox,
                                            "/git/0.git; public-inbox-init -V2 makes one)"));
  }
  ArchiveRead read;
  read.cursor = cursor;
  for (int epoch : epochs) {
    if (read.mails.size() >= limit) break;
    const std::string git_dir = absl::StrCat(inbox, "/git/", epoch, ".git");
    auto at = cursor.find(epoch);
    absl::StatusOr<std::vector<std::string>> commits =
        CommitsAfter(git_dir, at == cursor.end() ? "" : at->second);
    if (!commits.ok()) return commits.status();
    for (const std::string& commit : *commits) {
      if (read.mails.size() >= limit) break;
      absl::StatusOr<kbuild::Finished> blob =
          kbuild::Run({.argv = {"git", "--git-dir=" + git_dir, "cat-file", "blob", commit + ":m"}});
      if (!blob.ok()) return blob.status();
      read.cursor[epoch] = commit;
      if (blob->exit_code != 0) continue;  // a removal: no mail
      read.mails.push_back({.epoch = epoch, .commit = commit, .raw = std::move(blob->output)});
    }
  }
  return read;
}

}  // namespace faultline::robot
