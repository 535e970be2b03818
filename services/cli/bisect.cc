#include "services/cli/bisect.h"

#include <grpcpp/client_context.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "faultline/v1/values.h"
#include "report/bisect.h"
#include "report/table.h"
#include "spec/spec_file.h"

namespace faultline::cli {
namespace {

absl::Status Usage(const std::string& what) {
  return absl::InvalidArgumentError(what);
}

int Refuse(const CliEnv& env, const absl::Status& s) {
  *env.err << "faultline: " << OneLine(std::string(s.message()), "; ") << "\n";
  return kExitUsage;
}

}  // namespace

int BisectStartCommand(JobStub& client, const CliEnv& env, BisectArgs args, bool watch) {
  v1::JobSpec spec;
  auto get_job = [&](int64_t id, v1::Job* job, std::vector<v1::Build>* builds) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::GetJobResponse response;
    if (int rc = Unary(client, env, &JobStub::GetJob, get, &response); rc != kExitOk) return rc;
    *job = response.job();
    if (builds == nullptr) return kExitOk;
    v1::ListBuildsRequest list;
    list.set_job_id(id);
    v1::ListBuildsResponse listed;
    if (int rc = Unary(client, env, &JobStub::ListBuilds, list, &listed); rc != kExitOk) return rc;
    builds->assign(listed.builds().begin(), listed.builds().end());
    return kExitOk;
  };
  if (args.from_job != 0 && args.from_change != 0) {
    return Refuse(env, Usage("bisect: --from and --from-change exclude each other"));
  }
  if (args.from_job != 0) {
    v1::Job job;
    if (int rc = get_job(args.from_job, &job, nullptr); rc != kExitOk) return rc;
    if (absl::Status s = FromJob(job, args, spec); !s.ok()) return Refuse(env, s);
  } else if (args.from_change != 0) {
    v1::ListChangePointsRequest list;
    list.set_include_closed(true);
    v1::ListChangePointsResponse listed;
    if (int rc = Unary(client, env, &JobStub::ListChangePoints, list, &listed); rc != kExitOk) {
      return rc;
    }
    const v1::ChangePoint* cp = nullptr;
    for (const auto& c : listed.change_points()) {
      if (c.id() == args.from_change) cp = &c;
    }
    if (cp == nullptr) {
      return Refuse(env, Usage(absl::StrCat("--from-change: no change point ", args.from_change,
                                            " (faultline changes --all lists them)")));
    }
    // One bisection per change point: the robot's nightly side may have started it already.
    v1::ListBisectionsRequest recent;
    recent.set_limit(1000);
    v1::ListBisectionsResponse bisections;
    if (int rc = Unary(client, env, &JobStub::ListBisections, recent, &bisections); rc != kExitOk) {
      return rc;
    }
    for (const v1::Bisection& b : bisections.bisections()) {
      const v1::BisectionState state = v1::BisectionStateOf(b);
      if (v1::ChangePointOf(b.request()) == cp->id() && state != v1::BISECTION_STATE_CANCELLED &&
          state != v1::BISECTION_STATE_FAILED) {
        return Refuse(env, Usage(absl::StrCat("--from-change: change point ", cp->id(),
                                              " is bisected by bisection ", b.id(), " (",
                                              std::string(v1::BisectionStateName(state)),
                                              "): faultline bisect status ", b.id())));
      }
    }
    v1::Job before, after;
    std::vector<v1::Build> before_builds, after_builds;
    if (cp->previous_job_id() != 0) {
      if (int rc = get_job(cp->previous_job_id(), &before, &before_builds); rc != kExitOk) {
        return rc;
      }
    }
    if (int rc = get_job(cp->job_id(), &after, &after_builds); rc != kExitOk) return rc;
    if (absl::Status s = FromChange(*cp, before, before_builds, after, after_builds, args, spec);
        !s.ok()) {
      return Refuse(env, s);
    }
  } else {
    if (args.spec_path.empty() || args.good.empty() || args.bad.empty()) {
      *env.err << "faultline: bisect: --good, --bad and --spec are needed (or --from JOB, "
                  "--from-change ID)\n";
      return kExitUsage;
    }
    absl::StatusOr<v1::JobSpec> loaded = spec::LoadJobSpecFile(args.spec_path);
    if (!loaded.ok()) {
      *env.err << "faultline: " << OneLine(std::string(loaded.status().message()), "; ") << "\n";
      return kExitUsage;
    }
    spec = *std::move(loaded);
  }
  absl::StatusOr<v1::BisectRequest> request = MakeBisectRequest(args, std::move(spec));
  if (!request.ok()) {
    *env.err << "faultline: " << OneLine(std::string(request.status().message()), "; ") << "\n";
    return kExitUsage;
  }
  v1::StartBisectionRequest start;
  *start.mutable_request() = *std::move(request);
  start.set_request_id(
      absl::StrCat("cli-bisect-", std::chrono::steady_clock::now().time_since_epoch().count()));
  v1::Bisection response;
  if (int rc = Unary(client, env, &JobStub::StartBisection, start, &response); rc != kExitOk) {
    return rc;
  }
  *env.out << response.id() << "\n" << std::flush;
  *env.err << "bisection " << response.id() << " started: " << response.request().commits_size() - 1
           << " commits on board " << response.request().board() << "\n"
           << std::flush;
  if (!watch) return kExitOk;
  return BisectWatchCommand(client, env, response.id());
}

