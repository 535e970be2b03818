#include "robot/series.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace faultline::robot {
namespace {

// "v5" -> 5, else 0.
int VersionWord(absl::string_view word) {
  if (word.size() < 2 || (word[0] != 'v' && word[0] != 'V')) return 0;
  int v = 0;
  if (!absl::SimpleAtoi(word.substr(1), &v) || v < 1 || v > 999) return 0;
  return v;
}

// "3/5" -> {3, 5}.
bool IndexWord(absl::string_view word, int* index, int* total) {
  std::vector<absl::string_view> parts = absl::StrSplit(word, '/');
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], index) &&
         absl::SimpleAtoi(parts[1], total) && *total >= 1 && *total <= 99999 && *index >= 0 &&
         *index <= *total;
}

// The first `pattern` line's value in `text` ("base-commit: <sha>").
std::string TrailerValue(absl::string_view text, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, name))
      return ValidUtf8(std::string(absl::StripAsciiWhitespace(line)));
  }
  return "";
}

}  // namespace

std::optional<SubjectTag> ParseSubject(absl::string_view subject) {
  SubjectTag tag;
  absl::string_view s = absl::StripAsciiWhitespace(subject);
  // "Re: ", "RE: ", "Fwd: " (any number of them) before the tag.
  while (true) {
    if (absl::StartsWithIgnoreCase(s, "re:")) {
      tag.reply = true;
      s = absl::StripLeadingAsciiWhitespace(s.substr(3));
    } else if (absl::StartsWithIgnoreCase(s, "fwd:")) {
      tag.reply = true;
      s = absl::StripLeadingAsciiWhitespace(s.substr(4));
    } else {
      break;
    }
  }
  bool patch = false;
  std::vector<std::string> other;
  // One or more bracketed tags: "[PATCH v2 1/5]", "[RFC][PATCH]".
  while (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == absl::string_view::npos) break;
    for (absl::string_view word :
         absl::StrSplit(s.substr(1, close - 1), absl::ByAnyChar(" ,"), absl::SkipEmpty())) {
      int index = 0, total = 0;
      if (absl::EqualsIgnoreCase(word, "PATCH")) {
        patch = true;
      } else if (absl::EqualsIgnoreCase(word, "RFC")) {
        tag.rfc = true;
      } else if (int v = VersionWord(word); v > 0) {
        tag.version = v;
      } else if (IndexWord(word, &index, &total)) {
        tag.index = index;
        tag.total = total;
      } else {
        other.emplace_back(word);
      }
    }
    s = absl::StripLeadingAsciiWhitespace(s.substr(close + 1));
  }
  if (!patch && !tag.rfc) return std::nullopt;
  tag.title = std::string(s);
  tag.prefixes = absl::StrJoin(other, " ");
  return tag;
}

std::vector<std::string> HunkLines(const Mail& patch, const std::string& file,
                                   const std::string& hunk, size_t max_lines) {
  std::vector<std::string> out;
  if (hunk.empty()) return out;
  bool in_file = false;
  // Inside the hunk: the old and new lines its header announces, still to come.
  int old_left = -1, new_left = -1;
  size_t more = 0;
  for (absl::string_view line : absl::StrSplit(patch.body, '\n')) {
    if (old_left < 0) {
      if (absl::StartsWith(line, "diff --git ")) in_file = absl::EndsWith(line, " b/" + file);
      if (!in_file || !absl::StartsWith(line, hunk)) continue;
      // "@@ -10,3 +10,4 @@": a count left out is 1.
      std::vector<absl::string_view> ranges = absl::StrSplit(line, ' ');
      if (ranges.size() < 3) break;  // (and every line out goes through the end below)
      auto count = [](absl::string_view range) {
        const size_t comma = range.find(',');
        int n = 1;
        if (comma != absl::string_view::npos && !absl::SimpleAtoi(range.substr(comma + 1), &n)) {
          n = 0;
        }
        // Found by fuzz_mail: "@@ -1,-5 ..." made the hunk look unread, and the next header
        // without ranges returned its lines unchecked (bytes that are no UTF-8 in a reply).
        return std::max(n, 0);
      };
      old_left = count(ranges[1]);
      new_left = count(ranges[2]);
      out.emplace_back(line);
      continue;
    }
    const bool marker = absl::StartsWith(line, "\\");  // "\ No newline at end of file"
    if (old_left <= 0 && new_left <= 0 && !marker) break;
    // A marker belongs to the line before it; a context line (" ", or "" once a mailer
    // stripped its space) counts on both sides.
    const bool removed = !marker && absl::StartsWith(line, "-");
    const bool added = !marker && absl::StartsWith(line, "+");
    if (!marker && !added) --old_left;
    if (!marker && !removed) --new_left;
    if (out.size() < max_lines) {
      out.emplace_back(line);
    } else {
      ++more;
    }
  }
  while (out.size() > 1 && out.back().empty()) out.pop_back();
  if (more > 0) out.push_back(absl::StrCat("[... ", more, " more lines]"));
  for (std::string& line : out) line = ValidUtf8(line);  // quoted in a reply
  return out;
}

std::string SeriesMboxName(int version) {
  return absl::StrCat("v", version, ".mbox");
}

std::string ThreadRoot(const Mail& mail) {
  if (!mail.references.empty()) return mail.references.front();
  if (!mail.in_reply_to.empty()) return mail.in_reply_to;
  return mail.message_id;
}

