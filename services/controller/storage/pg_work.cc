#include "services/controller/storage/pg_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/core/matching.h"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

using pg::OptionalU64;
using pg::StringMap;

// Adaptive repetitions: when the last open run of a job with max_repetitions succeeded,
// the cells core finds still too wide (CellsNeedingMorePairs) get the next block of
// repetitions for every kernel (PlanExtraBlock); each new run copies repetition 1's row.
void ExtendAdaptiveJob(pqxx::work& w, int64_t job_id) {
  auto job = w.exec_params(R"sql(
    SELECT max_repetitions, target_ci_half_width, baseline, block_size, alpha, min_effect,
           shuffle_seed
      FROM jobs WHERE id = $1 AND max_repetitions > 0 AND state <> 'cancelled')sql",
                           job_id);
  if (job.empty()) return;
  const int max_repetitions = job[0][0].as<int>();
  const double target = job[0][1].as<double>();
  const std::string baseline = job[0][2].as<std::string>();
  const int block_size = std::max(1, job[0][3].as<int>());
  stats::CompareOptions options;
  options.alpha = job[0][4].as<double>();
  options.min_effect = job[0][5].as<double>();
  const uint64_t seed = static_cast<uint64_t>(job[0][6].as<int64_t>());
  auto counts = w.exec_params(R"sql(
    SELECT count(*) FILTER (WHERE state IN ('queued', 'assigned', 'running')),
           count(*) FILTER (WHERE state IN ('failed', 'cancelled')),
           max(repetition), max(sequence)
      FROM runs WHERE job_id = $1)sql",
                              job_id);
  if (counts[0][0].as<int64_t>() > 0 || counts[0][1].as<int64_t>() > 0) return;
  const int done_repetitions = counts[0][2].as<int>();
  const int sequence = counts[0][3].as<int>() + 1;
  // Kernels in their planned order (the baseline's block first).
  std::vector<std::string> kernels;
  for (const auto& r : w.exec_params(
           "SELECT kernel FROM runs WHERE job_id = $1 GROUP BY kernel ORDER BY min(sequence)",
           job_id)) {
    kernels.push_back(r[0].as<std::string>());
  }
  std::map<int, std::map<std::string, std::vector<double>>> samples;
  for (const auto& r : w.exec_params(R"sql(
         SELECT r.cell_index, r.kernel,
                CASE WHEN bool_or(res.too_coarse) OVER (PARTITION BY r.cell_index)
                     THEN res.pages_per_second ELSE res.throughput END
           FROM runs r JOIN results res ON res.run_id = r.id
          WHERE r.job_id = $1 AND r.state = 'succeeded')sql",
                                     job_id)) {
    samples[r[0].as<int>()][r[1].as<std::string>()].push_back(r[2].as<double>());
  }
  const std::vector<int> cells =
      CellsNeedingMorePairs(samples, baseline, options, target, max_repetitions);
  for (const RunSlot& run : PlanExtraBlock(cells, kernels, done_repetitions, block_size,
                                           max_repetitions, seed, sequence)) {
    w.exec_params(R"sql(
      INSERT INTO runs (job_id, cell_index, cell, params, kernel, repetition, arches, boards,
                        sequence)
      SELECT job_id, cell_index, cell, params, kernel, $4, arches, boards, $5
        FROM runs WHERE job_id = $1 AND cell_index = $2 AND kernel = $3 AND repetition = 1)sql",
                  job_id, run.cell_index, run.kernel, run.repetition, run.sequence);
  }
}

std::vector<std::string> JsonStrings(const std::string& text) {
  std::vector<std::string> out;
  if (text == "[]") return out;  // most runs and boards: no parse
  for (const auto& v : nlohmann::json::parse(text)) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// What a claim returns (RETURNING of an UPDATE runs r ... FROM jobs j; the lease grace in
// parameter $2), read by AssignmentFromRow; the board is column 12.
const std::string& AssignmentColumns() {
  static const std::string columns = R"sql(
  r.id, r.attempt_id::text, r.job_id, j.benchmark, r.kernel, j.duration_seconds, r.params::text,
  j.memory_max, j.memory_high, j.swap_max, ceil()sql" +
                                     pg::LeaseSecondsSql(2) + R"sql()::int,
  j.events::text, r.board, j.warmup_ms, j.mmap_lock_waits)sql";
  return columns;
}

