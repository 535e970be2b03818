#include "kbuild/series.h"

#include <fnmatch.h>

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"
#include "common/strings.h"

namespace faultline::kbuild {
namespace {

// The Subject header, folded lines joined.
std::string SubjectOf(absl::string_view mail) {
  std::vector<absl::string_view> lines = absl::StrSplit(mail, '\n');
  std::string subject;
  bool in_subject = false;
  for (absl::string_view line : lines) {
    if (line.empty()) break;  // end of headers
    if (in_subject && (line.front() == ' ' || line.front() == '\t')) {
      subject += " ";
      absl::StrAppend(&subject, absl::StripAsciiWhitespace(line));
      continue;
    }
    in_subject = false;
    if (absl::StartsWithIgnoreCase(line, "Subject:")) {
      subject = std::string(absl::StripAsciiWhitespace(line.substr(8)));
      in_subject = true;
    }
  }
  return subject;
}

std::vector<std::string> FilesOf(absl::string_view mail) {
  std::vector<std::string> files;
  for (absl::string_view line : absl::StrSplit(mail, '\n')) {
    if (!absl::ConsumePrefix(&line, "diff --git ")) continue;
    const size_t b = line.rfind(" b/");
    if (b == absl::string_view::npos) continue;
    files.emplace_back(absl::StripAsciiWhitespace(line.substr(b + 3)));
  }
  return files;
}

// The line counts of a hunk header "@@ -a[,b] +c[,d] @@ ..." (a count left out is 1).
bool HunkCounts(absl::string_view line, int64_t* old_lines, int64_t* new_lines) {
  if (!absl::ConsumePrefix(&line, "@@ -")) return false;
  auto range = [&](int64_t* count) {
    const size_t end = line.find(' ');
    if (end == absl::string_view::npos) return false;
    const absl::string_view r = line.substr(0, end);
    line.remove_prefix(end + 1);
    const size_t comma = r.find(',');
    int64_t start = 0;
    if (!absl::SimpleAtoi(r.substr(0, comma), &start)) return false;
    *count = 1;
    return comma == absl::string_view::npos || absl::SimpleAtoi(r.substr(comma + 1), count);
  };
  if (!range(old_lines) || !absl::ConsumePrefix(&line, "+") || !range(new_lines)) return false;
  return absl::StartsWith(line, "@@") && *old_lines >= 0 && *new_lines >= 0;
}

// The extended header lines of a git diff that decide what it does (`index` and the
// similarity scores do not).
bool IsDiffHeader(absl::string_view line) {
  for (absl::string_view prefix :
       {"diff --git ", "--- ", "+++ ", "old mode ", "new mode ", "deleted file mode ",
        "new file mode ", "copy from ", "copy to ", "rename from ", "rename to ", "rename old ",
        "rename new ", "Binary files ", "GIT binary patch", "\\ "}) {
    if (absl::StartsWith(line, prefix)) return true;
  }
  return false;
}

}  // namespace

std::string PatchDiff(absl::string_view mail) {
  std::string out;
  bool started = false, binary = false;
  int64_t old_left = 0, new_left = 0;  // lines of the current hunk still to come
  for (absl::string_view line : absl::StrSplit(mail, '\n')) {
    if (!started && !absl::StartsWith(line, "diff --git ")) continue;
    started = true;
    if (old_left > 0 || new_left > 0) {
      // In a hunk: its lines, counted off by the header's numbers (so "-- " here is a
      // removed "- " line, not the signature). An empty line is an empty context line.
      const char c = line.empty() ? ' ' : line.front();
      if (c == ' ' || c == '-' || c == '+' || c == '\\') {
        if (c != '+' && c != '\\') --old_left;
        if (c != '-' && c != '\\') --new_left;
        absl::StrAppend(&out, line, "\n");
        continue;
      }
      old_left = new_left = 0;  // a short hunk: what follows is read as headers
    }
    if (line == "-- ") break;  // format-patch's signature: the rest is not the patch
    if (absl::StartsWith(line, "diff --git ")) binary = false;
    if (HunkCounts(line, &old_left, &new_left)) {
      out += "@@\n";
      continue;
    }
    if (absl::StartsWith(line, "GIT binary patch")) binary = true;
    if (IsDiffHeader(line) || (binary && !line.empty())) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::vector<std::string> PatchPaths(const Patch& patch) {
  std::vector<std::string> out;
  auto add = [&](absl::string_view path, bool prefixed) {
    path = absl::StripAsciiWhitespace(path);
    if (path == "/dev/null") return;
    if (prefixed && !absl::ConsumePrefix(&path, "a/")) absl::ConsumePrefix(&path, "b/");
    std::string p(path);
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(std::move(p));
  };
  for (absl::string_view line : absl::StrSplit(patch.text, '\n')) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "diff --git ")) {
      const size_t b = rest.rfind(" b/");
      if (b != absl::string_view::npos) {
        add(rest.substr(0, b), true);
        add(rest.substr(b + 1), true);
      }
    } else if (absl::ConsumePrefix(&rest, "--- ") || absl::ConsumePrefix(&rest, "+++ ")) {
      add(rest.substr(0, rest.find('\t')), true);
    } else if (absl::ConsumePrefix(&rest, "rename from ") ||
               absl::ConsumePrefix(&rest, "rename to ") ||
               absl::ConsumePrefix(&rest, "copy from ") || absl::ConsumePrefix(&rest, "copy to ")) {
      add(rest, false);
    }
  }
  return out;
}