std::string MessageIdOfLink(absl::string_view url) {
  url = absl::StripAsciiWhitespace(url);
  if (!absl::ConsumePrefix(&url, "https://") && !absl::ConsumePrefix(&url, "http://")) return "";
  // host/list/<id>/[T/...]
  std::vector<absl::string_view> parts = absl::StrSplit(url, '/', absl::SkipEmpty());
  if (parts.size() < 3 || parts[2].find('@') == absl::string_view::npos) return "";
  std::string id(parts[2]);
  // URL-escaped characters lore leaves in ids ("%2B" for '+').
  std::string out;
  for (size_t i = 0; i < id.size(); ++i) {
    int value = 0;
    if (id[i] == '%' && i + 2 < id.size() &&
        absl::SimpleHexAtoi(absl::string_view(id).substr(i + 1, 2), &value)) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back(id[i]);
    }
  }
  return ValidUtf8(out);
}

std::vector<const Mail*> Series::Mails() const {
  std::vector<const Mail*> out;
  if (cover) out.push_back(&*cover);
  for (const auto& [index, mail] : patches) out.push_back(&mail);
  return out;
}

std::string Series::BaseCommit() const {
  for (const Mail* mail : Mails()) {
    std::string base = TrailerValue(mail->body, "base-commit:");
    if (!base.empty()) return base;
  }
  return "";
}

std::vector<std::string> Series::TouchedFiles() const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& [index, mail] : patches) {
    for (absl::string_view line : absl::StrSplit(mail.body, '\n')) {
      if (!absl::ConsumePrefix(&line, "diff --git ")) continue;
      // "a/<path> b/<path>": the b/ side (paths with spaces are rare in the kernel).
      const size_t b = line.rfind(" b/");
      if (b == absl::string_view::npos) continue;
      std::string path = ValidUtf8(std::string(line.substr(b + 3)));
      if (seen.insert(path).second) out.push_back(std::move(path));
    }
  }
  return out;
}

std::map<int, std::string> Series::EarlierVersions() const {
  std::map<int, std::string> out;
  // The notes of a lone patch (below "---") or the cover letter.
  const Mail* notes = cover ? &*cover : (patches.empty() ? nullptr : &patches.begin()->second);
  if (notes == nullptr) return out;
  std::vector<absl::string_view> lines = absl::StrSplit(notes->body, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    // "Link to RFC v4:", "v4:", "- v4: https://..."; the URL on the line or the next.
    absl::string_view rest = line;
    absl::ConsumePrefix(&rest, "- ");
    absl::ConsumePrefix(&rest, "Link to ");
    absl::ConsumePrefix(&rest, "link to ");
    absl::ConsumePrefix(&rest, "RFC ");
    const size_t colon = rest.find(':');
    if (colon == absl::string_view::npos) continue;
    const int v = VersionWord(absl::StripAsciiWhitespace(rest.substr(0, colon)));
    if (v == 0 || v >= version) continue;
    absl::string_view url = absl::StripAsciiWhitespace(rest.substr(colon + 1));
    if (url.empty() && i + 1 < lines.size()) url = absl::StripAsciiWhitespace(lines[i + 1]);
    std::string id = MessageIdOfLink(url);
    if (!id.empty()) out.emplace(v, std::move(id));
  }
  return out;
}

std::string Series::Mbox() const {
  // Each mail as git writes it: its headers decoded, its body after the transfer encoding
  // (a quoted-printable or base64 patch reaches `git apply` as the diff it carries), lines
  // that would start a new mail escaped (mboxrd).
  std::string out;
  auto header = [&](absl::string_view name, absl::string_view value) {
    absl::StrAppend(&out, name, ": ", OneLine(std::string(value)), "\n");
  };
  for (const Mail* mail : Mails()) {
    absl::StrAppend(&out, "From faultline-robot Mon Sep 17 00:00:00 2001\n");
    header("From", mail->from);
    header("Date", mail->date);
    header("Subject", mail->subject);
    header("Message-ID", absl::StrCat("<", mail->message_id, ">"));
    header("MIME-Version", "1.0");
    header("Content-Type", "text/plain; charset=UTF-8");
    header("Content-Transfer-Encoding", "8bit");
    out += "\n";
    std::string body = mail->body;
    absl::StrReplaceAll({{"\r\n", "\n"}}, &body);
    for (absl::string_view line : absl::StrSplit(body, '\n')) {
      absl::string_view rest = line;
      while (absl::ConsumePrefix(&rest, ">")) {
      }
      if (absl::StartsWith(rest, "From ")) out += '>';
      absl::StrAppend(&out, line, "\n");
    }
    if (!absl::EndsWith(out, "\n\n")) out += '\n';
  }
  return out;
}

std::vector<Series> AssembleSeries(const std::vector<Mail>& mails) {
  std::vector<Series> out;
  std::map<std::tuple<std::string, int>, size_t> by_key;  // (root, version) -> out index
  for (const Mail& mail : mails) {
    std::optional<SubjectTag> tag = ParseSubject(mail.subject);
    if (!tag || tag->reply) continue;
    const auto key = std::make_tuple(ThreadRoot(mail), tag->version);
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      it = by_key.emplace(key, out.size()).first;
      out.emplace_back();
      out.back().version = tag->version;
      out.back().total = tag->total;
    }
    Series& series = out[it->second];
    series.rfc = series.rfc || tag->rfc;
    if (tag->index == 0) {
      series.cover = mail;
    } else if (tag->index <= series.total || series.total == 1) {
      series.patches.emplace(tag->index, mail);
    }
    if (tag->index == 0 || (!series.cover && (series.title.empty() || tag->index == 1))) {
      series.title = tag->title;
      series.from = mail.from;
      series.from_address = mail.from_address;
    }
    series.total = std::max(series.total, tag->total);
  }
  for (Series& series : out) {
    if (series.cover) {
      series.id = series.cover->message_id;
    } else if (!series.patches.empty()) {
      series.id = series.patches.begin()->second.message_id;
    }
  }
  return out;
}

}  // namespace faultline::robot