Assignment AssignmentFromRow(const pqxx::row& r) {
  Assignment a;
  a.run_id = r[0].as<int64_t>();
  a.attempt_id = r[1].as<std::string>();
  a.job_id = r[2].as<int64_t>();
  a.benchmark = r[3].as<std::string>();
  a.kernel = r[4].as<std::string>();
  a.duration_seconds = r[5].as<uint32_t>();
  a.params = StringMap(r[6].as<std::string>());
  a.memcg.memory_max = r[7].as<uint64_t>();
  a.memcg.memory_high = OptionalU64(r[8]);
  a.memcg.swap_max = OptionalU64(r[9]);
  a.lease_seconds = r[10].as<uint32_t>();
  a.events = JsonStrings(r[11].as<std::string>());
  a.warmup_ms = r[13].as<uint64_t>();
  a.mmap_lock_waits = r[14].as<bool>();
  return a;
}

// The board is told to switch: health 'switching' until its hello from the new kernel.
void OrderKernelSwitch(pqxx::work& w, const std::string& board, KernelSwitchOrder& order) {
  // A kernel a job brought: the order carries its image (the agent fetches it).
  auto built = w.exec_params(R"sql(
    SELECT bu.id, bu.image_sha256, (bu.outcome->>'image_bytes')::bigint, bu.outcome->>'release',
           coalesce(a.location, 'db')
      FROM builds bu JOIN boards b ON b.arch = bu.arch
      LEFT JOIN artifacts a ON a.sha256 = bu.image_sha256
     WHERE b.name = $1 AND bu.label = $2 AND bu.state = 'done')sql",
                             board, order.label);
  if (!built.empty()) {
    order.built = KernelSwitchOrder::Built{.build_id = built[0][0].as<int64_t>(),
                                           .image_sha256 = built[0][1].as<std::string>(),
                                           .image_bytes = built[0][2].as<uint64_t>(),
                                           .release = built[0][3].as<std::string>(),
                                           .location = built[0][4].as<std::string>()};
  }
  w.exec_params(R"sql(
    UPDATE boards SET health = 'switching', health_reason = $2, switch_label = $3,
                      switch_from_boot_id = boot_id,
                      switch_deadline = now() + make_interval(secs => $4),
                      kernel_switches = kernel_switches + 1, last_seen = now()
     WHERE name = $1)sql",
                board, "switching: " + order.reason, order.label,
                static_cast<int>(order.deadline_seconds));
}

// How much of the queue one DecideWorkForBoards pass reads: enough for every waiting board
// several times over. Boards that find nothing in a full window look down the whole queue
// on their own (NextWorkFromWholeQueue: runs pinned to them far down a long queue).
int QueueWindow(size_t boards) {
  return static_cast<int>(std::clamp<size_t>(8 * boards, 1024, 20000));
}

}  // namespace

