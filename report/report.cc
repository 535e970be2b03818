#include "report/report.h"

#include <algorithm>
#include <set>

#include "faultline/v1/values.h"
#include "report/comparison.h"
#include "report/html.h"
#include "report/mail.h"
#include "report/run_table.h"

namespace faultline::report {
namespace {

std::string ReportNumber(const v1::ReportRow& row, double value) {
  return row.n() == 0 ? "-" : FormatThroughput(value);
}

}  // namespace

Table ReportTable(const v1::GetReportResponse& report) {
  Table table;
  for (const std::string& key : report.matrix_keys()) {
    table.headers.push_back(key);
    table.right_align.push_back(true);
  }
  for (const char* h : {"kernel", "board"}) {
    table.headers.push_back(h);
    table.right_align.push_back(false);
  }
  for (const char* h : {"n", "median", "min", "max", "failed"}) {
    table.headers.push_back(h);
    table.right_align.push_back(true);
  }
  // Shown only when a run completed too few rounds for rounds/s to be compared.
  const bool any_coarse = std::any_of(report.rows().begin(), report.rows().end(),
                                      [](const v1::ReportRow& r) { return r.too_coarse() > 0; });
  if (any_coarse) {
    for (const char* h : {"too coarse", "median pages/s"}) {
      table.headers.push_back(h);
      table.right_align.push_back(true);
    }
  }
  for (const v1::ReportRow& row : report.rows()) {
    std::vector<std::string> cells;
    for (const std::string& key : report.matrix_keys()) {
      auto it = row.cell().find(key);
      cells.push_back(it == row.cell().end() ? "-" : it->second);
    }
    cells.push_back(row.kernel());
    cells.push_back(row.board().empty() ? "-" : row.board());
    cells.push_back(std::to_string(row.n()));
    cells.push_back(ReportNumber(row, row.median()));
    cells.push_back(ReportNumber(row, row.min()));
    cells.push_back(ReportNumber(row, row.max()));
    cells.push_back(std::to_string(row.failed()));
    if (any_coarse) {
      cells.push_back(std::to_string(row.too_coarse()));
      cells.push_back(row.n() == 0 ? "-" : FormatThroughput(row.median_pages_per_second()));
    }
    table.rows.push_back(std::move(cells));
  }
  return table;
}

std::string ReportTitle(const v1::GetReportResponse& report) {
  const v1::Job& job = report.job();
  std::string out = "job " + std::to_string(job.id()) + ": " + job.spec().benchmark();
  if (!job.spec().name().empty()) out += " \"" + job.spec().name() + "\"";
  out += " (" + JobStateName(job.state()) + ", " + std::to_string(FinishedRuns(job.runs())) + "/" +
         std::to_string(job.runs().total()) + " runs)";
  return out;
}

namespace {
// What each kernel the job brought is: "vanilla@3f9c2a1b04de (x86_64): 6.12.118-fl1b1c9623f3,
// base d2b4a84a36fb + 1 patch, config 5e1f0c2d9a3b, gcc (Debian 12.2.0-14) 12.2.0" and the
// patch subjects beneath.
std::string KernelsBlock(const v1::GetReportResponse& report, bool markdown) {
  if (report.builds().empty()) return "";
  std::string out = markdown ? "\nKernels:\n\n" : "\nkernels:\n";
  for (const v1::Build& b : report.builds()) {
    std::string line = b.label() + " (" + b.arch() + "): ";
    if (v1::BuildStateOf(b) != v1::BUILD_STATE_DONE) {
      line += v1::BuildStateText(b);
      if (!b.error().empty()) line += ": " + b.error().substr(0, b.error().find('\n'));
    } else if (!b.image_url().empty()) {
      line += b.release() + ", prebuilt " + b.image_url() + ", sha256 " +
              b.image_sha256().substr(0, 12);
    } else {
      line += b.release() + ", base " + b.base_commit().substr(0, 12);
      if (!b.ref().empty()) line += " (" + b.ref() + ")";
      line +=
          " + " + std::to_string(b.series_size()) + (b.series_size() == 1 ? " patch" : " patches");
      line += ", config " + b.config_base() + " " + b.config_sha256().substr(0, 12) + ", " +
              b.compiler();
    }
    out += (markdown ? "- " : "  ") + line + "\n";
    for (const std::string& subject : b.series()) {
      out += (markdown ? "  - " : "      ") + subject + "\n";
    }
    for (const v1::BadBoot& bad : b.bad_boots()) {
      out += (markdown ? "  - " : "      ") + std::string("did not boot on ") + bad.board() + ": " +
             bad.reason() + "\n";
    }
  }
  return out;
}

std::string Caveats(const v1::GetReportResponse& report) {
  std::string out;
  for (const std::string& c : report.caveats()) out += "\nCaveat: " + c + "\n";
  return out;
}

std::string CoarseNote(const v1::GetReportResponse& report) {
  uint32_t coarse = 0;
  for (const v1::ReportRow& r : report.rows()) coarse += r.too_coarse();
  if (coarse == 0) return "";
  return std::to_string(coarse) +
         " run(s) completed fewer than 5 rounds: their rounds/s is too coarse to compare, so "
         "their cells are compared in pages touched per second.\n";
}
}  // namespace

std::string RenderReport(const v1::GetReportResponse& report, ReportFormat format,
                         const ReportView& view) {
  const bool all_counters = view.all_counters;
  if (format == ReportFormat::kJson) return MessageToJson(report);
  const MailOptions mail{.utf8 = view.utf8};
  if (format == ReportFormat::kMail) return RenderMail(report, mail);
  if (format == ReportFormat::kMmtests) return RenderMmtests(report, mail);
  if (format == ReportFormat::kLkp) return RenderLkp(report, mail);
  if (format == ReportFormat::kHtml) return RenderHtml(report);
  if (format == ReportFormat::kCsv) {
    if (!view.columns.empty()) return RenderCsv(RunTable(report, view.columns));
    return RenderCsv(all_counters ? CounterCsvTable(report) : ReportCsvTable(report));
  }
  std::string runs;
  if (!view.columns.empty()) {
    const Table run_table = RunTable(report, view.columns);
    runs = format == ReportFormat::kMarkdown ? "\nPer run:\n\n" + RenderMarkdownTable(run_table)
                                             : "\nper run:\n" + RenderBoxTable(run_table);
  }
  const std::string title = ReportTitle(report);
  const Table table = ReportTable(report);
  if (format == ReportFormat::kMarkdown) {
    std::string out = "**" + EscapeMarkdown(title) + "**\n\n";
    if (table.rows.empty()) return out + "No results yet.\n";
    return out + "Throughput in rounds per second (higher is better).\n\n" +
           RenderMarkdownTable(table) + CoarseNote(report) + runs +
           RenderComparisons(report, format, all_counters) + KernelsBlock(report, true) +
           Caveats(report);
  }
  std::string out = title + "\n";
  if (table.rows.empty()) return out + "no results yet\n";
  return out + "throughput in rounds per second (higher is better):\n" + RenderBoxTable(table) +
         CoarseNote(report) + runs + RenderComparisons(report, format, all_counters) +
         KernelsBlock(report, false) + Caveats(report);
}

v1::GetReportRequest ReportRequest(int64_t job_id, ReportFormat format, const ReportView& view,
                                   bool runs) {
  v1::GetReportRequest request;
  request.set_job_id(job_id);
  for (const std::string& name : CountersOf(view.columns)) request.add_run_counters(name);
  request.set_runs(runs || format == ReportFormat::kMmtests || format == ReportFormat::kLkp ||
                   format == ReportFormat::kHtml);
  request.set_samples(runs || format == ReportFormat::kHtml);   // the page plots runs' seconds
  request.set_profiles(runs || format == ReportFormat::kHtml);  // and draws the flame graphs
  return request;
}

absl::StatusOr<std::string> RenderJobReport(int64_t job_id, ReportFormat format,
                                            const ReportView& view, bool runs,
                                            const ReportFetch& fetch) {
  v1::GetReportRequest request = ReportRequest(job_id, format, view, runs);
  absl::StatusOr<v1::GetReportResponse> response = fetch(request);
  if (!response.ok()) return response.status();
  if (format == ReportFormat::kLkp && request.run_counters().empty()) {
    std::set<std::string> changed;
    for (const auto& c : response->comparisons()) {
      for (const auto& k : c.counters()) {
        if (k.significant()) changed.insert(k.name());
      }
    }
    for (const auto& name : changed) {
      if (request.run_counters_size() < kMaxRunCounters) request.add_run_counters(name);
    }
    if (!changed.empty()) {
      response = fetch(request);
      if (!response.ok()) return response.status();
    }
  }
  return RenderReport(*response, format, view);
}

}  // namespace faultline::report
