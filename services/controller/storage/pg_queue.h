#pragma once
// The queue as the dispatcher reads it. "Runnable" (queued, due, every kernel its job brings
// built) is written here once, in SQL; which board may serve a run is core/matching.h's
// MayServe, in C++, and every caller applies that one.
#include <cstdint>
#include <pqxx/pqxx>
#include <string>
#include <tuple>
#include <vector>

#include "services/controller/core/matching.h"

namespace faultline::controller::pg {

// A run's place in the queue: (job, planned sequence, id).
using QueueKey = std::tuple<int64_t, int64_t, int64_t>;
inline constexpr QueueKey kQueueStart{-1, -1, -1};

struct QueuedRow {
  QueuedRun run;
  QueueKey key;
};

// The columns QueuedRunFromRow reads, of `runs r JOIN jobs j ON j.id = r.job_id`.
inline constexpr char kQueuedRunColumns[] =
    "r.id, r.job_id, r.kernel, r.arches::text, r.boards::text, j.memory_max";
QueuedRun QueuedRunFromRow(const pqxx::row& r);

// Up to `limit` runnable runs after `after`, in queue order (prepared as `statement`).
std::vector<QueuedRow> ReadRunnableRuns(pqxx::transaction_base& t, const std::string& statement,
                                        const QueueKey& after, int limit);

// The columns FreeBoardFromRow reads, of `boards b`.
inline constexpr char kFreeBoardColumns[] =
    "b.name, b.arch, b.memory_bytes, b.running_kernel_labels::text, "
    "b.bootable_kernel_labels::text";
FreeBoard FreeBoardFromRow(const pqxx::row& r);

// SQL: board `b` is healthy and has no run assigned or running.
inline constexpr char kBoardIsFree[] =
    "b.health = 'ok' AND NOT EXISTS (SELECT 1 FROM runs busy WHERE busy.board = b.name "
    "AND busy.state IN ('assigned', 'running'))";

// ["a", "b"] -> its strings (other values skipped).
std::vector<std::string> JsonStrings(const std::string& text);

}  // namespace faultline::controller::pg