absl::StatusOr<WorkOrder> PgWorkStore::NextWorkFromWholeQueue(const std::string& board) {
  return pool_->Query<WorkOrder>([&](pqxx::connection& c, WorkOrder& out) -> absl::Status {
    pqxx::work w(c);
    // Locking the board row serialises two polls of one board: a switch is ordered once.
    auto healthy =
        w.exec_params("SELECT 1 FROM boards WHERE name = $1 AND health = 'ok' FOR UPDATE", board);
    if (healthy.empty()) return absl::OkStatus();
    // The head of this board's queue, over every kernel it runs or can boot.
    auto head = w.exec_params(R"sql(
      WITH b AS (
        SELECT name, arch, memory_bytes, running_kernel_labels, bootable_kernel_labels
          FROM boards WHERE name = $1)
      SELECT r.id, r.kernel, r.job_id, b.running_kernel_labels ? r.kernel
        FROM runs r JOIN jobs j ON j.id = r.job_id CROSS JOIN b
       WHERE r.state = 'queued'
         AND (r.not_before IS NULL OR r.not_before <= now())
         -- a job's runs wait until every kernel it brings is built
         AND NOT EXISTS (SELECT 1 FROM job_builds jb JOIN builds bu ON bu.id = jb.build_id
                          WHERE jb.job_id = r.job_id AND bu.state IN ('queued', 'building'))
         AND (b.running_kernel_labels ? r.kernel OR b.bootable_kernel_labels ? r.kernel)
         AND (r.arches = '[]'::jsonb OR r.arches ? b.arch)
         AND (r.boards = '[]'::jsonb OR r.boards ? b.name)
         AND j.memory_max <= b.memory_bytes
         AND NOT EXISTS (SELECT 1 FROM runs busy
                          WHERE busy.board = b.name AND busy.state IN ('assigned', 'running'))
       ORDER BY r.job_id, r.sequence, r.id
       LIMIT 1
       FOR UPDATE OF r SKIP LOCKED)sql",
                              board);
    if (head.empty()) return absl::OkStatus();
    const int64_t run_id = head[0][0].as<int64_t>();
    const std::string kernel = head[0][1].as<std::string>();
    const int64_t job_id = head[0][2].as<int64_t>();
    if (!head[0][3].as<bool>()) {
      KernelSwitchOrder order;
      order.label = kernel;
      order.reason = absl::StrCat("run ", run_id, " of job ", job_id, " needs kernel ", kernel);
      order.deadline_seconds = static_cast<uint32_t>(options_.kernel_switch_deadline_seconds);
      OrderKernelSwitch(w, board, order);
      w.commit();
      out.kernel_switch = std::move(order);
      return absl::OkStatus();
    }
    auto rows = w.exec_params(R"sql(
      UPDATE runs r SET
        state = 'assigned', board = $1, attempt = r.attempt + 1, attempt_id = gen_random_uuid(),
        assigned_at = now(), failure_reason = NULL,
        lease_expires_at = )sql" + pg::LeaseExpirySql(2) +
                                  R"sql(
      FROM jobs j
      WHERE r.id = $3 AND j.id = r.job_id
      RETURNING )sql" + AssignmentColumns(),
                              board, options_.lease_grace_seconds, run_id);
    if (rows.empty()) return absl::OkStatus();
    Assignment a = AssignmentFromRow(rows[0]);
    pg::MarkJobsRunning(w, {a.job_id});
    w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    w.commit();
    out.run = std::move(a);
    return absl::OkStatus();
  });
}

