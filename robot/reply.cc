#include "robot/reply.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/sha256.h"

namespace faultline::robot {
namespace {

// "Subject: value" folded at spaces (RFC 5322 2.2.3) so that no line passes 78 columns where
// a space allows it: a long series title is common, and the reply stays <= 80 columns.
std::string FoldedHeader(const std::string& name, const std::string& value) {
  std::string out = name + ":";
  size_t line = out.size();
  for (absl::string_view word : absl::StrSplit(value, ' ', absl::SkipEmpty())) {
    if (line + 1 + word.size() > 78 && line > name.size() + 1) {
      out += "\n";
      line = 0;
    }
    absl::StrAppend(&out, " ", word);
    line += 1 + word.size();
  }
  return out + "\n";
}

// An address a relay takes without SMTPUTF8: printable ASCII, no spaces, one '@' inside.
// A stranger's mail may carry others (found by fuzz_mail: bytes in the From's address went
// out raw in the reply's To); those are not written or sent to.
bool Sendable(const std::string& address) {
  const size_t at = address.find('@');
  if (at == 0 || at == std::string::npos || at + 1 == address.size()) return false;
  return std::all_of(address.begin(), address.end(), [](char c) {
    return c > 0x20 && c < 0x7f && c != '<' && c != '>' && c != ',' && c != '"';
  });
}

// "Name <address>" with the name RFC 2047 encoded when it is not ASCII; the address alone
// when `mailbox` has no name.
std::string Mailbox(const std::string& mailbox, const std::string& address) {
  const size_t open = mailbox.rfind('<');
  if (open == std::string::npos) return address;
  absl::string_view name = absl::StripAsciiWhitespace(absl::string_view(mailbox).substr(0, open));
  if (name.empty()) return address;
  return EncodeMailbox(absl::StrCat(name, " <", address, ">"));
}

}  // namespace

namespace {
constexpr char kReplyIdPrefix[] = "faultline-";
}  // namespace

bool IsReplyMessageId(const std::string& message_id) {
  return absl::StartsWith(message_id, kReplyIdPrefix);
}

std::string ReplyMessageId(const std::string& answered_id, const std::string& kind,
                           const std::string& from) {
  const std::string address = AddressOf(from);
  const size_t at = address.find('@');
  const std::string domain = at == std::string::npos ? "faultline.invalid" : address.substr(at + 1);
  return absl::StrCat(kReplyIdPrefix, kind, "-",
                      LowerHex(Sha256Digest(answered_id + "\n" + kind)).substr(0, 24), "@", domain);
}

size_t MaxLineWidth(const std::string& text) {
  size_t widest = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t width = 0;
    for (unsigned char c : line) width += (c & 0xC0) != 0x80 ? 1 : 0;
    widest = std::max(widest, width);
  }
  return widest;
}

Reply ComposeReply(const Mail& answered, const std::string& kind, const std::string& body,
                   const ReplyOptions& options) {
  Reply reply;
  reply.message_id = ReplyMessageId(answered.message_id, kind, options.from);
  // To the author; Cc the lists and people the answered mail went to, and the config's.
  std::vector<std::string> cc;
  std::set<std::string> seen = {absl::AsciiStrToLower(answered.from_address),
                                absl::AsciiStrToLower(AddressOf(options.from))};
  for (const auto* list : {&answered.to, &answered.cc, &options.cc}) {
    for (const std::string& address : *list) {
      if (Sendable(AddressOf(address)) &&
          seen.insert(absl::AsciiStrToLower(AddressOf(address))).second) {
        cc.push_back(AddressOf(address));
      }
    }
  }
  const bool to_author = Sendable(answered.from_address);
  if (to_author) reply.recipients.push_back(answered.from_address);
  reply.recipients.insert(reply.recipients.end(), cc.begin(), cc.end());
  std::vector<std::string> references = answered.references;
  references.push_back(answered.message_id);
  std::string subject = answered.subject;
  if (!absl::StartsWithIgnoreCase(subject, "re:")) subject = "Re: " + subject;
  std::string refs;
  for (const std::string& id : references) {
    absl::StrAppend(&refs, refs.empty() ? "" : "\n ", "<", id, ">");
  }
  std::string cc_line;
  for (size_t i = 0; i < cc.size(); ++i) {
    absl::StrAppend(&cc_line, i == 0 ? "" : ",\n ", cc[i]);
  }
  // Headers in ASCII: a name or subject that is not goes out as RFC 2047 words.
  absl::StrAppend(&reply.text, "From: ", EncodeMailbox(options.from), "\n");
  absl::StrAppend(&reply.text, "To: ",
                  to_author ? Mailbox(answered.from, answered.from_address)
                            : std::string("undisclosed-recipients:;"),
                  "\n");
  if (!cc_line.empty()) absl::StrAppend(&reply.text, "Cc: ", cc_line, "\n");
  absl::StrAppend(&reply.text, FoldedHeader("Subject", EncodeWords(subject)));
  absl::StrAppend(&reply.text, "Date: ", options.date, "\n");
  absl::StrAppend(&reply.text, "Message-ID: <", reply.message_id, ">\n");
  absl::StrAppend(&reply.text, "In-Reply-To: <", answered.message_id, ">\n");
  absl::StrAppend(&reply.text, "References: ", refs, "\n");
  absl::StrAppend(&reply.text,
                  "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
                  "Content-Transfer-Encoding: 8bit\nX-Mailer: faultline series robot\n\n");
  absl::StrAppend(&reply.text, body);
  if (!absl::EndsWith(body, "\n")) reply.text.push_back('\n');
  return reply;
}

Reply ComposeMail(const std::string& to, const std::string& subject, const std::string& key,
                  const std::string& kind, const std::string& body, const ReplyOptions& options) {
  Reply mail;
  mail.message_id = ReplyMessageId(key, kind, options.from);
  mail.recipients.push_back(AddressOf(to));
  std::set<std::string> seen = {absl::AsciiStrToLower(AddressOf(to)),
                                absl::AsciiStrToLower(AddressOf(options.from))};
  std::string cc_line;
  for (const std::string& address : options.cc) {
    if (!seen.insert(absl::AsciiStrToLower(AddressOf(address))).second) continue;
    mail.recipients.push_back(AddressOf(address));
    absl::StrAppend(&cc_line, cc_line.empty() ? "" : ",\n ", AddressOf(address));
  }
  absl::StrAppend(&mail.text, "From: ", EncodeMailbox(options.from), "\nTo: ", EncodeMailbox(to),
                  "\n");
  if (!cc_line.empty()) absl::StrAppend(&mail.text, "Cc: ", cc_line, "\n");
  absl::StrAppend(&mail.text, FoldedHeader("Subject", EncodeWords(subject)), "Date: ", options.date,
                  "\nMessage-ID: <", mail.message_id, ">\n",
                  "MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
                  "Content-Transfer-Encoding: 8bit\nX-Mailer: faultline series robot\n\n",
                  body);
  if (!absl::EndsWith(body, "\n")) mail.text.push_back('\n');
  return mail;
}

}  // namespace faultline::robot