bool PathInsideTree(absl::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  for (char c : path) {
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == ".." || absl::EqualsIgnoreCase(part, ".git")) {
      return false;
    }
  }
  return true;
}

std::string SeriesKey(const std::vector<Patch>& patches) {
  std::string ids = "faultline-series/1\n";
  for (const Patch& patch : patches) absl::StrAppend(&ids, Sha256Hex(PatchDiff(patch.text)), "\n");
  return Sha256Hex(ids);
}

absl::StatusOr<std::vector<Patch>> SplitMbox(absl::string_view mbox, const std::string& source,
                                             int first_index) {
  std::vector<absl::string_view> mails;
  size_t start = absl::string_view::npos;
  size_t pos = 0;
  while (pos < mbox.size()) {
    const size_t eol = mbox.find('\n', pos);
    const size_t next = eol == absl::string_view::npos ? mbox.size() : eol + 1;
    if (mbox.compare(pos, 5, "From ") == 0) {
      if (start != absl::string_view::npos) mails.push_back(mbox.substr(start, pos - start));
      start = pos;
    }
    pos = next;
  }
  if (start != absl::string_view::npos) mails.push_back(mbox.substr(start));
  if (mails.empty() && absl::StrContains(mbox, "\ndiff --git ")) mails.push_back(mbox);
  std::vector<Patch> patches;
  for (absl::string_view mail : mails) {
    std::vector<std::string> files = FilesOf(mail);
    if (files.empty()) continue;  // a cover letter
    Patch patch;
    patch.source = source;
    patch.index = first_index + static_cast<int>(patches.size());
    patch.subject = SubjectOf(mail);
    patch.text = std::string(mail);
    patch.files = std::move(files);
    patches.push_back(std::move(patch));
  }
  if (patches.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("series ", source, ": no patch in it (no mail with a `diff --git`)"));
  }
  return patches;
}

bool GlobMatches(absl::string_view glob, absl::string_view path) {
  // git apply --include matches with wildmatch(3)-like rules and no WM_PATHNAME: fnmatch(3)
  // without FNM_PATHNAME is the same language (`*` crosses `/`, `?`, `[...]`, `\`).
  return ::fnmatch(std::string(glob).c_str(), std::string(path).c_str(), 0) == 0;
}

std::vector<std::string> IncludedFiles(const Patch& patch,
                                       const std::vector<std::string>& include) {
  if (include.empty()) return patch.files;
  std::vector<std::string> out;
  for (const std::string& file : patch.files) {
    for (const std::string& glob : include) {
      if (GlobMatches(glob, file)) {
        out.push_back(file);
        break;
      }
    }
  }
  return out;
}

ApplyFailure ReadApplyFailure(const Patch& patch, const std::string& git_output) {
  ApplyFailure f{.index = patch.index, .subject = patch.subject, .source = patch.source};
  std::string why;
  int line = 0;
  for (absl::string_view l : absl::StrSplit(git_output, '\n')) {
    absl::string_view rest = l;
    if (absl::ConsumePrefix(&rest, "error: patch failed: ")) {
      const size_t colon = rest.rfind(':');
      if (colon != absl::string_view::npos) {
        f.file = std::string(rest.substr(0, colon));
        if (!absl::SimpleAtoi(rest.substr(colon + 1), &line)) line = 0;
      }
      break;
    }
    if (absl::ConsumePrefix(&rest, "error: ") && f.file.empty()) {
      // "error: FILE: does not exist in index" / "error: FILE: patch does not apply"
      const size_t colon = rest.find(": ");
      if (colon != absl::string_view::npos) {
        f.file = std::string(rest.substr(0, colon));
        why = std::string(absl::StripAsciiWhitespace(rest.substr(colon + 2)));
      }
    }
  }
  if (why == "patch does not apply") why.clear();  // the hunk says more, when git named it
  if (!f.file.empty() && line > 0) {
    // The hunk of the file whose old range starts at `line`.
    bool in_file = false;
    for (absl::string_view l : absl::StrSplit(patch.text, '\n')) {
      if (absl::StartsWith(l, "diff --git ")) in_file = absl::EndsWith(l, " b/" + f.file);
      if (!in_file || !absl::StartsWith(l, "@@ -")) continue;
      absl::string_view range = l.substr(4);
      const size_t end = range.find_first_of(", ");
      int start = 0;
      if (absl::SimpleAtoi(range.substr(0, end), &start) && start == line) {
        const size_t close = l.find(" @@", 3);
        f.hunk = std::string(close == absl::string_view::npos ? l : l.substr(0, close + 3));
        break;
      }
    }
  }
  if (!why.empty() && f.hunk.empty()) f.reason = OneLine(why, "; ");
  return f;
}