namespace {

// What one read of the queue decided, before anything is locked or claimed.
struct WorkPlan {
  std::vector<QueuedRun> runs;
  std::vector<FreeBoard> free;
  std::vector<BoardStep> steps;
  std::vector<std::string> unmatched;  // free boards the plan gives nothing
  bool window_full = false;
};

// The queue's head and the asking boards that are healthy and idle (in the order they asked),
// matched by core/matching.h. Nothing is locked: each claim re-checks its run and board.
absl::Status ReadWorkPlan(pqxx::connection& c, const std::vector<std::string>& boards,
                          WorkPlan& plan) {
  plan = WorkPlan{};
  pqxx::nontransaction w(c);  // two reads, each its own snapshot: the claims re-check
  const int window = QueueWindow(boards.size());
  auto queued = pg::ExecPrepared(w, "dispatch_queue_head", R"sql(
      SELECT r.id, r.job_id, r.kernel, r.arches::text, r.boards::text, j.memory_max
        FROM runs r JOIN jobs j ON j.id = r.job_id
       WHERE r.state = 'queued' AND (r.not_before IS NULL OR r.not_before <= now())
         -- a job's runs wait until every kernel it brings is built
         AND NOT EXISTS (SELECT 1 FROM job_builds jb JOIN builds bu ON bu.id = jb.build_id
                          WHERE jb.job_id = r.job_id AND bu.state IN ('queued', 'building'))
       ORDER BY r.job_id, r.sequence, r.id
       LIMIT $1)sql",
                                 window);
  if (queued.empty()) return absl::OkStatus();
  plan.window_full = static_cast<int>(queued.size()) == window;
  plan.runs.reserve(queued.size());
  for (const auto& r : queued) {
    plan.runs.push_back(QueuedRun{.id = r[0].as<int64_t>(),
                                  .job_id = r[1].as<int64_t>(),
                                  .kernel = r[2].as<std::string>(),
                                  .arches = JsonStrings(r[3].as<std::string>()),
                                  .boards = JsonStrings(r[4].as<std::string>()),
                                  .memory_max = r[5].as<uint64_t>()});
  }
  auto free_rows = pg::ExecPrepared(w, "dispatch_free_boards", R"sql(
      SELECT b.name, b.arch, b.memory_bytes, b.running_kernel_labels::text,
             b.bootable_kernel_labels::text
        FROM boards b
       WHERE b.name IN (SELECT jsonb_array_elements_text($1::jsonb)) AND b.health = 'ok'
         AND NOT EXISTS (SELECT 1 FROM runs busy
                          WHERE busy.board = b.name AND busy.state IN ('assigned', 'running')))sql",
                                    nlohmann::json(boards).dump());
  std::map<std::string, FreeBoard> by_name;
  for (const auto& r : free_rows) {
    FreeBoard b{.name = r[0].as<std::string>(),
                .arch = r[1].as<std::string>(),
                .memory_bytes = r[2].as<uint64_t>(),
                .running_kernels = JsonStrings(r[3].as<std::string>()),
                .bootable_kernels = JsonStrings(r[4].as<std::string>())};
    by_name.emplace(b.name, std::move(b));
  }
  for (const auto& name : boards) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    plan.free.push_back(std::move(it->second));
    by_name.erase(it);  // a board asking twice is served once
  }
  plan.steps = MatchParkedBoards(plan.free, plan.runs);
  std::vector<bool> stepped(plan.free.size(), false);
  for (const BoardStep& step : plan.steps) stepped[step.board] = true;
  for (size_t b = 0; b < plan.free.size(); ++b) {
    if (!stepped[b]) plan.unmatched.push_back(plan.free[b].name);
  }
  return absl::OkStatus();
}

// How many of a plan's steps one transaction takes. Each batch's orders reach their boards
// while the next batch is claimed: with 1,000 boards waiting the first answers leave after
// one batch instead of after all of them.
constexpr size_t kClaimBatch = 128;

// The kernel switches among steps [first, last) of `plan`, in one transaction: the boards
// are locked (by name, as NextWorkFromWholeQueue locks them), then each still healthy and
// idle one is ordered to switch.
absl::Status OrderSwitches(pqxx::connection& c, const WorkPlan& plan, size_t first, size_t last,
                           const StoreOptions& options, WorkStore::BoardOrders& out) {
  std::set<std::string> switching;
  for (size_t i = first; i < last; ++i) {
    if (plan.steps[i].switch_kernel) switching.insert(plan.free[plan.steps[i].board].name);
  }
  if (switching.empty()) return absl::OkStatus();
  pqxx::work w(c);
  std::set<std::string> locked;
  for (const auto& r : pg::ExecPrepared(w, "dispatch_lock_boards", R"sql(
           SELECT b.name FROM boards b
            WHERE b.name IN (SELECT jsonb_array_elements_text($1::jsonb)) AND b.health = 'ok'
              AND NOT EXISTS (SELECT 1 FROM runs busy WHERE busy.board = b.name
                                 AND busy.state IN ('assigned', 'running'))
            ORDER BY b.name FOR UPDATE OF b)sql",
                                        nlohmann::json(switching).dump())) {
    locked.insert(r[0].as<std::string>());
  }
  for (size_t i = first; i < last; ++i) {
    const BoardStep& step = plan.steps[i];
    const FreeBoard& board = plan.free[step.board];
    if (!step.switch_kernel || !locked.count(board.name)) continue;  // changed: next pass
    const QueuedRun& run = plan.runs[step.run];
    KernelSwitchOrder order;
    order.label = run.kernel;
    order.reason =
        absl::StrCat("run ", run.id, " of job ", run.job_id, " needs kernel ", run.kernel);
    order.deadline_seconds = static_cast<uint32_t>(options.kernel_switch_deadline_seconds);
    OrderKernelSwitch(w, board.name, order);
    out.emplace_back(board.name, WorkOrder{.run = std::nullopt, .kernel_switch = order});
  }
  w.commit();
  return absl::OkStatus();
}

