#pragma once
// faultline bisect: from a regression to the first bad commit (docs/bisect.md).
//
//   faultline bisect --tree T --good REF --bad REF --spec STUDY.yaml
//                    [--metric throughput|counter:NAME] [--cell KNOB=VALUE]...
//                    [--board B | --arch A] [--config BASE] [--fragment FILE]...
//                    [--block N] [--max-pairs N] [--error P] [--no-confirm] [--no-revert]
//                    [--watch]
//   faultline bisect --from JOB [--cell ...] ...   (a job that compared two refs of a tree)
//   faultline bisect --from-change ID [...]   (a change point of a schedule on a branch)
//   faultline bisect status|log|watch|cancel ID
//   faultline bisect list
//
// The CLI lists the commits from the tree (git, where the CLI runs; the builders find the
// tree at the same path) and sends them; the controller does the rest.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "faultline/v1/job.pb.h"
#include "services/cli/cli.h"

namespace faultline::cli {

struct BisectArgs {
  std::string tree, good, bad;
  std::string spec_path;
  std::string metric = "throughput";
  std::vector<std::string> cells;  // KNOB=VALUE
  std::string board, arch;
  std::string config_base;
  std::vector<std::string> fragments;  // files
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

int BisectStartCommand(JobStub& client, const CliEnv& env, BisectArgs args, bool watch);
int BisectShowCommand(JobStub& client, const CliEnv& env, int64_t id, bool steps);
int BisectWatchCommand(JobStub& client, const CliEnv& env, int64_t id);
int BisectCancelCommand(JobStub& client, const CliEnv& env, int64_t id);
int BisectListCommand(JobStub& client, const CliEnv& env);

}  // namespace faultline::cli
