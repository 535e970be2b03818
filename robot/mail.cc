#include "robot/mail.h"

#include <iconv.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace faultline::robot {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Quoted-printable (RFC 2045 6.7): "=XX" bytes and soft line breaks ("=" at a line's end).
std::string DecodeQuotedPrintable(absl::string_view text, bool underscore_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_' && underscore_is_space) {
      out.push_back(' ');
    } else if (c == '=' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;  // soft line break
    } else if (c == '=' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 &&
               HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// `text` in `charset` as UTF-8 (glibc's iconv: ISO-8859-*, Windows-125*, KOI8, GB*, ...);
// bytes that do not convert, and unknown charsets, come out as U+FFFD, never raw.
std::string ToUtf8(absl::string_view text, absl::string_view charset) {
  std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(charset));
  if (const size_t star = name.find('*'); star != std::string::npos) name.resize(star);  // RFC 2231
  if (name.empty() || name == "utf-8" || name == "utf8" || name == "us-ascii" || name == "ascii") {
    return ValidUtf8(std::string_view(text.data(), text.size()));
  }
  iconv_t cd = ::iconv_open("UTF-8", name.c_str());
  if (cd == reinterpret_cast<iconv_t>(-1)) return ValidUtf8(std::string_view(text.data(), text.size()));
  std::string out;
  std::string in(text);
  char* src = in.data();
  size_t left = in.size();
  char buffer[4096];
  while (left > 0) {
    char* dst = buffer;
    size_t room = sizeof buffer;
    const size_t r = ::iconv(cd, &src, &left, &dst, &room);
    out.append(buffer, static_cast<size_t>(dst - buffer));
    if (r == static_cast<size_t>(-1) && errno != E2BIG) {
      out += "\xef\xbf\xbd";  // a byte the charset does not have: skipped
      ++src;
      --left;
    }
  }
  ::iconv_close(cd);
  return ValidUtf8(out);
}

// One encoded word's text, or nullopt when `word` is not one.
std::optional<std::string> DecodeWord(absl::string_view word) {
  if (!absl::StartsWith(word, "=?") || !absl::EndsWith(word, "?=") || word.size() < 8) {
    return std::nullopt;
  }
  std::vector<absl::string_view> parts =
      absl::StrSplit(word.substr(2, word.size() - 4), absl::MaxSplits('?', 2));
  if (parts.size() != 3) return std::nullopt;
  const char encoding =
      static_cast<char>(absl::ascii_toupper(static_cast<unsigned char>(parts[1].front())));
  if (parts[1].size() != 1 || (encoding != 'B' && encoding != 'Q')) return std::nullopt;
  if (encoding == 'Q') {
    return ToUtf8(DecodeQuotedPrintable(parts[2], /*underscore_is_space=*/true), parts[0]);
  }
  std::string decoded;
  if (!absl::Base64Unescape(parts[2], &decoded)) return std::nullopt;
  return ToUtf8(decoded, parts[0]);
}

// Header lines unfolded: name (lower case) and value, in order.
std::vector<std::pair<std::string, std::string>> Headers(absl::string_view head) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view line : absl::StrSplit(head, '\n')) {
    if (line.empty()) continue;
    if ((line.front() == ' ' || line.front() == '\t') && !out.empty()) {
      out.back().second += " ";
      out.back().second += std::string(absl::StripAsciiWhitespace(line));
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;  // the mbox "From " line, junk
    out.emplace_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon))),
                     std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return out;
}

std::string HeaderValue(const std::vector<std::pair<std::string, std::string>>& headers,
                        absl::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

// The parameter `name` of a Content-Type value ("boundary", "charset").
std::string Parameter(absl::string_view value, absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(value, ';')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) continue;
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(part.substr(0, eq)), name)) continue;
    absl::string_view v = absl::StripAsciiWhitespace(part.substr(eq + 1));
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return std::string(v);
  }
  return "";
}

