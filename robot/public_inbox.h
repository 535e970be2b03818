#pragma once
// A public-inbox archive (the software behind lore.kernel.org), read the way mails
// arrived: a v2 inbox keeps them in epochs <inbox>/git/<N>.git, each commit adding one mail
// as the blob "m" (a commit without "m" removed one). The robot remembers per epoch the last
// commit it read, so a restart reads on from there and never twice. Reads through git: a
// few processes per epoch whatever the number of mails (rev-list, then cat-file
// --batch-check for the sizes and cat-file --batch for the mails that fit).
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
  size_t size = 0;  // bytes, as the archive holds it
  std::string raw;  // the mail as delivered; "" (not read) when it is over mail_bytes
};

// What one read may cost, whatever a stranger posts.
struct ArchiveLimits {
  size_t mails = 500;            // mails per read
  size_t mail_bytes = 8u << 20;  // a larger mail is not read (size only)
  size_t bytes = 64u << 20;      // read bytes per read (the mail that passes it is the last)
};

struct ArchiveRead {
  std::vector<ArchivedMail> mails;  // in arrival order, at most the limit
  ArchiveCursor cursor;             // where the next read starts (after these mails)
};

// The mails after `cursor`, oldest first, within `limits`. NOT_FOUND when `inbox` is not a
// v2 public-inbox (no git/0.git), naming what it looked for.
absl::StatusOr<ArchiveRead> ReadNewMails(const std::string& inbox, const ArchiveCursor& cursor,
                                         const ArchiveLimits& limits);

}  // namespace faultline::robot
