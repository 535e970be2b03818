#pragma once
// Inside report/: what the mail, mmtests and lkp layouts (mail.h) share.
#include <map>
#include <string>
#include <vector>

#include "faultline/v1/job.pb.h"
#include "report/mail.h"

namespace faultline::report::mail_parts {

inline constexpr int kMaxCountersPerCell = 12;
inline constexpr size_t kMaxFramesPerCell = 15;

// The text as the options want it: ASCII (ToAscii) unless utf8.
std::string Finish(std::string text, const MailOptions& options);
// A, B, C... in the job's kernel order, the baseline first; `order` gets that order.
std::map<std::string, std::string> KernelLetters(const v1::GetReportResponse& report,
                                                 std::vector<std::string>* order);
// The frames that changed (frames.h) in each comparison that was profiled, at most
// kMaxFramesPerCell each, fitted to the width.
std::string FrameLines(const v1::GetReportResponse& report,
                       const std::map<std::string, std::string>& letters, size_t width);
// The seed's mmap_lock tables of every comparison that traced them (mmap_lock_waits: true),
// each fitted to the width (stacked where a row would be wider).
std::string LockTables(const v1::GetReportResponse& report,
                       const std::map<std::string, std::string>& letters, size_t width);

}  // namespace faultline::report::mail_parts