// The claims among steps [first, last) of `plan`: the boards locked, the runs claimed if
// still queued and their jobs marked running, in one statement committed on its own, so a
// group costs one round trip to the database (five as a transaction: ~40 ms of a pass with
// 1,000 boards waiting). `lost` counts the claims not taken: runs another controller took
// first, and boards that changed meanwhile (busy, unhealthy), which ask again and find
// nothing.
absl::Status ClaimGroup(pqxx::connection& c, const WorkPlan& plan, size_t first, size_t last,
                        const StoreOptions& options, WorkStore::BoardOrders& out, size_t& lost) {
  nlohmann::json claims = nlohmann::json::array();
  for (size_t i = first; i < last; ++i) {
    if (plan.steps[i].switch_kernel) continue;
    claims.push_back(
        {{"run", plan.runs[plan.steps[i].run].id}, {"board", plan.free[plan.steps[i].board].name}});
  }
  if (claims.empty()) return absl::OkStatus();
  static const std::string kClaimGroup = R"sql(
    WITH want AS MATERIALIZED (
           SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(run bigint, board text)),
         locked AS MATERIALIZED (
           SELECT b.name FROM boards b
            WHERE b.name IN (SELECT board FROM want) AND b.health = 'ok'
              AND NOT EXISTS (SELECT 1 FROM runs busy WHERE busy.board = b.name
                                 AND busy.state IN ('assigned', 'running'))
            ORDER BY b.name FOR UPDATE OF b),
         claimed AS (
           UPDATE runs r SET
             state = 'assigned', board = v.board, attempt = r.attempt + 1,
             attempt_id = gen_random_uuid(), assigned_at = now(), failure_reason = NULL,
             lease_expires_at = )sql" + pg::LeaseExpirySql(2) +
                                         R"sql(
             FROM jobs j, want v
            WHERE r.id = v.run AND v.board IN (SELECT name FROM locked) AND r.state = 'queued'
              AND j.id = r.job_id
           RETURNING )sql" + AssignmentColumns() +
                                         R"sql(),
         marked AS (
           UPDATE jobs SET state = 'running', finished_at = NULL
            WHERE id IN (SELECT job_id FROM claimed) AND state NOT IN ('running', 'cancelled'))
    SELECT * FROM claimed)sql";
  pqxx::nontransaction n(c);
  size_t claimed = 0;
  for (const auto& r : pg::ExecPrepared(n, "dispatch_claim_group", kClaimGroup, claims.dump(),
                                        options.lease_grace_seconds)) {
    Assignment a = AssignmentFromRow(r);
    std::string board = r[12].as<std::string>();
    out.emplace_back(std::move(board), WorkOrder{.run = std::move(a), .kernel_switch = {}});
    claimed++;
  }
  lost = claims.size() - claimed;
  return absl::OkStatus();
}

// Takes steps [first, last) of `plan`: the switches (ordered first), then the claims.
absl::Status TakeSteps(pqxx::connection& c, const WorkPlan& plan, size_t first, size_t last,
                       const StoreOptions& options, WorkStore::BoardOrders& out, size_t& lost) {
  out.clear();
  lost = 0;
  absl::Status switched = OrderSwitches(c, plan, first, last, options, out);
  if (!switched.ok()) return switched;
  return ClaimGroup(c, plan, first, last, options, out, lost);
}

}  // namespace

