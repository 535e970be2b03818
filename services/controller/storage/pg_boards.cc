#include "services/controller/storage/pg_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/controller/storage/pg_pool.h"

namespace faultline::controller {
namespace {

using nlohmann::json;

}  // namespace

absl::StatusOr<HealthVerdict> PgBoardStore::UpsertBoard(const BoardRecord& board) {
  return pool_->Query<HealthVerdict>([&](pqxx::connection& c,
                                         HealthVerdict& health) -> absl::Status {
    pqxx::work w(c);
    json labels = board.summary.kernel_labels;
    json running = board.summary.running_kernel_labels;
    json bootable = board.summary.bootable_kernel_labels;
    if (running.empty() && !board.summary.running_kernel_label.empty()) {
      running.push_back(board.summary.running_kernel_label);
    }
    std::optional<SwitchInFlight> in_flight;
    auto prev = w.exec_params(
        "SELECT switch_label, coalesce(switch_from_boot_id, '') FROM boards WHERE name = $1 "
        "FOR UPDATE",
        board.summary.name);
    if (!prev.empty() && !prev[0][0].is_null()) {
      in_flight = SwitchInFlight{prev[0][0].as<std::string>(), prev[0][1].as<std::string>()};
    }
    BoardSummary hello = board.summary;
    hello.running_kernel_labels.clear();
    for (const auto& k : running) hello.running_kernel_labels.push_back(k);
    health = HealthAfterHello(in_flight, hello);
    w.exec_params(
        R"sql(
      INSERT INTO boards (name, arch, memory_bytes, kernel_labels, running_kernel_label, facts,
                          running_kernel_labels, announced_bootable_labels, boot_id, health,
                          health_reason, boots_built_kernels, build_arches)
      VALUES ($1, $2, $3, $4::jsonb, $5, $6::jsonb, $7::jsonb,
              $8::jsonb, $9, $10, $11, $12, $13::jsonb)
      ON CONFLICT (name) DO UPDATE SET
        arch = EXCLUDED.arch, memory_bytes = EXCLUDED.memory_bytes,
        kernel_labels = EXCLUDED.kernel_labels,
        running_kernel_label = EXCLUDED.running_kernel_label,
        running_kernel_labels = EXCLUDED.running_kernel_labels,
        announced_bootable_labels = EXCLUDED.announced_bootable_labels,
        boot_id = EXCLUDED.boot_id, health = EXCLUDED.health,
        health_reason = EXCLUDED.health_reason,
        boots_built_kernels = EXCLUDED.boots_built_kernels, build_arches = EXCLUDED.build_arches,
        switch_label = NULL, switch_from_boot_id = NULL, switch_deadline = NULL,
        facts = EXCLUDED.facts, last_seen = now())sql",
        board.summary.name, board.summary.arch, static_cast<int64_t>(board.summary.memory_bytes),
        labels.dump(), board.summary.running_kernel_label, board.facts_json, running.dump(),
        bootable.dump(), board.summary.boot_id, std::string(ToString(health.health)), health.reason,
        board.summary.boots_built_kernels, json(board.summary.build_arches).dump());
    pg::RefreshBootableLabels(w, board.summary.name);
    // A switch that did not end on its kernel: a built kernel is bad on this board.
    const bool other_kernel =
        in_flight && !health.switch_not_begun &&
        std::find(hello.running_kernel_labels.begin(), hello.running_kernel_labels.end(),
                  in_flight->label) == hello.running_kernel_labels.end();
    if (other_kernel) {
      pg::MarkBadBoot(w, board.summary.name, in_flight->label, health.reason,
                      board.previous_boot_log);
    }
    // The hello ends the switch in flight (one not begun is ordered again: a new row).
    if (in_flight) {
      pg::EndKernelSwitches(w, board.summary.name,
                            health.switch_not_begun ? "abandoned"
                            : other_kernel          ? "other-kernel"
                                                    : "booted");
    }
    w.commit();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<BoardRecord>> PgBoardStore::ListBoards() {
  return pool_->Query<std::vector<BoardRecord>>(
      [&](pqxx::connection& c, std::vector<BoardRecord>& boards) -> absl::Status {
        pqxx::read_transaction t(c);
        auto rows = t.exec_params(R"sql(
      SELECT b.name, b.arch, b.memory_bytes, b.kernel_labels::text, b.running_kernel_label,
             b.facts::text, (extract(epoch FROM b.last_seen) * 1000)::bigint,
             now() - b.last_seen < make_interval(secs => $1),
             coalesce((SELECT max(r.id) FROM runs r
                        WHERE r.board = b.name AND r.state IN ('assigned', 'running')), 0),
             b.running_kernel_labels::text, b.bootable_kernel_labels::text, b.boot_id,
             b.health, b.health_reason, b.kernel_switches, b.boots_built_kernels,
             b.build_arches::text
        FROM boards b ORDER BY b.name)sql",
                                  options_.board_offline_after_seconds);
        for (const auto& r : rows) {
          BoardRecord b;
          b.summary.name = r[0].as<std::string>();
          b.summary.arch = r[1].as<std::string>();
          b.summary.memory_bytes = r[2].as<uint64_t>();
          const json labels = json::parse(r[3].as<std::string>());
          for (const auto& k : labels) b.summary.kernel_labels.push_back(k);
          b.summary.running_kernel_label = r[4].as<std::string>();
          b.facts_json = r[5].as<std::string>();
          b.last_seen_ms = r[6].as<int64_t>();
          b.online = r[7].as<bool>();
          b.current_run_id = r[8].as<int64_t>();
          const json running = json::parse(r[9].as<std::string>());
          for (const auto& k : running) b.summary.running_kernel_labels.push_back(k);
          const json bootable = json::parse(r[10].as<std::string>());
          for (const auto& k : bootable) b.summary.bootable_kernel_labels.push_back(k);
          b.summary.boot_id = r[11].as<std::string>();
          const auto stored_health = r[12].as<std::string>();
          const auto health = ParseBoardHealth(stored_health);
          if (!health) {
            return absl::DataLossError(
                absl::StrCat("board ", b.summary.name, ": unknown health '", stored_health, "'"));
          }
          b.summary.health = *health;
          b.summary.health_reason = r[13].as<std::string>();
          b.summary.kernel_switches = r[14].as<uint64_t>();
          b.summary.boots_built_kernels = r[15].as<bool>();
          for (const auto& a : json::parse(r[16].as<std::string>())) {
            b.summary.build_arches.push_back(a);
          }
          boards.push_back(std::move(b));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<int> PgBoardStore::ReleaseBoardRuns(const std::string& board) {
  return pool_->Query<int>([&](pqxx::connection& c, int& touched) -> absl::Status {
    pqxx::work w(c);
    auto lost = w.exec_params(R"sql(
      SELECT id, job_id, attempt FROM runs
       WHERE board = $1 AND state IN ('assigned', 'running')
       ORDER BY id FOR UPDATE)sql",
                              board);
    pg::SettleLostAttempts(w, lost, LostCause::kAgentRestarted, options_.requeue());
    w.commit();
    touched = static_cast<int>(lost.size());
    return absl::OkStatus();
  });
}

absl::Status PgBoardStore::TouchBoard(const std::string& board) {
  return pool_->WithConnection([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    auto r = w.exec_params("UPDATE boards SET last_seen = now() WHERE name = $1", board);
    w.commit();
    if (r.affected_rows() == 0) {
      return absl::FailedPreconditionError(absl::StrCat("board '", board, "' has not said hello"));
    }
    return absl::OkStatus();
  });
}

}  // namespace faultline::controller