std::string DescribeApplyFailure(const ApplyFailure& f, const std::string& git_output) {
  std::string reason =
      absl::StrCat("patch ", f.index, " \"", f.subject, "\" (", f.source, ") does not apply");
  if (!f.file.empty()) absl::StrAppend(&reason, ": ", f.file);
  if (!f.hunk.empty()) absl::StrAppend(&reason, ", hunk ", f.hunk);
  if (!f.reason.empty()) absl::StrAppend(&reason, ", because ", f.reason);
  absl::StrAppend(&reason, " (apply only some paths with the series' `include`)");
  if (f.file.empty()) absl::StrAppend(&reason, ": ", OneLine(git_output, "; "));
  return reason;
}

std::string DescribeApplyFailure(const Patch& patch, const std::string& git_output) {
  return DescribeApplyFailure(ReadApplyFailure(patch, git_output), git_output);
}

namespace {

// The failure rides on the status as a payload under this type URL: fields as
// "<decimal length>:<bytes>", in ApplyFailure's order (the index first, in decimal).
constexpr absl::string_view kApplyFailureUrl = "type.faultline.dev/kbuild.ApplyFailure";

void PutField(std::string* out, absl::string_view field) {
  absl::StrAppend(out, field.size(), ":", field);
}

bool TakeField(absl::string_view* in, std::string* field) {
  const size_t colon = in->find(':');
  size_t n = 0;
  if (colon == absl::string_view::npos || colon > 9 ||
      !absl::SimpleAtoi(in->substr(0, colon), &n) || n > in->size() - colon - 1) {
    return false;
  }
  *field = std::string(in->substr(colon + 1, n));
  in->remove_prefix(colon + 1 + n);
  return true;
}

}  // namespace

absl::Status ApplyFailureError(const Patch& patch, const std::string& git_output) {
  const ApplyFailure f = ReadApplyFailure(patch, git_output);
  absl::Status error =
      absl::InvalidArgumentError(absl::StrCat("series: ", DescribeApplyFailure(f, git_output)));
  const std::string index = absl::StrCat(f.index);
  std::string payload;
  for (const std::string* field : {&index, &f.subject, &f.source, &f.file, &f.hunk, &f.reason}) {
    PutField(&payload, *field);
  }
  error.SetPayload(kApplyFailureUrl, absl::Cord(payload));
  return error;
}

std::optional<ApplyFailure> ApplyFailureOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kApplyFailureUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string flat(*payload);
  absl::string_view in = flat;
  ApplyFailure f;
  std::string index;
  if (!TakeField(&in, &index) || !absl::SimpleAtoi(index, &f.index) ||
      !TakeField(&in, &f.subject) || !TakeField(&in, &f.source) || !TakeField(&in, &f.file) ||
      !TakeField(&in, &f.hunk) || !TakeField(&in, &f.reason) || !in.empty()) {
    return std::nullopt;
  }
  return f;
}

std::optional<ApplyFailure> ParseApplyFailure(absl::string_view error) {
  absl::string_view rest = error;
  absl::ConsumePrefix(&rest, "series: ");
  if (!absl::ConsumePrefix(&rest, "patch ")) return std::nullopt;
  ApplyFailure f;
  const size_t space = rest.find(' ');
  if (space == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, space), &f.index)) {
    return std::nullopt;
  }
  rest.remove_prefix(space + 1);
  // "SUBJECT" (SOURCE) does not apply: the subject may hold quotes and parentheses, the
  // mbox's name does not.
  constexpr absl::string_view kTail = ") does not apply";
  if (!absl::ConsumePrefix(&rest, "\"")) return std::nullopt;
  const size_t tail = rest.find(kTail);
  if (tail == absl::string_view::npos) return std::nullopt;
  const size_t open = rest.rfind("\" (", tail);
  if (open == absl::string_view::npos || open + 3 > tail) return std::nullopt;
  f.subject = std::string(rest.substr(0, open));
  f.source = std::string(rest.substr(open + 3, tail - open - 3));
  rest.remove_prefix(tail + kTail.size());
  if (absl::ConsumePrefix(&rest, ": ")) {
    const size_t apply_only = rest.find(" (apply only");
    const size_t end = std::min({rest.find(", hunk "), rest.find(", because "), apply_only});
    f.file = std::string(rest.substr(0, end));
    if (const size_t because = rest.find(", because "); because != absl::string_view::npos) {
      f.reason = std::string(rest.substr(because + 10, apply_only == absl::string_view::npos
                                                           ? absl::string_view::npos
                                                           : apply_only - because - 10));
    }
    if (const size_t hunk = rest.find(", hunk @@ "); hunk != absl::string_view::npos) {
      const size_t close = rest.find(" @@", hunk + 10);
      if (close != absl::string_view::npos) {
        f.hunk = std::string(rest.substr(hunk + 7, close + 3 - hunk - 7));
      }
    }
  }
  return f;
}

}  // namespace faultline::kbuild