absl::Status PgWorkStore::DecideWorkForBoards(const std::vector<std::string>& asking,
                                              const OrderSink& deliver) {
  std::vector<std::string> boards = asking;
  // Several controllers serving at once read the same head of the queue; a claim another
  // controller made first is skipped (state no longer queued). The boards that lost theirs
  // try again at once, up to 3 rounds, instead of waiting for the next tick.
  for (int round = 0; round < 3 && !boards.empty(); ++round) {
    auto plan = pool_->Query<WorkPlan>(
        [&](pqxx::connection& c, WorkPlan& p) { return ReadWorkPlan(c, boards, p); });
    if (!plan.ok()) return plan.status();
    std::set<std::string> served;
    size_t lost = 0;
    for (size_t first = 0; first < plan->steps.size(); first += kClaimBatch) {
      const size_t last = std::min(plan->steps.size(), first + kClaimBatch);
      size_t batch_lost = 0;
      auto taken = pool_->Query<BoardOrders>([&](pqxx::connection& c, BoardOrders& out) {
        return TakeSteps(c, *plan, first, last, options_, out, batch_lost);
      });
      if (!taken.ok()) return taken.status();
      lost += batch_lost;
      for (const auto& order : *taken) served.insert(order.first);
      if (!taken->empty()) deliver(*std::move(taken));
    }
    if (plan->window_full) {
      // The window held only runs these boards may not serve: each looks down the whole queue.
      BoardOrders deep;
      for (const auto& board : plan->unmatched) {
        auto next = NextWorkFromWholeQueue(board);
        if (!next.ok()) break;
        if (next->run || next->kernel_switch) {
          served.insert(board);
          deep.emplace_back(board, *std::move(next));
        }
      }
      if (!deep.empty()) deliver(std::move(deep));
    }
    if (lost == 0) break;
    std::vector<std::string> again;
    for (const auto& board : boards) {
      if (!served.count(board)) again.push_back(board);
    }
    boards.swap(again);
  }
  return absl::OkStatus();
}

absl::Status PgWorkStore::AbandonKernelSwitch(const std::string& board) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    w.exec_params(R"sql(
      UPDATE boards SET health = 'ok', health_reason = '', switch_label = NULL,
                        switch_from_boot_id = NULL, switch_deadline = NULL,
                        kernel_switches = kernel_switches - 1
       WHERE name = $1 AND health = 'switching')sql",
                  board);
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<std::string>> PgWorkStore::ExpireKernelSwitches() {
  return pool_->Query<std::vector<std::string>>(
      [&](pqxx::connection& c, std::vector<std::string>& boards) -> absl::Status {
        pqxx::work w(c);
        // switch_label stays: a late hello is still checked against it.
        auto rows = w.exec(R"sql(
      UPDATE boards SET health = 'needs-check',
             health_reason = format('switch to %s: no hello from the new kernel by %s UTC',
                                    switch_label,
                                    to_char(switch_deadline AT TIME ZONE 'UTC',
                                            'YYYY-MM-DD HH24:MI:SS')),
             switch_deadline = NULL
       WHERE health = 'switching' AND switch_deadline < now()
      RETURNING name, switch_label, health_reason)sql");
        for (const auto& r : rows) {
          boards.push_back(r[0].as<std::string>());
          pg::MarkBadBoot(w, r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(),
                          "");
        }
        w.commit();
        return absl::OkStatus();
      });
}

absl::StatusOr<bool> PgWorkStore::RenewLease(const std::string& board, int64_t run_id,
                                             const std::string& attempt_id) {
  return pool_->Query<bool>([&](pqxx::connection& c, bool& current) -> absl::Status {
    pqxx::work w(c);
    w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    auto rows = w.exec_params(R"sql(
      UPDATE runs r SET
        state = 'running', started_at = coalesce(r.started_at, now()),
        lease_expires_at = )sql" + pg::LeaseExpirySql(4) +
                                  R"sql(
      FROM jobs j
      WHERE r.id = $1 AND r.attempt_id::text = $2 AND r.board = $3
        AND r.state IN ('assigned', 'running') AND j.id = r.job_id
      RETURNING r.job_id)sql",
                              run_id, attempt_id, board, options_.lease_grace_seconds);
    current = !rows.empty();
    // The job's state needs no recompute: assigned -> running keeps the run open and started
    // (JobStateFromRuns), and skipping it keeps heartbeats off the job's row lock (LockJob),
    // which thousands of boards on one job would otherwise queue on.
    w.commit();
    return absl::OkStatus();
  });
}

