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
// tree at the same path: bisect/request.h) and sends them; the controller does the rest.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bisect/request.h"
#include "faultline/v1/job.pb.h"
#include "services/cli/cli.h"

namespace faultline::cli {

// The request's side lives in bisect/request.h (the controller's robot makes them too).
using bisect::BisectArgs;
using bisect::FromChange;
using bisect::FromJob;
using bisect::MakeBisectRequest;
using bisect::ResolveCommits;

int BisectStartCommand(JobStub& client, const CliEnv& env, BisectArgs args, bool watch);
int BisectShowCommand(JobStub& client, const CliEnv& env, int64_t id, bool steps);
int BisectWatchCommand(JobStub& client, const CliEnv& env, int64_t id);
int BisectCancelCommand(JobStub& client, const CliEnv& env, int64_t id);
int BisectListCommand(JobStub& client, const CliEnv& env);

}  // namespace faultline::cli
