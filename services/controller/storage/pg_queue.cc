#include "services/controller/storage/pg_queue.h"

#include "nlohmann/json.hpp"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller::pg {

std::vector<std::string> JsonStrings(const std::string& text) {
  std::vector<std::string> out;
  if (text == "[]") return out;  // most runs and boards: no parse
  for (const auto& v : nlohmann::json::parse(text)) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<QueuedRow> ReadRunnableRuns(pqxx::transaction_base& t, const std::string& statement,
                                        const QueueKey& after, int limit) {
  static const std::string kRunnable = R"sql(
      SELECT )sql" + std::string(kQueuedRunColumns) +
                                       R"sql(, r.sequence
        FROM runs r JOIN jobs j ON j.id = r.job_id
       WHERE r.state = 'queued' AND (r.not_before IS NULL OR r.not_before <= now())
         -- a job's runs wait until every kernel it brings is built
         AND NOT EXISTS (SELECT 1 FROM job_builds jb JOIN builds bu ON bu.id = jb.build_id
                          WHERE jb.job_id = r.job_id AND bu.state IN ('queued', 'building'))
         AND (r.job_id, r.sequence, r.id) > ($2::bigint, $3::bigint, $4::bigint)
       ORDER BY r.job_id, r.sequence, r.id
       LIMIT $1)sql";
  std::vector<QueuedRow> rows;
  const pqxx::result result = ExecPrepared(t, statement, kRunnable, limit, std::get<0>(after),
                                           std::get<1>(after), std::get<2>(after));
  rows.reserve(result.size());
  for (const auto& r : result) {
    QueuedRow row;
    row.run = QueuedRunFromRow(r);
    row.key = {row.run.job_id, r[6].as<int64_t>(), row.run.id};
    rows.push_back(std::move(row));
  }
  return rows;
}

QueuedRun QueuedRunFromRow(const pqxx::row& r) {
  return QueuedRun{.id = r[0].as<int64_t>(),
                   .job_id = r[1].as<int64_t>(),
                   .kernel = r[2].as<std::string>(),
                   .arches = JsonStrings(r[3].as<std::string>()),
                   .boards = JsonStrings(r[4].as<std::string>()),
                   .memory_max = r[5].as<uint64_t>()};
}

FreeBoard FreeBoardFromRow(const pqxx::row& r) {
  return FreeBoard{.name = r[0].as<std::string>(),
                   .arch = r[1].as<std::string>(),
                   .memory_bytes = r[2].as<uint64_t>(),
                   .running_kernels = JsonStrings(r[3].as<std::string>()),
                   .bootable_kernels = JsonStrings(r[4].as<std::string>())};
}

}  // namespace faultline::controller::pg
