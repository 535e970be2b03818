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
#include "services/controller/storage/pg_queue.h"

namespace faultline::controller {
namespace {

using pg::OptionalU64;
using pg::StringMap;

// What a claim returns (RETURNING of an UPDATE runs r ... FROM jobs j; the lease grace in
// parameter $2), read by AssignmentFromRow; the board is column 12.
const std::string& AssignmentColumns() {
  static const std::string columns = R"sql(
  r.id, r.attempt_id::text, r.job_id, j.benchmark, r.kernel, j.duration_seconds, r.params::text,
  j.memory_max, j.memory_high, j.swap_max, ceil()sql" +
                                     pg::LeaseSecondsSql(2) + R"sql()::int,
  j.run_options::text, r.board, j.warmup_ms)sql";
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
  a.run_options = r[11].as<std::string>();
  a.warmup_ms = r[13].as<uint64_t>();
  return a;
}

// The board is told to switch: health 'switching' until its hello from the new kernel.
// The switch is kept (kernel_switches) for the job whose run asked for it: a job's phases.
void OrderKernelSwitch(pqxx::work& w, const std::string& board, int64_t job_id,
                       KernelSwitchOrder& order) {
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
  w.exec_params(R"sql(
    INSERT INTO kernel_switches (board, arch, label, job_id)
    SELECT name, arch, $2, $3 FROM boards WHERE name = $1)sql",
                board, order.label, job_id);
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
    auto me = w.exec_params(
        absl::StrCat("SELECT ", pg::kFreeBoardColumns, " FROM boards b WHERE b.name = $1 AND ",
                     pg::kBoardIsFree, " FOR UPDATE OF b"),
        board);
    if (me.empty()) return absl::OkStatus();
    const FreeBoard free = pg::FreeBoardFromRow(me[0]);
    // The head of this board's queue: the first runnable run it may serve (core/matching.h)
    // that no other poll holds, read a page at a time.
    constexpr int kPage = 1024;
    std::optional<QueuedRun> head;
    pg::QueueKey after = pg::kQueueStart;
    for (bool more = true; more && !head.has_value();) {
      const std::vector<pg::QueuedRow> page =
          pg::ReadRunnableRuns(w, "whole_queue_page", after, kPage);
      more = static_cast<int>(page.size()) == kPage;
      for (const pg::QueuedRow& row : page) {
        after = row.key;
        if (!MayServe(free, row.run)) continue;
        if (w.exec_params("SELECT 1 FROM runs WHERE id = $1 AND state = 'queued' "
                          "FOR UPDATE SKIP LOCKED",
                          row.run.id)
                .empty()) {
          continue;
        }
        head = row.run;
        break;
      }
    }
    if (!head.has_value()) return absl::OkStatus();
    const int64_t run_id = head->id;
    const std::string kernel = head->kernel;
    const int64_t job_id = head->job_id;
    if (!RunsKernel(free, kernel)) {
      KernelSwitchOrder order;
      order.label = kernel;
      order.reason = absl::StrCat("run ", run_id, " of job ", job_id, " needs kernel ", kernel);
      order.deadline_seconds = static_cast<uint32_t>(options_.kernel_switch_deadline_seconds);
      OrderKernelSwitch(w, board, job_id, order);
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
  const std::vector<pg::QueuedRow> queued =
      pg::ReadRunnableRuns(w, "dispatch_queue_head", pg::kQueueStart, window);
  if (queued.empty()) return absl::OkStatus();
  plan.window_full = static_cast<int>(queued.size()) == window;
  plan.runs.reserve(queued.size());
  for (const pg::QueuedRow& row : queued) plan.runs.push_back(row.run);
  static const std::string kFreeBoards = absl::StrCat(
      "SELECT ", pg::kFreeBoardColumns, " FROM boards b ",
      "WHERE b.name IN (SELECT jsonb_array_elements_text($1::jsonb)) AND ", pg::kBoardIsFree);
  auto free_rows =
      pg::ExecPrepared(w, "dispatch_free_boards", kFreeBoards, nlohmann::json(boards).dump());
  std::map<std::string, FreeBoard> by_name;
  for (const auto& r : free_rows) {
    FreeBoard b = pg::FreeBoardFromRow(r);
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
  static const std::string kLockBoards = absl::StrCat(
      "SELECT b.name FROM boards b WHERE b.name IN (SELECT jsonb_array_elements_text($1::jsonb))"
      " AND ",
      pg::kBoardIsFree, " ORDER BY b.name FOR UPDATE OF b");
  for (const auto& r :
       pg::ExecPrepared(w, "dispatch_lock_boards", kLockBoards, nlohmann::json(switching).dump())) {
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
    OrderKernelSwitch(w, board.name, run.job_id, order);
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
            WHERE b.name IN (SELECT board FROM want) AND )sql" +
                                         std::string(pg::kBoardIsFree) +
                                         R"sql(
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
    pg::EndKernelSwitches(w, board, "abandoned");
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
          pg::EndKernelSwitches(w, r[0].as<std::string>(), "lapsed");
          pg::MarkBadBoot(w, r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>(),
                          "");
        }
        w.commit();
        return absl::OkStatus();
      });
}

}  // namespace faultline::controller
