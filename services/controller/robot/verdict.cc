// What the robot says about a series (robot/verdict.h).
#include "services/controller/robot/verdict.h"

#include <ctime>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/kernel_label.h"
#include "common/strings.h"
#include "faultline/v1/values.h"
#include "kbuild/series.h"
#include "robot/reply.h"
#include "services/controller/core/phases.h"
#include "services/controller/orchestration/report_message.h"

namespace faultline::controller {
namespace {

// "-12.0%": a ratio as the change it is.
std::string Percent(double ratio) {
  return absl::StrFormat("%+.1f%%", (ratio - 1) * 100);
}

}  // namespace

const char* const kRobotSignature =
    "\n-- \nfaultline series robot: one reply per version of a series.\n";

SeriesVerdict JudgeSeries(const Stores& stores, const SeriesRecord& series) {
  SeriesVerdict v;
  int measured = 0, regressions = 0, comparisons = 0, inconclusive = 0;
  // Kernels that did not build: said once each (by label and arch), never hidden behind
  // "no regression".
  std::vector<std::string> failed_builds;
  std::set<std::string> failed_seen;
  for (int64_t id : series.jobs) {
    absl::StatusOr<std::vector<BuildRecord>> builds = stores.builds->ListBuilds(id);
    if (!builds.ok()) continue;
    for (const BuildRecord& b : *builds) {
      // A build stopped because its job was cancelled did not fail (pg_jobs.cc's reason).
      if (b.state != BuildState::kFailed || b.error.rfind("cancelled: ", 0) == 0 ||
          !failed_seen.insert(b.label + "/" + b.arch).second) {
        continue;
      }
      std::string first(absl::StripAsciiWhitespace(b.error.substr(0, b.error.find('\n'))));
      std::string line = absl::StrCat("  ", KernelLabel::Parse(b.label).name, " (", b.arch,
                                      ") did not build: ", first);
      if (line.size() > 78) line = line.substr(0, 75) + "...";
      failed_builds.push_back(ValidUtf8(line));
    }
  }
  for (int64_t id : series.jobs) {
    v1::GetReportRequest request;
    request.set_job_id(id);
    absl::StatusOr<v1::GetReportResponse> report =
        ReportResponse(stores.jobs, stores.builds, request);
    if (!report.ok()) continue;
    if (!report->comparisons().empty()) ++measured;
    for (const v1::Comparison& c : report->comparisons()) {
      ++comparisons;
      if (v1::VerdictOf(c) == v1::VERDICT_INCONCLUSIVE) ++inconclusive;
      if (!v1::SaysSlower(v1::VerdictOf(c))) continue;
      ++regressions;
      std::vector<std::string> cell;
      for (const std::string& key : report->matrix_keys()) {
        if (auto it = c.cell().find(key); it != c.cell().end()) {
          cell.push_back(absl::StrCat(key, "=", it->second));
        }
      }
      std::string line =
          absl::StrCat("  ", report->job().spec().benchmark(), " on ", c.board(),
                       cell.empty() ? "" : absl::StrCat(" (", absl::StrJoin(cell, " "), ")"), ": ",
                       c.candidate(), " vs ", c.baseline(), " ", Percent(c.ratio()), " [",
                       Percent(c.ci_low()), ", ", Percent(c.ci_high()), "]");
      if (line.size() > 78) line = line.substr(0, 75) + "...";
      v.lines.push_back(std::move(line));
    }
  }
  if (regressions > 0) {
    for (std::string& f : failed_builds) v.lines.push_back(std::move(f));
  }
  if (!failed_builds.empty() && regressions == 0) {
    v.state = CheckState::kFail;
    v.description = absl::StrCat(failed_builds.size(), " kernel build(s) failed: see the reply");
    v.headline = absl::StrCat("Not tested: ", failed_builds.size(), " kernel build(s) failed:");
    v.lines = std::move(failed_builds);
    if (comparisons > 0) {
      v.lines.push_back(
          absl::StrCat("(the ", comparisons, " comparisons that ran show none slower)"));
    }
  } else if (measured == 0) {
    v.state = CheckState::kFail;
    v.description = absl::StrCat("no job of ", series.jobs.size(), " measured: see the reply");
    v.headline = absl::StrCat("Nothing measured: no job of ", series.jobs.size(),
                              " compared its kernels (see below).");
  } else if (regressions > 0) {
    v.state = CheckState::kWarning;
    v.description =
        absl::StrCat(regressions, " of ", comparisons, " comparisons regress: see the reply");
    v.headline = absl::StrCat("Regression: ", regressions, " of ", comparisons,
                              " comparisons say slower (95% CI):");
  } else {
    // "No regression" from runs too few to tell says so.
    const std::string unsure =
        inconclusive == 0 ? "" : absl::StrCat(" (", inconclusive, " inconclusive)");
    v.state = CheckState::kSuccess;
    v.description =
        absl::StrCat(comparisons, " comparisons", unsure, ", no regression: see the reply");
    v.headline = absl::StrCat("No regression in ", comparisons, " comparisons", unsure, ".");
  }
  return v;
}

absl::StatusOr<std::string> TimingParagraph(const Stores& stores, const SeriesRecord& series,
                                            int64_t posted_ms, int64_t now_ms) {
  std::string out;
  // A Date in the future, or from long before any archive would carry the mail, is not when
  // it was posted.
  constexpr int64_t kMonthMs = int64_t{30} * 24 * 3600 * 1000;
  if (posted_ms > 0 && posted_ms <= now_ms && now_ms - posted_ms <= kMonthMs) {
    const std::time_t posted = static_cast<std::time_t>(posted_ms / 1000);
    std::tm utc{};
    gmtime_r(&posted, &utc);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &utc);
    absl::StrAppend(&out, "Time: posted ", when, ", this reply ",
                    HumanSeconds(static_cast<double>(now_ms - posted_ms) / 1000.0), " later.\n");
  } else {
    absl::StrAppend(&out, "Time:\n");
  }
  for (int64_t id : series.jobs) {
    absl::StatusOr<JobTimeline> timeline = stores.jobs->Timeline(id);
    if (!timeline.ok()) return timeline.status();
    absl::StrAppend(&out, "Job ", id, ", from its submission:\n");
    for (const ArchPhases& arch : PhasesOf(*timeline, now_ms)) {
      for (const std::string& line : PhaseLines(arch, 76)) absl::StrAppend(&out, "  ", line, "\n");
    }
  }
  return out;
}

