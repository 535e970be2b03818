#pragma once
// Mails as a list archive holds them (RFC 5322, as public-inbox stores each one): the
// headers the robot threads and answers by, and the body. Pure: no files, no network.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace faultline::robot {

struct Mail {
  std::string message_id;               // without the angle brackets
  std::string in_reply_to;              // the first id of In-Reply-To ("" when none)
  std::vector<std::string> references;  // oldest first
  std::string subject;                  // unfolded, RFC 2047 words decoded (UTF-8)
  std::string from;                     // as written, decoded ("Barry Song <baohua@kernel.org>")
  std::string from_address;             // baohua@kernel.org
  std::vector<std::string> to;          // addresses
  std::vector<std::string> cc;
  std::string date;     // as written
  int64_t date_ms = 0;  // what it says, in ms since the epoch (0: none, or not a date)
  std::string body;     // after the blank line; quoted-printable and base64 bodies decoded
  std::string raw;      // the whole mail as read
};

// Parses one mail. A mail without a Message-ID is INVALID_ARGUMENT (an archive gives every
// mail one).
absl::StatusOr<Mail> ParseMail(absl::string_view raw);

// "=?UTF-8?q?Barry_Song?=" and "=?utf-8?B?...?=" words decoded; other text kept.
std::string DecodeWords(absl::string_view text);

// RFC 2047 for what goes out: text that is not all printable ASCII becomes UTF-8 "B"
// encoded words (each at most 75 characters, split between characters), else it is kept.
std::string EncodeWords(absl::string_view text);
// "Name <addr>" with the name encoded when it is not ASCII (the address never is).
std::string EncodeMailbox(absl::string_view mailbox);

// The ids of a Message-ID / In-Reply-To / References value, in order, without brackets.
std::vector<std::string> MessageIds(absl::string_view value);

// The address of "Name <addr>" (or a bare addr), lower-cased domain kept as written.
std::string AddressOf(absl::string_view mailbox);
// The addresses of a To/Cc value (commas outside quotes and brackets separate them).
std::vector<std::string> Addresses(absl::string_view value);

}  // namespace faultline::robot
