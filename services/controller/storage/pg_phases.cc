// Where a job's time went (core/phases.h): its timeline read from builds, kernel switches
// and runs; a finished job's phases recorded once.
#include <optional>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/storage/pg_pool.h"
#include "services/controller/storage/pg_store.h"

namespace faultline::controller {
namespace {

// The job's timeline (times in ms since the epoch, 0 when NULL); nullopt when there is no
// such job.
std::optional<JobTimeline> ReadTimeline(pqxx::transaction_base& t, int64_t job_id) {
  auto job = t.exec_params(R"sql(
    SELECT (extract(epoch FROM created_at) * 1000)::bigint,
           coalesce((extract(epoch FROM finished_at) * 1000)::bigint, 0)
      FROM jobs WHERE id = $1)sql",
                           job_id);
  if (job.empty()) return std::nullopt;
  JobTimeline out;
  out.job_id = job_id;
  out.created_ms = job[0][0].as<int64_t>();
  out.finished_ms = job[0][1].as<int64_t>();
  for (const auto& r : t.exec_params(R"sql(
    SELECT b.arch, coalesce((extract(epoch FROM b.started_at) * 1000)::bigint, 0),
           coalesce((extract(epoch FROM b.finished_at) * 1000)::bigint, 0)
      FROM job_builds jb JOIN builds b ON b.id = jb.build_id WHERE jb.job_id = $1)sql",
                                     job_id)) {
    out.builds.push_back({r[0].as<std::string>(), r[1].as<int64_t>(), r[2].as<int64_t>()});
  }
  for (const auto& r : t.exec_params(R"sql(
    SELECT arch, board, (extract(epoch FROM ordered_at) * 1000)::bigint,
           coalesce((extract(epoch FROM ended_at) * 1000)::bigint, 0)
      FROM kernel_switches WHERE job_id = $1 ORDER BY id)sql",
                                     job_id)) {
    out.switches.push_back(
        {r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<int64_t>(), r[3].as<int64_t>()});
  }
  for (const auto& r : t.exec_params(R"sql(
    SELECT coalesce(bo.arch, ''), coalesce(r.board, ''),
           coalesce((extract(epoch FROM r.assigned_at) * 1000)::bigint, 0),
           coalesce((extract(epoch FROM r.finished_at) * 1000)::bigint, 0)
      FROM runs r LEFT JOIN boards bo ON bo.name = r.board WHERE r.job_id = $1)sql",
                                     job_id)) {
    out.runs.push_back(
        {r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<int64_t>(), r[3].as<int64_t>()});
  }
  return out;
}

}  // namespace

absl::StatusOr<JobTimeline> PgJobStore::Timeline(int64_t job_id) {
  return pool_->Query<JobTimeline>([&](pqxx::connection& c, JobTimeline& out) -> absl::Status {
    pqxx::read_transaction t(c);
    std::optional<JobTimeline> timeline = ReadTimeline(t, job_id);
    if (!timeline) return absl::NotFoundError(absl::StrCat("no job ", job_id));
    out = std::move(*timeline);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<JobTimeline>> PgHistoryStore::PendingPhases(int limit) {
  return pool_->Query<std::vector<JobTimeline>>(
      [&](pqxx::connection& c, std::vector<JobTimeline>& out) -> absl::Status {
        pqxx::read_transaction t(c);
        for (const auto& r : t.exec_params(R"sql(
      SELECT id FROM jobs WHERE phases IS NULL AND finished_at IS NOT NULL
       ORDER BY id LIMIT $1)sql",
                                           limit)) {
          if (auto timeline = ReadTimeline(t, r[0].as<int64_t>())) {
            out.push_back(std::move(*timeline));
          }
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgHistoryStore::StorePhases(int64_t job_id,
                                                 const std::vector<ArchPhases>& phases) {
  nlohmann::json doc = nlohmann::json::object();
  for (const ArchPhases& a : phases) {
    nlohmann::json arch = nlohmann::json::object();
    for (int p = 0; p < kPhaseCount; ++p) arch[PhaseName(static_cast<Phase>(p))] = a.seconds[p];
    arch["total"] = a.total_seconds;
    doc[a.arch] = std::move(arch);
  }
  return pool_->Query<bool>([&](pqxx::connection& c, bool& stored) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params(
        "UPDATE jobs SET phases = $2::jsonb WHERE id = $1 AND phases IS NULL AND finished_at IS "
        "NOT NULL",
        job_id, doc.dump());
    w.commit();
    stored = r.affected_rows() == 1;
    return absl::OkStatus();
  });
}

}  // namespace faultline::controller
