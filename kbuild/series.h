#pragma once
// A patch series as mm developers send it: one or more mbox files, each holding one or
// more mails (`git format-patch` / `b4 am` output). Pure: no git, no files.
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace faultline::kbuild {

struct Patch {
  std::string source;   // the mbox it came from ("rfc-v5.mbox")
  int index = 0;        // 1-based within the series (all mboxes, in order)
  std::string subject;  // "[RFC PATCH v5] mm: retry page faults once under the per-VMA lock"
  std::string text;     // the whole mail, as `git apply` reads it
  std::vector<std::string> files;  // files the diff touches (b/ side), in order
};

// Splits the mails of one mbox ("From " lines at column 0 separate them). A mail without
// a diff (a cover letter) is skipped; an mbox without any diff is INVALID_ARGUMENT naming
// `source`. `first_index` numbers the patches.
absl::StatusOr<std::vector<Patch>> SplitMbox(absl::string_view mbox, const std::string& source,
                                             int first_index = 1);

// Whether `path` matches a `git apply --include` style glob ("arch/x86/*", "mm/*.c"): `*`
// matches anything, `/` included; `?` one character; `[...]` a class (fnmatch(3)).
bool GlobMatches(absl::string_view glob, absl::string_view path);

// The files of `patch` that `include` selects (all when `include` is empty).
std::vector<std::string> IncludedFiles(const Patch& patch, const std::vector<std::string>& include);

// What of a patch decides the tree it makes, for keying a series by its diffs rather than
// its mail (the idea of `git patch-id`): from the mail's first `diff --git` line, the file
// headers (`diff --git`, `---`/`+++`, modes, renames, binary data) and the hunks' lines,
// without what another export of the same commit changes: the mail's headers (From line,
// date, Message-Id), its message and diffstat, the `-- ` signature, `index` lines (blob
// ids, whose length is an option), similarity scores, and each hunk header's line numbers
// and section heading (`@@ -2,3 +2,3 @@ f()` is `@@`). Lines that are not part of a patch
// (a list's footer) are left out, as `git apply` skips them. Whitespace is kept: `git
// apply` keeps it, so a whitespace-only change (a string literal, a Makefile) is another
// kernel.
std::string PatchDiff(absl::string_view mail);

// Every path a patch's diff names (both sides of `diff --git`, `---`/`+++`, renames and
// copies), without the a/ and b/ prefixes, in order, once.
std::vector<std::string> PatchPaths(const Patch& patch);
// A relative path that stays inside the tree: not absolute, no "." or ".." component, no
// ".git" component, no backslash or control character.
bool PathInsideTree(absl::string_view path);

// The key of a series: sha256 (hex) over the sha256 of each patch's PatchDiff, in order
// (whatever mboxes they came in: cover letters and mail headers do not count). Equal for
// the same patches exported twice; another diff, another order or another patch count is
// another key.
std::string SeriesKey(const std::vector<Patch>& patches);

// Which patch of which mbox did not apply, and where when git said so: the file, and the
// hunk whose context was not found ("@@ -560,7 +560,12 @@ ..."). The series robot answers a
// series with it; for people it reads (DescribeApplyFailure)
//   patch 1 "[RFC PATCH v5] mm: ..." (rfc-v5.mbox) does not apply: arch/arm/mm/fault.c,
//   hunk @@ -560,7 +560,12 @@ (apply only some paths with `include`)
struct ApplyFailure {
  int index = 0;        // the patch, 1-based within the series
  std::string subject;  // its subject
  std::string source;   // the mbox it came from
  std::string file;     // "" when git named none
  std::string hunk;     // "@@ -2,3 +2,3 @@", or ""
  std::string reason;   // what git said of `file` when no hunk failed ("" when nothing)
};
// What `git apply`'s error output says of `patch` (the struct above, read where it is made).
ApplyFailure ReadApplyFailure(const Patch& patch, const std::string& git_output);
// The same as a reason for people (git's whole output when it named no file).
std::string DescribeApplyFailure(const ApplyFailure& failure, const std::string& git_output);
std::string DescribeApplyFailure(const Patch& patch, const std::string& git_output);
// The error a build returns for it: INVALID_ARGUMENT, "series: " and the reason, carrying
// the failure itself (ApplyFailureOf reads it back; no one parses the text).
absl::Status ApplyFailureError(const Patch& patch, const std::string& git_output);
// The failure a status carries (nullopt: none, or not a series that did not apply).
std::optional<ApplyFailure> ApplyFailureOf(const absl::Status& status);

// The reason read back from its text: for errors stored before builds carried the failure
// (a build's error, "series: " before it or not). Nothing new reads it.
std::optional<ApplyFailure> ParseApplyFailure(absl::string_view error);

}  // namespace faultline::kbuild
