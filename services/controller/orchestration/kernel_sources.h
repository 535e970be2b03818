#pragma once
// Kernels a job brings (JobSpec.kernel_sources): checked, resolved and named on submit,
// and turned into the builds the job waits for.
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "faultline/v1/limits.h"
#include "services/controller/core/domain.h"

namespace faultline::controller {

// Bounds on what a job may upload with its kernels (faultline/v1/limits.h: the CLI checks
// the same; tests lower them).
struct KernelSourceLimits {
  size_t max_file_bytes = v1::kMaxKernelFileBytes;
  size_t max_total_bytes = v1::kMaxJobKernelFileBytes;
  size_t max_files_per_label = v1::kMaxKernelFilesPerLabel;
};

// Checks every source (the field and the limit in each error), resolves `from` (the other
// label's tree, ref, config and fragments; this label's series and include), names each
// such label "LABEL@<12 hex of sha256 over the resolved source>" and rewrites the spec to
// those names (kernels, baseline, kernel_overrides). Returns the resolved sources by their
// new names; `spec.kernel_sources` is keyed by the new names too, its files' contents kept.
//
// `slot` (a schedule's firing, SlotTag) marks the kernels that follow a branch: a source
// whose ref is not a full commit id is named "LABEL@<hash>+<slot>", so each slot builds the
// branch as it is then (a build is per label; the builders' key cache makes a branch that
// did not move a cache hit), and a job keeps the commit it ran. Its series is the name
// without "+<slot>" (SeriesKernel). Without a slot, equal sources share one label and so
// one build: a branch is built once, when the first job asks.
absl::StatusOr<std::map<std::string, v1::KernelSource>> ResolveKernelSources(
    v1::JobSpec& spec, const KernelSourceLimits& limits = {}, const std::string& slot = "");

// A schedule's slot as it appears in labels: its UTC minute, "20261203T0200".
std::string SlotTag(int64_t slot_ms);

// A ref that names one commit whatever happens to the tree: 40 (sha1) or 64 (sha256)
// lowercase hex digits.
bool IsCommitId(const std::string& ref);

// The builds of a job: one per (label, arch) for every arch among the eligible boards
// (the spec's arches and boards filters) that boot built kernels. An arch no registered
// builder builds for is INVALID_ARGUMENT naming the label and the arch; so is a job whose
// eligible boards boot no built kernel.
absl::StatusOr<std::vector<BuildRequest>> PlanBuilds(
    const std::map<std::string, v1::KernelSource>& sources, const v1::JobSpec& spec,
    const std::vector<BoardSummary>& boards);

// The spec as stored with the job: uploaded file contents dropped (the builds keep them).
v1::JobSpec WithoutFileContents(v1::JobSpec spec);

}  // namespace faultline::controller
