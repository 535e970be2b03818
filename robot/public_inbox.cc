#include "robot/public_inbox.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The blobs named by `names` ("<commit>:m"), in order: size and bytes, through one
// cat-file --batch-check and one cat-file --batch for those of at most `max_bytes`, in
// order while their sum stays under `budget` (the one that passes it is the last).
struct Blob {
  bool exists = false;
  bool fetched = false;
  size_t size = 0;
  std::string sha;
  std::string bytes;
};
absl::StatusOr<std::vector<Blob>> ReadBlobs(const std::string& git_dir,
                                            const std::vector<std::string>& names, size_t max_bytes,
                                            size_t budget) {
  std::vector<Blob> blobs(names.size());
  if (names.empty()) return blobs;
  absl::StatusOr<std::string> checked =
      kbuild::RunForOutput({.argv = {"git", "--git-dir=" + git_dir, "cat-file", "--batch-check"},
                            .input = absl::StrJoin(names, "\n") + "\n"});
  if (!checked.ok()) return checked.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*checked, '\n', absl::SkipEmpty());
  if (lines.size() != names.size()) {
    return absl::InternalError(absl::StrCat(git_dir, ": cat-file --batch-check answered ",
                                            lines.size(), " lines for ", names.size(), " names"));
  }
  std::string wanted;
  size_t total = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    // "<sha> blob <size>", or "<name> missing" for a commit that removed a mail.
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    if (f.size() != 3 || f[1] != "blob" || !absl::SimpleAtoi(f[2], &blobs[i].size)) continue;
    blobs[i].exists = true;
    blobs[i].sha = std::string(f[0]);
    if (blobs[i].size <= max_bytes && total < budget) {
      blobs[i].fetched = true;
      total += blobs[i].size;
      absl::StrAppend(&wanted, f[0], "\n");
    }
  }
  if (wanted.empty()) return blobs;
  absl::StatusOr<std::string> out = kbuild::RunForOutput(
      {.argv = {"git", "--git-dir=" + git_dir, "cat-file", "--batch"}, .input = wanted});
  if (!out.ok()) return out.status();
  // Each: "<sha> blob <size>\n" + the bytes + "\n", in the order asked.
  absl::string_view rest = *out;
  for (Blob& blob : blobs) {
    if (!blob.fetched) continue;
    const std::string header = absl::StrCat(blob.sha, " blob ", blob.size, "\n");
    if (!absl::ConsumePrefix(&rest, header) || rest.size() < blob.size + 1) {
      return absl::InternalError(absl::StrCat(git_dir, ": cat-file --batch: no ", blob.sha));
    }
    blob.bytes = std::string(rest.substr(0, blob.size));
    rest.remove_prefix(blob.size + 1);
  }
  return blobs;
}

}  // namespace

absl::StatusOr<ArchiveRead> ReadNewMails(const std::string& inbox, const ArchiveCursor& cursor,
                                         const ArchiveLimits& limits) {
  const std::vector<int> epochs = Epochs(inbox);
  if (epochs.empty()) {
    return absl::NotFoundError(absl::StrCat(inbox, ": not a public-inbox v2 archive (no ", inbox,
                                            "/git/0.git; public-inbox-init -V2 makes one)"));
  }
  ArchiveRead read;
  read.cursor = cursor;
  size_t bytes = 0;
  for (int epoch : epochs) {
    if (read.mails.size() >= limits.mails || bytes >= limits.bytes) break;
    const std::string git_dir = absl::StrCat(inbox, "/git/", epoch, ".git");
    auto at = cursor.find(epoch);
    absl::StatusOr<std::vector<std::string>> commits =
        CommitsAfter(git_dir, at == cursor.end() ? "" : at->second);
    if (!commits.ok()) return commits.status();
    commits->resize(std::min(commits->size(), limits.mails - read.mails.size()));
    std::vector<std::string> names;
    names.reserve(commits->size());
    for (const std::string& commit : *commits) names.push_back(commit + ":m");
    absl::StatusOr<std::vector<Blob>> blobs =
        ReadBlobs(git_dir, names, limits.mail_bytes, limits.bytes - bytes);
    if (!blobs.ok()) return blobs.status();
    for (size_t i = 0; i < commits->size(); ++i) {
      Blob& blob = (*blobs)[i];
      if (blob.exists && blob.size <= limits.mail_bytes && !blob.fetched) break;  // next time
      read.cursor[epoch] = (*commits)[i];
      if (!blob.exists) continue;  // a removal: no mail
      bytes += blob.bytes.size();
      read.mails.push_back({.epoch = epoch,
                            .commit = (*commits)[i],
                            .size = blob.size,
                            .raw = std::move(blob.bytes)});
    }
  }
  return read;
}

}  // namespace faultline::robot