absl::StatusOr<std::string> ResultsBody(const Stores& stores, const RobotOptions& options,
                                        const SeriesRecord& series, const SeriesVerdict& verdict,
                                        int64_t posted_ms, int64_t now_ms) {
  // What it says first: the verdict, then how it was measured, then every job's report.
  std::string body = absl::StrCat(verdict.headline, "\n");
  for (const std::string& line : verdict.lines) absl::StrAppend(&body, line, "\n");
  // The earlier version it was compared with: the newest tested one, not always N-1.
  std::string against_earlier;
  if (!series.previous.empty()) {
    absl::StatusOr<std::optional<SeriesRecord>> earlier = stores.robot->GetSeries(series.previous);
    if (!earlier.ok()) return earlier.status();
    against_earlier = earlier->has_value() ? absl::StrCat(" and against v", (*earlier)->version)
                                           : " and against an earlier version";
  }
  absl::StrAppend(&body, "\nfaultline measured this series (v", series.version,
                  ") against its base", against_earlier, ":\n", series.jobs.size(),
                  " jobs, the kernels built with and without the series from\n", options.tree,
                  "\nat ", series.base, "\n(config ", options.config_base,
                  options.fragments.empty() ? "" : " + fragments", ").\n");
  if (!series.previous.empty()) {
    absl::StrAppend(&body, "The earlier version: <", series.previous, ">.\n");
  }
  for (int64_t id : series.jobs) {
    absl::StatusOr<std::string> report =
        RenderJobReport(stores.jobs, stores.builds, id, report::ReportFormat::kMail);
    if (!report.ok()) return report.status();
    absl::StrAppend(&body, "\n", std::string(78, '='), "\n", *report);
  }
  absl::StatusOr<std::string> timing = TimingParagraph(stores, series, posted_ms, now_ms);
  if (!timing.ok()) return timing.status();
  absl::StrAppend(&body, "\n", std::string(78, '='), "\n", *timing);
  absl::StrAppend(&body, kRobotSignature,
                  "Each job's report again: faultline report JOB --format mail.\n");
  return body;
}

absl::StatusOr<std::optional<SeriesApplyFailure>> FindApplyFailure(const Stores& stores,
                                                                   const SeriesRecord& series) {
  // PlanJobs names this version's mbox SeriesMboxName: another version's failure (the
  // earlier one, built in the same jobs) is not this one's.
  const std::string mbox = robot::SeriesMboxName(series.version);
  for (int64_t id : series.jobs) {
    absl::StatusOr<std::vector<BuildRecord>> builds = stores.builds->ListBuilds(id);
    if (!builds.ok()) return builds.status();
    for (const BuildRecord& build : *builds) {
      if (build.state != BuildState::kFailed) continue;
      std::optional<ApplyFailureRecord> f = build.apply_failure;
      if (!f) {  // a build stored before builds carried the failure: its error's words
        if (std::optional<kbuild::ApplyFailure> old = kbuild::ParseApplyFailure(build.error)) {
          f = ApplyFailureRecord{.patch = old->index,
                                 .subject = old->subject,
                                 .source = old->source,
                                 .file = old->file,
                                 .hunk = old->hunk,
                                 .reason = old->reason};
        }
      }
      if (f && f->source == mbox) return SeriesApplyFailure{*std::move(f), build.error};
    }
  }
  return std::nullopt;
}

std::string ApplyFailureBody(const RobotOptions& options, const SeriesRecord& series,
                             const ApplyFailureRecord* f, const robot::Series& mails) {
  std::string body =
      absl::StrCat("faultline could not test this series (v", series.version,
                   "): it does not apply to\n", options.tree, "\nat ", series.base, ".\n\n");
  if (!f) {
    absl::StrAppend(&body, series.reason, "\n");
  } else {
    absl::StrAppend(&body, "Patch ", f->patch, " of ", mails.total, " fails",
                    f->file.empty() ? "" : absl::StrCat(" in ", f->file),
                    f->hunk.empty() ? "" : absl::StrCat(", the hunk ", f->hunk), ":\n  ",
                    f->subject, "\n");
    if (!f->reason.empty()) absl::StrAppend(&body, "because ", f->reason, ".\n");
    auto patch = mails.patches.find(f->patch);
    const std::vector<std::string> hunk = patch == mails.patches.end()
                                              ? std::vector<std::string>{}
                                              : robot::HunkLines(patch->second, f->file, f->hunk);
    if (!hunk.empty()) {
      absl::StrAppend(&body, "\n");
      for (const std::string& line : hunk) {
        std::string quoted = absl::StrCat("> ", line);
        if (robot::MaxLineWidth(quoted) > 80) quoted = quoted.substr(0, 77) + "...";
        absl::StrAppend(&body, quoted, "\n");
      }
    }
  }
  absl::StrAppend(&body,
                  "\nNothing was measured. A version that applies there gets its A/B on every\n"
                  "arch the lab has.\n",
                  kRobotSignature);
  return body;
}

}  // namespace faultline::controller
