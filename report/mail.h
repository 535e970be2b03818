#pragma once
// Reports people paste into a mailing list (`faultline report JOB --format mail|mmtests|lkp`):
// plain text, every line at most 80 columns, ASCII only unless asked (a `±` arrives
// mangled through quoted-printable).
//
// - mail: a header that says what was compared (the kernels by release, commit, series and
//   config hash; each board's arch, CPUs, memory, THP, swap and virt.accel; the study's
//   limits and knobs), the seeds' tables where they fit, one line per cell with the change,
//   its 95% CI and the verdict, the counters that changed under it, caveats, and the spec
//   that runs the study again (spec_yaml.h).
// - mmtests: compare-kernels' layout (`Hmean tput-threads-2 17303.09 ( 0.00%) 18394.51 *
//   6.31%*`): Min, quartiles, Max, Hmean, Stddev and CoeffVar over each kernel's runs, a
//   change starred where faultline's verdict says the kernels differ.
// - lkp: LKP's `%stddev %change %stddev` block per board and cell: the throughput, then the
//   counters that changed, each side's relative stddev over its runs.
// The mmtests and lkp layouts need the report's runs (GetReportRequest.runs).
#include <string>
#include <string_view>

#include "faultline/v1/job.pb.h"

namespace faultline::report {

struct MailOptions {
  bool utf8 = false;  // keep non-ASCII characters (±, µ, ...) as they are
  size_t width = 80;
};

std::string RenderMail(const v1::GetReportResponse& report, const MailOptions& options = {});
std::string RenderMmtests(const v1::GetReportResponse& report, const MailOptions& options = {});
std::string RenderLkp(const v1::GetReportResponse& report, const MailOptions& options = {});

// UTF-8 text as ASCII: ± -> +-, µ -> u, × -> x, ≤ -> <=, ≥ -> >=, – and — -> -, … -> ...,
// → -> ->, δ -> d, α -> alpha, ≈ -> ~; any other non-ASCII character -> ?.
std::string ToAscii(std::string_view text);

// Lines longer than `width` broken at their last space that fits (a word longer than the
// width is cut), continuations indented two past the line's own indent.
std::string FoldLines(std::string_view text, size_t width);

}  // namespace faultline::report
