#pragma once
// Posted series, as the list sees them: each mail's subject tag ("[RFC PATCH v4 3/3]"),
// the mails of one version of one series gathered (cover letter, patches 1..n), whether
// it is whole, its base, what it touches, and which earlier version it follows. Pure.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "robot/mail.h"

namespace faultline::robot {

// What a subject's bracketed tag says.
struct SubjectTag {
  bool reply = false;  // "Re:" before the tag: a review, not a patch
  bool rfc = false;
  int version = 1;  // v1 when the tag has no vN
  int index = 1;    // 0 for a cover letter; 1 for a lone patch
  int total = 1;
  std::string title;     // the subject after the tag
  std::string prefixes;  // the tag's other words ("mm-unstable", "net-next"), as written
};

// nullopt when the subject has no [PATCH ...] tag (nor "[RFC]"): not a patch mail.
std::optional<SubjectTag> ParseSubject(absl::string_view subject);

// One version of a posted series.
struct Series {
  std::string id;  // its root: the cover letter's Message-ID, else patch 1's
  int version = 1;
  bool rfc = false;
  int total = 1;      // patches it says it has
  std::string title;  // the cover letter's title (else patch 1's)
  std::string from;   // the author as written
  std::string from_address;
  std::optional<Mail> cover;
  std::map<int, Mail> patches;  // by index, 1..total
  bool complete() const { return static_cast<int>(patches.size()) == total; }

  // The `base-commit:` trailer (git format-patch --base), "" when none.
  std::string BaseCommit() const;
  // Every file the patches' diffs touch (b/ side, "a/" for deletions), in order, once.
  std::vector<std::string> TouchedFiles() const;
  // The Message-IDs the cover (or the lone patch's notes) names as earlier versions:
  // "Link to RFC v4: https://lore.kernel.org/lkml/<id>/", "v4: https://lore.../<id>/".
  std::map<int, std::string> EarlierVersions() const;
  // The series as one mbox, cover letter first: what a kernel source's series is.
  std::string Mbox() const;
  // Every mail of it: the cover letter and the patches, in order.
  std::vector<const Mail*> Mails() const;
};

// The series the mails make: patch mails grouped by thread root and version, replies
// ("Re:") and mails without a tag left out. Each series keeps the patches it has, whole or
// not (a later pass finds the rest). Order: by the first appearance of each series.
std::vector<Series> AssembleSeries(const std::vector<Mail>& mails);

// The lines of the hunk of `file` in `patch`'s diff whose header starts with `hunk`
// ("@@ -2,3 +2,3 @@"), header first; at most `max_lines` (then "[... N more lines]").
// Empty when the patch has no such hunk.
std::vector<std::string> HunkLines(const Mail& patch, const std::string& file,
                                   const std::string& hunk, size_t max_lines = 40);

// The name a series' version carries as a kernel source's series file ("v5.mbox"): the
// robot's jobs name it so, and the robot finds the build that did not apply by it.
std::string SeriesMboxName(int version);

// The thread root a mail belongs to: the first of its References, else its In-Reply-To,
// else itself.
std::string ThreadRoot(const Mail& mail);

// The id of a lore-style archive link ("https://lore.kernel.org/all/<id>/"), "" for
// another URL.
std::string MessageIdOfLink(absl::string_view url);

}  // namespace faultline::robot