std::vector<absl::StatusOr<int64_t>> PgWorkStore::StoreResults(
    const std::vector<ResultUpload>& uploads) {
  auto together = StoreBatch(uploads);
  if (together.ok()) return *std::move(together);
  std::vector<absl::StatusOr<int64_t>> out;
  out.reserve(uploads.size());
  if (uploads.size() == 1 || absl::IsUnavailable(together.status())) {
    out.assign(uploads.size(), together.status());
    return out;
  }
  // One upload's database error (or a deadlock with a claim) must not cost the others
  // theirs: each on its own.
  for (const auto& u : uploads) {
    auto alone = StoreBatch({u});
    out.push_back(alone.ok() ? std::move(alone->front()) : alone.status());
  }
  return out;
}

absl::StatusOr<std::vector<absl::StatusOr<int64_t>>> PgWorkStore::StoreBatch(
    const std::vector<ResultUpload>& uploads) {
  using Answers = std::vector<absl::StatusOr<int64_t>>;
  // A run as this transaction sees it, updated as the batch's uploads are decided.
  struct RunNow {
    std::string state, attempt, board, stored_attempt;
    int64_t job_id = 0;
    int duration = 0;
  };
  return pool_->Query<Answers>([&](pqxx::connection& c, Answers& out) -> absl::Status {
    out.assign(uploads.size(), absl::InternalError("result not handled"));
    // In run id order: the runs are locked in that order, as every transaction that locks
    // several does, and a run's repeated upload comes after its first.
    std::vector<size_t> order(uploads.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return uploads[a].run_id < uploads[b].run_id; });
    std::string ids = "{";
    for (size_t k = 0; k < order.size(); ++k) {
      absl::StrAppend(&ids, k == 0 ? "" : ",", uploads[order[k]].run_id);
    }
    ids += "}";
    pqxx::work w(c);
    std::map<int64_t, RunNow> runs;
    for (const auto& r : w.exec_params(R"sql(
        SELECT r.id, r.state, coalesce(r.attempt_id::text, ''), coalesce(r.board, ''), r.job_id,
               j.duration_seconds, coalesce(res.attempt_id::text, '')
          FROM runs r JOIN jobs j ON j.id = r.job_id
          LEFT JOIN results res ON res.run_id = r.id
         WHERE r.id = ANY ($1::bigint[])
         ORDER BY r.id
           FOR UPDATE OF r)sql",
                                       ids)) {
      runs[r[0].as<int64_t>()] = RunNow{.state = r[1].as<std::string>(),
                                        .attempt = r[2].as<std::string>(),
                                        .board = r[3].as<std::string>(),
                                        .stored_attempt = r[6].as<std::string>(),
                                        .job_id = r[4].as<int64_t>(),
                                        .duration = r[5].as<int>()};
    }
    std::vector<size_t> stored;  // uploads whose result row (and samples) are written
    nlohmann::json finished = nlohmann::json::array();  // {id, state, reason} per run
    std::map<int64_t, bool> jobs;                       // job -> a run of it succeeded here
    for (size_t i : order) {
      const ResultUpload& u = uploads[i];
      auto found = runs.find(u.run_id);
      if (found == runs.end()) {
        out[i] = absl::NotFoundError(absl::StrCat("run ", u.run_id, " not found"));
        continue;
      }
      RunNow& run = found->second;
      out[i] = run.job_id;
      if (run.attempt == u.attempt_id && run.board == u.board &&
          (run.state == "succeeded" || run.state == "failed")) {
        continue;  // a repeated upload of the stored outcome: acknowledge
      }
      if (run.stored_attempt == u.attempt_id) continue;
      if (run.attempt != u.attempt_id || run.board != u.board ||
          (run.state != "assigned" && run.state != "running")) {
        out[i] = absl::FailedPreconditionError(
            absl::StrCat("run ", u.run_id, " attempt ", u.attempt_id, " is not current (run is ",
                         run.state, "); result refused"));
        continue;
      }
      bool ok = u.succeeded;
      std::string reason = u.failure_reason;
      if (ok) {
        // The stored invariant: one sample per second of measured duration.
        if (auto problem = ResultShapeProblem(u.result.samples, run.duration)) {
          ok = false;
          reason = *problem;
        }
      }
      if (ok) {
        stored.push_back(i);
        run.stored_attempt = u.attempt_id;
      }
      run.state = ok ? "succeeded" : "failed";
      finished.push_back({{"id", u.run_id}, {"state", run.state}, {"reason", ok ? "" : reason}});
      jobs[run.job_id] = jobs[run.job_id] || ok;
    }
    if (!stored.empty()) {
      // The results, then every result's samples (one row each, migration 18): two COPYs.
      auto results = pg::CopyInto(
          w, "results",
          std::vector<std::string>{"run_id", "attempt_id", "board", "throughput", "rounds",
                                   "duration_seconds", "warmup_seconds", "counters", "environment",
                                   "pages", "pages_per_second", "too_coarse"});
      for (size_t i : stored) {
        const ResultUpload& u = uploads[i];
        const ResultRecord& r = u.result;
        *results << std::make_tuple(
            u.run_id, u.attempt_id, u.board, r.throughput, static_cast<int64_t>(r.rounds),
            r.duration_seconds, r.warmup_seconds, r.counters_json, r.environment_json,
            static_cast<int64_t>(r.pages), r.pages_per_second, r.too_coarse);
      }
      results->complete();
      auto samples =
          pg::CopyInto(w, "run_samples", std::vector<std::string>{"run_id", "rounds", "pages"});
      std::string rounds, pages;
      for (size_t i : stored) {
        const ResultRecord& r = uploads[i].result;
        rounds.assign("{");
        pages.assign("{");
        for (size_t s = 0; s < r.samples.size(); ++s) {
          const char* sep = s == 0 ? "" : ",";
          absl::StrAppend(&rounds, sep, r.samples[s].second);
          absl::StrAppend(&pages, sep, s < r.sample_pages.size() ? r.sample_pages[s] : 0);
        }
        rounds += '}';
        pages += '}';
        *samples << std::make_tuple(uploads[i].run_id, rounds, pages);
      }
      samples->complete();
    }
    if (!finished.empty()) {
      w.exec_params(R"sql(
        UPDATE runs r SET state = v.state, failure_reason = NULLIF(v.reason, ''),
                          finished_at = now(), lease_expires_at = NULL
          FROM jsonb_to_recordset($1::jsonb) AS v(id bigint, state text, reason text)
         WHERE r.id = v.id)sql",
                    finished.dump());
    }
    // Jobs in id order, each once for the whole batch.
    for (const auto& [job_id, succeeded] : jobs) {
      // Before reading the job's other runs: see pg::LockJob.
      pg::LockJob(w, job_id);
      if (succeeded) ExtendAdaptiveJob(w, job_id);
      pg::RecomputeJobState(w, job_id);
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int64_t>> PgWorkStore::ReapExpiredLeases() {
  return pool_->Query<std::vector<int64_t>>(
      [&](pqxx::connection& c, std::vector<int64_t>& jobs) -> absl::Status {
        pqxx::work w(c);
        auto lost = w.exec(R"sql(
          SELECT id, job_id, attempt FROM runs
           WHERE state IN ('assigned', 'running') AND lease_expires_at < now()
           ORDER BY id FOR UPDATE SKIP LOCKED)sql");
        jobs = pg::SettleLostAttempts(w, lost, LostCause::kLeaseExpired, options_.requeue());
        w.commit();
        return absl::OkStatus();
      });
}

}  // namespace faultline::controller