namespace {

int GetBisection(JobStub& client, const CliEnv& env, int64_t id, v1::Bisection* out) {
  v1::GetBisectionRequest get;
  get.set_id(id);
  return Unary(client, env, &JobStub::GetBisection, get, out);
}

int ExitOf(const v1::Bisection& b) {
  return v1::BisectionStateOf(b) == v1::BISECTION_STATE_DONE && b.culprit() >= 0 ? kExitOk
                                                                                 : kExitFailure;
}

}  // namespace

int BisectShowCommand(JobStub& client, const CliEnv& env, int64_t id, bool steps) {
  v1::Bisection b;
  if (int rc = GetBisection(client, env, id, &b); rc != kExitOk) return rc;
  *env.out << report::RenderBisection(b, steps) << std::flush;
  if (v1::BisectionStateOf(b) == v1::BISECTION_STATE_RUNNING)
    *env.err << report::FormatBisectProgress(b) << "\n";
  return kExitOk;
}

int BisectWatchCommand(JobStub& client, const CliEnv& env, int64_t id) {
  std::string last;
  for (int lost = 0;;) {
    v1::Bisection b;
    if (GetBisection(client, env, id, &b) != kExitOk) {
      if (++lost > 30) return kExitFailure;
    } else {
      lost = 0;
      const std::string line = report::FormatBisectProgress(b);
      if (line != last) *env.err << line << "\n" << std::flush;
      last = line;
      if (v1::BisectionStateOf(b) != v1::BISECTION_STATE_RUNNING) {
        *env.out << report::RenderBisection(b, true) << std::flush;
        return ExitOf(b);
      }
    }
    // A poll, not a wait for something to happen: the duties advance it once a second.
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

int BisectCancelCommand(JobStub& client, const CliEnv& env, int64_t id) {
  v1::CancelBisectionRequest req;
  req.set_id(id);
  v1::Bisection b;
  if (int rc = Unary(client, env, &JobStub::CancelBisection, req, &b); rc != kExitOk) return rc;
  *env.out << "bisection " << id << " " << b.state() << "\n" << std::flush;
  return kExitOk;
}

int BisectListCommand(JobStub& client, const CliEnv& env) {
  v1::ListBisectionsRequest req;
  v1::ListBisectionsResponse resp;
  if (int rc = Unary(client, env, &JobStub::ListBisections, req, &resp); rc != kExitOk) return rc;
  report::Table t;
  t.headers = {"id", "state", "phase", "commits", "board", "metric", "culprit"};
  for (const auto& b : resp.bisections()) {
    t.rows.push_back({std::to_string(b.id()), b.state(), b.phase(),
                      std::to_string(b.request().commits_size() - 1), b.request().board(),
                      report::BisectMetricName(b.request()),
                      b.culprit() >= 0 ? report::BisectCommitName(b, b.culprit()) : "-"});
  }
  *env.out << report::RenderPlainTable(t) << std::flush;
  return kExitOk;
}

}  // namespace faultline::cli
