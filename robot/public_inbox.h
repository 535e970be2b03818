#pragma once
// A public-inbox archive (the software behind lore.kernel.org), read the way mails
// arrived: a v2 inbox keeps them in epochs <inbox>/git/<N>.git, each commit adding one mail
// as the blob "m" (a commit without "m" removed one). The robot remembers per epoch the last
// commit it read, so a restart reads on from there and never twice. Reads through git.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace faultline::robot {

// Epoch number -> the last commit read in it ("" : none yet).
using ArchiveCursor = std::map<int, std::string>;

struct ArchivedMail {
  int epoch = 0;
  std::string commit;
  std::string raw;  // the mail as delivered
};

struct ArchiveRead {
  std::vector<ArchivedMail> mails;  // in arrival order, at most the limit
  ArchiveCursor cursor;             // where the next read starts (after these mails)
};

// The mails after `cursor`, oldest first, at most `limit`. NOT_FOUND when `inbox` is not a
// v2 public-inbox (no git/0.git), naming what it looked for.
absl::StatusOr<ArchiveRead> ReadNewMails(const std::string& inbox, const ArchiveCursor& cursor,
                                         size_t limit);

}  // namespace faultline::robot
