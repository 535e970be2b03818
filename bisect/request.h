#pragma once
// A bisection's request from what a user (faultline bisect) or the controller (the robot's
// nightly side) knows: a tree and two refs, a job that compared two refs, or a change point
// of a schedule that follows a branch. The commits are listed from the tree with git where
// this runs (the builders find the tree at the same path).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"

namespace faultline::bisect {

struct BisectArgs {
  std::string tree, good, bad;
  std::string spec_path;
  std::string metric = "throughput";
  std::vector<std::string> cells;  // KNOB=VALUE
  std::string board, arch;
  std::string config_base;
  std::vector<std::string> fragments;          // files
  std::vector<v1::SourceFile> fragment_texts;  // or the fragments themselves (the robot's)
  uint32_t block = 0;
  uint32_t max_pairs = 0;
  double error = 0;
  bool no_confirm = false;
  bool no_revert = false;
  int64_t from_job = 0;
  int64_t from_change = 0;
  std::string command;  // the command line as typed (to reproduce)
};

// good, the commits after it in first-parent order, up to bad. Errors: a ref that is not a
// commit of the tree, good not an ancestor of bad, good and bad the same, too many commits.
absl::StatusOr<std::vector<v1::BisectCommit>> ResolveCommits(const std::string& tree,
                                                             const std::string& good,
                                                             const std::string& bad);

// The request from the arguments and the study (its kernels' tree and config are the
// defaults for --tree and --config).
absl::StatusOr<v1::BisectRequest> MakeBisectRequest(const BisectArgs& args, v1::JobSpec spec);

// --from JOB: the job's spec; its baseline's ref is good, its other kernel's ref bad (one
// tree, no series). Fills tree, good, bad and config where the arguments do not say.
absl::Status FromJob(const v1::Job& job, BisectArgs& args, v1::JobSpec& spec);

// --from-change ID: a change point of a series whose kernel a schedule builds from a branch.
// good and bad are the commits that kernel was built at in the last job before the change
// (`before`) and the first job after it (`after`), for the change point's arch; the board
// and cell default to the change point's, the spec is the first job's. Refused, naming why:
// no job before it recorded, a kernel not built from a tree or with a series, no finished
// build, or both jobs at the same commit (the change is not the kernel's).
absl::Status FromChange(const v1::ChangePoint& cp, const v1::Job& before,
                        const std::vector<v1::Build>& before_builds, const v1::Job& after,
                        const std::vector<v1::Build>& after_builds, BisectArgs& args,
                        v1::JobSpec& spec);

}  // namespace faultline::bisect
