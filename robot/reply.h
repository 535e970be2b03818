#pragma once
// The robot's reply in a series' thread: headers that thread it under the mail it answers
// (In-Reply-To, References), the author in To and the lists in Cc, a Message-ID derived
// from the series and the reply's kind (so a reply made twice is the same mail, and the
// archive tells whether it went out), and a body of at most 80 columns. Pure.
#include <string>
#include <vector>

#include "robot/mail.h"

namespace faultline::robot {

struct Reply {
  std::string message_id;               // without brackets
  std::vector<std::string> recipients;  // the envelope: author, lists, extra Cc
  std::string text;                     // the whole mail, headers and body
};

struct ReplyOptions {
  std::string from;             // "faultline robot <robot@example.org>"
  std::vector<std::string> cc;  // besides the answered mail's To and Cc
  std::string date;             // RFC 5322 date ("Sat, 05 Dec 2026 10:00:00 +0000")
};

// `kind` names the reply among a series' replies ("results"). Lines of `body` over 80
// columns are wrapped nowhere: MaxLineWidth tells the caller.
Reply ComposeReply(const Mail& answered, const std::string& kind, const std::string& body,
                   const ReplyOptions& options);

// A mail that starts a thread (no mail to answer: a commit's author told about it), to `to`
// ("Name <mail>") and the options' Cc, its Message-ID derived from `key` and `kind` as a
// reply's is.
Reply ComposeMail(const std::string& to, const std::string& subject, const std::string& key,
                  const std::string& kind, const std::string& body, const ReplyOptions& options);

// Whether `message_id` is one ReplyMessageId makes (the robot's own mail, read back from
// the archive): the only place besides ReplyMessageId that knows their form.
bool IsReplyMessageId(const std::string& message_id);

// The Message-ID of the reply of `kind` to `answered_id`, under the domain of `from`.
std::string ReplyMessageId(const std::string& answered_id, const std::string& kind,
                           const std::string& from);

// The widest line of `text` in columns (UTF-8 characters).
size_t MaxLineWidth(const std::string& text);

}  // namespace faultline::robot