// The body's bytes after its transfer encoding (a patch's bytes are what git applies).
std::string DecodeBody(absl::string_view body, absl::string_view transfer_encoding) {
  const std::string encoding =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(transfer_encoding));
  if (encoding == "quoted-printable") return DecodeQuotedPrintable(body, false);
  if (encoding == "base64") {
    std::string decoded;
    std::string compact;
    for (char c : body) {
      if (!absl::ascii_isspace(static_cast<unsigned char>(c))) compact.push_back(c);
    }
    if (absl::Base64Unescape(compact, &decoded)) return decoded;
  }
  return std::string(body);
}

// Splits at the first empty line: headers and body.
std::pair<absl::string_view, absl::string_view> SplitHeadBody(absl::string_view text) {
  const size_t blank = text.find("\n\n");
  if (blank == absl::string_view::npos) return {text, ""};
  return {text.substr(0, blank), text.substr(blank + 2)};
}

// The first text/plain part of a multipart body (the whole body otherwise), decoded.
std::string TextBody(const std::vector<std::pair<std::string, std::string>>& headers,
                     absl::string_view body) {
  const std::string type = HeaderValue(headers, "content-type");
  if (!absl::StartsWithIgnoreCase(type, "multipart/")) {
    return DecodeBody(body, HeaderValue(headers, "content-transfer-encoding"));
  }
  const std::string boundary = Parameter(type, "boundary");
  if (boundary.empty()) return std::string(body);
  const std::string delimiter = "--" + boundary;
  for (absl::string_view part : absl::StrSplit(body, delimiter)) {
    if (absl::StartsWith(part, "--")) break;  // the closing delimiter
    part = absl::StripPrefix(part, "\n");
    auto [part_head, part_body] = SplitHeadBody(part);
    const auto part_headers = Headers(part_head);
    const std::string part_type = HeaderValue(part_headers, "content-type");
    if (part_type.empty() || absl::StartsWithIgnoreCase(part_type, "text/plain")) {
      return DecodeBody(part_body, HeaderValue(part_headers, "content-transfer-encoding"));
    }
  }
  return std::string(body);
}

}  // namespace

std::string DecodeWords(absl::string_view text) {
  std::string out;
  bool last_was_word = false;
  std::string pending_space;
  size_t i = 0;
  while (i < text.size()) {
    if (text.substr(i, 2) == "=?") {
      // An encoded word ends at the "?=" after its charset and encoding.
      size_t q1 = text.find('?', i + 2);
      size_t q2 = q1 == absl::string_view::npos ? q1 : text.find('?', q1 + 1);
      size_t end = q2 == absl::string_view::npos ? q2 : text.find("?=", q2 + 1);
      if (end != absl::string_view::npos) {
        if (auto decoded = DecodeWord(text.substr(i, end + 2 - i))) {
          if (!last_was_word) out += pending_space;  // space between words is dropped
          pending_space.clear();
          out += *decoded;
          last_was_word = true;
          i = end + 2;
          continue;
        }
      }
    }
    const char c = text[i++];
    if (c == ' ' || c == '\t') {
      pending_space.push_back(c);
      continue;
    }
    out += pending_space;
    pending_space.clear();
    out.push_back(c);
    last_was_word = false;
  }
  out += pending_space;
  return out;
}

std::string EncodeWords(absl::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && c >= 0x20 && c < 0x7f;
  if (ascii) return std::string(text);
  const std::string utf8 = ValidUtf8(std::string_view(text.data(), text.size()));
  std::string out;
  size_t i = 0;
  while (i < utf8.size()) {
    size_t end = std::min(utf8.size(), i + 45);  // 45 bytes: 60 of base64, 72 in all
    while (end < utf8.size() && (static_cast<unsigned char>(utf8[end]) & 0xc0) == 0x80) --end;
    absl::StrAppend(&out, out.empty() ? "" : " ", "=?UTF-8?B?",
                    absl::Base64Escape(absl::string_view(utf8).substr(i, end - i)), "?=");
    i = end;
  }
  return out;
}

