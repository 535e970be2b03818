#include "robot/mail.h"

#include <gmime/gmime.h>
#include <iconv.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/strings.h"

namespace faultline::robot {
namespace {

// GMime, once; its options: encoded words read as RFC 2047 says (the loose mode glues the
// base64 of adjacent words before decoding, so "=?utf-8?B?T3Zlbg==?= =?utf-8?B?IExpeWFuZw==?="
// came out "Oven"), raw 8-bit header bytes tried as UTF-8, then Latin-1.
GMimeParserOptions* GMimeOptions() {
  static GMimeParserOptions* options = [] {
    g_mime_init();
    GMimeParserOptions* o = g_mime_parser_options_new();
    g_mime_parser_options_set_rfc2047_compliance_mode(o, GMIME_RFC_COMPLIANCE_STRICT);
    const char* fallback[] = {"UTF-8", "ISO-8859-1", nullptr};
    g_mime_parser_options_set_fallback_charsets(o, fallback);
    return o;
  }();
  return options;
}

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
  if (cd == reinterpret_cast<iconv_t>(-1))
    return ValidUtf8(std::string_view(text.data(), text.size()));
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

// A C string from GMime as valid UTF-8 ("" for null).
std::string Text(const char* text) {
  return text == nullptr ? "" : ValidUtf8(std::string_view(text));
}

// A header's value as written, unfolded, its encoded words decoded (valid UTF-8).
std::string HeaderText(GMimeObject* object, const char* name) {
  const char* raw = g_mime_object_get_header(object, name);
  if (raw == nullptr) return "";
  char* unfolded = g_mime_utils_header_unfold(raw);
  std::string text = DecodeWords(absl::StripAsciiWhitespace(unfolded));
  g_free(unfolded);
  return text;
}

// A Message-ID (RFC 5322 msg-id, without its brackets) is printable ASCII without spaces or
// brackets: it goes back out in In-Reply-To and References, which must be ASCII.
bool IsMessageId(const char* id) {
  if (id == nullptr || *id == '\0') return false;
  for (const char* c = id; *c != '\0'; ++c) {
    if (*c < 0x21 || *c > 0x7e || *c == '<' || *c == '>') return false;
  }
  return true;
}

// The Message-IDs of an In-Reply-To or References value, in order, without brackets (ones
// that are no Message-ID left out).
std::vector<std::string> References(const char* value) {
  std::vector<std::string> out;
  if (value == nullptr) return out;
  GMimeReferences* refs = g_mime_references_parse(GMimeOptions(), value);
  if (refs == nullptr) return out;
  for (int i = 0; i < g_mime_references_length(refs); ++i) {
    const char* id = g_mime_references_get_message_id(refs, i);
    if (IsMessageId(id)) out.emplace_back(id);
  }
  g_mime_references_free(refs);
  return out;
}

// The mailboxes' addresses of a list, groups' members included.
void Mailboxes(InternetAddressList* list, std::vector<std::string>* out, int depth = 0) {
  if (list == nullptr || depth > 4) return;
  for (int i = 0; i < internet_address_list_length(list); ++i) {
    InternetAddress* address = internet_address_list_get_address(list, i);
    if (INTERNET_ADDRESS_IS_MAILBOX(address)) {
      const char* addr = internet_address_mailbox_get_addr(INTERNET_ADDRESS_MAILBOX(address));
      if (addr != nullptr && std::strchr(addr, '@') != nullptr) out->push_back(ValidUtf8(addr));
    } else if (INTERNET_ADDRESS_IS_GROUP(address)) {
      Mailboxes(internet_address_group_get_members(INTERNET_ADDRESS_GROUP(address)), out,
                depth + 1);
    }
  }
}

// The first text/plain part, depth first through nested multiparts (not into attached
// mails): its bytes after the transfer encoding (a patch's bytes are what git applies).
std::optional<std::string> FirstTextPlain(GMimeObject* object, int depth) {
  if (depth > 16) return std::nullopt;
  if (GMIME_IS_MULTIPART(object)) {
    GMimeMultipart* multipart = GMIME_MULTIPART(object);
    for (int i = 0; i < g_mime_multipart_get_count(multipart); ++i) {
      if (auto text = FirstTextPlain(g_mime_multipart_get_part(multipart, i), depth + 1)) {
        return text;
      }
    }
    return std::nullopt;
  }
  if (!GMIME_IS_PART(object)) return std::nullopt;
  GMimeContentType* type = g_mime_object_get_content_type(object);
  if (type != nullptr && !g_mime_content_type_is_type(type, "text", "plain")) return std::nullopt;
  GMimeDataWrapper* content = g_mime_part_get_content(GMIME_PART(object));
  if (content == nullptr) return std::string();
  GMimeStream* sink = g_mime_stream_mem_new();
  g_mime_data_wrapper_write_to_stream(content, sink);
  GByteArray* bytes = g_mime_stream_mem_get_byte_array(GMIME_STREAM_MEM(sink));
  std::string out(reinterpret_cast<const char*>(bytes->data), bytes->len);
  g_object_unref(sink);
  return out;
}

}  // namespace

// RFC 2047 by hand, word by word (GMime 3.2 glues the base64 of adjacent words before
// decoding, and "=?utf-8?B?T3Zlbg==?= =?utf-8?B?IExpeWFuZw==?=" is "Oven" to it), each
// word's charset through iconv; raw bytes that are not UTF-8 as Latin-1.
std::string DecodeWords(absl::string_view text) {
  std::string out;
  std::string literal;  // text between encoded words, as written (UTF-8, else Latin-1)
  auto flush = [&] {
    out +=
        ValidUtf8(std::string_view(literal)) == literal ? literal : ToUtf8(literal, "iso-8859-1");
    literal.clear();
  };
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
          if (!last_was_word) literal += pending_space;  // space between words is dropped
          pending_space.clear();
          flush();
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
    literal += pending_space;
    pending_space.clear();
    literal.push_back(c);
    last_was_word = false;
  }
  literal += pending_space;
  flush();
  return ValidUtf8(out);
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
  GMimeParserOptions* options = GMimeOptions();
  // Lines end in "\n" (a patch's bytes are what git applies); a leading mbox "From " line is
  // the archive's, not a header.
  std::string normalized(raw);
  absl::StrReplaceAll({{"\r\n", "\n"}}, &normalized);
  absl::string_view text = normalized;
  if (absl::StartsWith(text, "From ")) {
    const size_t eol = text.find('\n');
    text = eol == absl::string_view::npos ? absl::string_view() : text.substr(eol + 1);
  }
  GMimeStream* stream = g_mime_stream_mem_new_with_buffer(text.data(), text.size());
  GMimeParser* parser = g_mime_parser_new_with_stream(stream);
  g_object_unref(stream);
  GMimeMessage* message = g_mime_parser_construct_message(parser, options);
  g_object_unref(parser);
  if (message == nullptr) return absl::InvalidArgumentError("not a mail: no headers GMime reads");
  std::unique_ptr<GMimeMessage, void (*)(GMimeMessage*)> owned(
      message, [](GMimeMessage* m) { g_object_unref(m); });
  GMimeObject* object = GMIME_OBJECT(message);
  Mail mail;
  const char* id = g_mime_message_get_message_id(message);
  if (id == nullptr || *id == '\0')
    return absl::InvalidArgumentError("a mail without a Message-ID");
  if (!IsMessageId(id)) {
    return absl::InvalidArgumentError(
        "a Message-ID with bytes outside printable ASCII (or spaces, or brackets)");
  }
  // Every value as valid UTF-8: they go into text columns, logs and replies.
  mail.message_id = id;
  const std::vector<std::string> parents =
      References(g_mime_object_get_header(object, "In-Reply-To"));
  if (!parents.empty()) mail.in_reply_to = parents.front();
  mail.references = References(g_mime_object_get_header(object, "References"));
  mail.subject = HeaderText(object, "Subject");
  InternetAddressList* from = g_mime_message_get_from(message);
  if (from != nullptr && internet_address_list_length(from) > 0) {
    mail.from = HeaderText(object, "From");
    std::vector<std::string> addresses;
    Mailboxes(from, &addresses);
    if (!addresses.empty()) mail.from_address = addresses.front();
  }
  Mailboxes(g_mime_message_get_addresses(message, GMIME_ADDRESS_TYPE_TO), &mail.to);
  Mailboxes(g_mime_message_get_addresses(message, GMIME_ADDRESS_TYPE_CC), &mail.cc);
  mail.date = Text(g_mime_object_get_header(object, "Date"));
  // GMime's date, owned by the message; a Date it cannot read is none.
  if (GDateTime* date = g_mime_message_get_date(message); date != nullptr && !mail.date.empty()) {
    mail.date_ms = static_cast<int64_t>(g_date_time_to_unix(date)) * 1000;
  }
  if (GMimeObject* body = g_mime_message_get_mime_part(message)) {
    if (std::optional<std::string> plain = FirstTextPlain(body, 0)) mail.body = *std::move(plain);
  }
  mail.raw = std::string(raw);
  return mail;
}

}  // namespace faultline::robot
