#pragma once
// Sending one mail over SMTP (RFC 5321): EHLO, MAIL FROM, RCPT TO each recipient, DATA
// (dot-stuffed, CRLF), QUIT. Plain TCP to a relay the robot is allowed to use (a local MTA
// such as exim4): no TLS, no AUTH.
#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace faultline::robot {

struct SmtpResult {
  absl::Status status;
  // True once the server could have taken the mail: the end of DATA was written. A failure
  // after that (no answer, a dropped connection) may have delivered it; the robot must not
  // send it again.
  bool maybe_delivered = false;
};

// `server` is "host:port". Every reply is awaited at most `timeout`.
SmtpResult SendMail(const std::string& server, const std::string& envelope_from,
                    const std::vector<std::string>& recipients, const std::string& text,
                    std::chrono::seconds timeout = std::chrono::seconds(30));

}  // namespace faultline::robot
