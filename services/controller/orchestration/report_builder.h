#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/controller/core/report.h"
#include "services/controller/storage/interfaces.h"

namespace faultline::controller {

// A job's report: per cell/kernel/board summaries, A/B comparisons with verdicts, and the
// environment that differs between kernels. Shared by GetReport (api/convert.h's
// ReportToProto at the edge) and /metrics (orchestration/summaries.h).
struct ReportOptions {
  // Compare every counter under each comparison (CompareCounters); off: throughput only.
  bool compare_counters = true;
  // Counters to return per succeeded run (JobReport::run_results), for seed-shaped tables;
  // empty: no per-run rows.
  std::vector<std::string> run_counters;
  // Every succeeded run in run_results (with run_counters), in the order they finished.
  bool runs = false;
  // With runs: each run's rounds per second (JobStore::RunSamples).
  bool samples = false;
  // Each comparison's call stacks per side (core/profiles.h) where the runs were profiled.
  bool profiles = false;
};

struct BuiltReport {
  JobRecord job;
  JobReport report;
};
absl::StatusOr<BuiltReport> BuildReport(JobStore* store, int64_t job_id,
                                        const ReportOptions& options = {});

// The kernels a stored spec names, in its order (spec_json is the JobSpec's proto JSON).
std::vector<std::string> SpecKernels(const std::string& spec_json);

}  // namespace faultline::controller