std::string EncodeMailbox(absl::string_view mailbox) {
  const size_t open = mailbox.rfind('<');
  if (open == absl::string_view::npos) return std::string(mailbox);
  absl::string_view name = absl::StripAsciiWhitespace(mailbox.substr(0, open));
  if (name.size() >= 2 && name.front() == '"' && name.back() == '"') {
    name = name.substr(1, name.size() - 2);
  }
  const std::string encoded = EncodeWords(name);
  if (encoded == name) return std::string(mailbox);
  return absl::StrCat(encoded, " ", mailbox.substr(open));
}

std::vector<std::string> MessageIds(absl::string_view value) {
  std::vector<std::string> ids;
  size_t at = 0;
  while (true) {
    const size_t open = value.find('<', at);
    if (open == absl::string_view::npos) break;
    const size_t close = value.find('>', open);
    if (close == absl::string_view::npos) break;
    absl::string_view id = absl::StripAsciiWhitespace(value.substr(open + 1, close - open - 1));
    if (!id.empty()) ids.emplace_back(id);
    at = close + 1;
  }
  if (ids.empty()) {
    absl::string_view bare = absl::StripAsciiWhitespace(value);
    if (!bare.empty() && bare.find(' ') == absl::string_view::npos) ids.emplace_back(bare);
  }
  return ids;
}

std::string AddressOf(absl::string_view mailbox) {
  const size_t open = mailbox.rfind('<');
  const size_t close = mailbox.rfind('>');
  if (open != absl::string_view::npos && close != absl::string_view::npos && close > open) {
    return std::string(absl::StripAsciiWhitespace(mailbox.substr(open + 1, close - open - 1)));
  }
  return std::string(absl::StripAsciiWhitespace(mailbox));
}

std::vector<std::string> Addresses(absl::string_view value) {
  std::vector<std::string> out;
  bool quoted = false;
  int angle = 0;
  size_t start = 0;
  for (size_t i = 0; i <= value.size(); ++i) {
    const char c = i < value.size() ? value[i] : ',';
    if (c == '"') quoted = !quoted;
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (c == ',' && !quoted && angle == 0) {
      std::string address = AddressOf(value.substr(start, i - start));
      if (address.find('@') != std::string::npos) out.push_back(std::move(address));
      start = i + 1;
    }
  }
  return out;
}

absl::StatusOr<Mail> ParseMail(absl::string_view raw) {
  std::string text(raw);
  absl::StrReplaceAll({{"\r\n", "\n"}}, &text);
  auto [head, body] = SplitHeadBody(text);
  const auto headers = Headers(head);
  Mail mail;
  const std::vector<std::string> ids = MessageIds(HeaderValue(headers, "message-id"));
  if (ids.empty()) return absl::InvalidArgumentError("a mail without a Message-ID");
  // Every header value as valid UTF-8: they go into text columns, logs and replies.
  mail.message_id = ValidUtf8(ids.front());
  const std::vector<std::string> parents = MessageIds(HeaderValue(headers, "in-reply-to"));
  if (!parents.empty()) mail.in_reply_to = ValidUtf8(parents.front());
  for (const std::string& id : MessageIds(HeaderValue(headers, "references"))) {
    mail.references.push_back(ValidUtf8(id));
  }
  mail.subject = ValidUtf8(DecodeWords(HeaderValue(headers, "subject")));
  mail.from = ValidUtf8(DecodeWords(HeaderValue(headers, "from")));
  mail.from_address = AddressOf(mail.from);
  for (std::string& a : Addresses(HeaderValue(headers, "to"))) mail.to.push_back(ValidUtf8(a));
  for (std::string& a : Addresses(HeaderValue(headers, "cc"))) mail.cc.push_back(ValidUtf8(a));
  mail.date = ValidUtf8(HeaderValue(headers, "date"));
  mail.body = TextBody(headers, body);
  mail.raw = std::string(raw);
  return mail;
}

}  // namespace faultline::robot
