#pragma once
// The fixture of PgStore's integration tests (store_*_test.cc, one per area of the store):
// a fresh database per test on one throwaway PostgreSQL 15 cluster, with a board and the
// helpers the scenarios share.
#include "services/controller/storage/pg_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/controller/core/validation.h"
#include "services/controller/storage/migrations.h"
#include "services/controller/storage/pg_pool.h"
#include "tests/support/pg_cluster.h"
#include "tests/support/work_calls.h"

namespace faultline::controller {

using faultline::testing::FreshDatabase;
using faultline::testing::PgSkipReason;
using faultline::testing::PgUrl;

// A database as a controller of schema version `below` - 1 left it, for upgrade tests.
inline void MigrateBelow(pqxx::work& w, int below) {
  w.exec(R"sql(CREATE TABLE schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()))sql");
  for (const auto& m : Migrations()) {
    if (m.version >= below) break;
    w.exec(m.sql);
    w.exec_params(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
        m.version, m.name, m.sql);
  }
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FAULTLINE_REQUIRE_PG();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    url_ = FreshDatabase(std::string("t_") + info->name());
    StoreOptions options;
    options.database_url = url_;
    store_ = std::make_unique<PgStore>(options);
    ASSERT_TRUE(store_->Migrate().ok());
    BoardRecord board;
    board.summary = {.name = "box",
                     .arch = "x86_64",
                     .memory_bytes = 8ull << 30,
                     .kernel_labels = {"vanilla", "patched"},
                     .running_kernel_label = "vanilla",
                     .running_kernel_labels = {"vanilla"}};
    board.facts_json = R"({"name":"box"})";
    ASSERT_TRUE(store_->boards().UpsertBoard(board).ok());
  }

  int64_t Submit(uint32_t repetitions, std::vector<std::string> kernels = {"vanilla"},
                 uint32_t block_size = 0, std::vector<std::string> only_boards = {},
                 const std::function<void(JobSpecInput&)>& adjust = nullptr) {
    JobSpecInput spec;
    spec.block_size = block_size;
    spec.boards = std::move(only_boards);
    spec.benchmark = "filemap-thrash";
    spec.duration = "3s";
    spec.repetitions = repetitions;
    spec.kernels = std::move(kernels);
    spec.memory_max = "256M";
    spec.matrix = {{"threads", {"2", "4"}}};
    if (adjust) adjust(spec);
    auto boards = store_->boards().ListBoards();
    std::vector<BoardSummary> summaries;
    for (const auto& b : *boards) summaries.push_back(b.summary);
    auto job = ValidateJobSpec(spec, summaries);
    EXPECT_TRUE(job.ok()) << job.status();
    // The stored spec as the api layer writes it (only what the store reads of it).
    std::string kernel_list;
    for (const auto& k : spec.kernels)
      kernel_list += (kernel_list.empty() ? "\"" : ",\"") + k + "\"";
    auto id = store_->jobs().CreateJob(*job, "test", "{\"kernels\": [" + kernel_list + "]}", "");
    EXPECT_TRUE(id.ok()) << id.status();
    return id->job_id;
  }

  static ResultRecord GoodResult(int seconds) {
    ResultRecord r;
    r.throughput = 10;
    r.rounds = 10 * seconds;
    r.duration_seconds = seconds;
    for (int s = 1; s <= seconds; ++s) r.samples.emplace_back(s, 10);
    return r;
  }

  // A board running one kernel under both labels (vanilla, patched): no reboots needed.
  void UpsertAABoard(const std::string& name) {
    BoardRecord board;
    board.summary = {.name = name,
                     .arch = "x86_64",
                     .memory_bytes = 8ull << 30,
                     .kernel_labels = {"vanilla", "patched"},
                     .running_kernel_label = "vanilla",
                     .running_kernel_labels = {"vanilla", "patched"}};
    board.facts_json = "{}";
    ASSERT_TRUE(store_->boards().UpsertBoard(board).ok());
  }

  // The run NextWork hands a board that runs the run's kernel.
  absl::StatusOr<std::optional<Assignment>> ClaimRun(const std::string& board) {
    auto next = testing::NextWork(store_->work(), board);
    if (!next.ok()) return next.status();
    return std::move(next->run);
  }

  // Runs `sql` on a connection of its own; false (and the error reported) when it fails.
  bool Exec(const std::string& sql) {
    try {
      pqxx::connection c(url_);
      pqxx::work w(c);
      w.exec(sql);
      w.commit();
      return true;
    } catch (const std::exception& e) {
      ADD_FAILURE() << sql << ": " << e.what();
      return false;
    }
  }
  int64_t Count(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int64_t>();
  }
  std::string Text(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<std::string>();
  }

  // The job finished, succeeded, with `runs` runs succeeded.
  void ExpectSucceeded(int64_t job_id, uint32_t runs) {
    auto done = store_->jobs().GetJob(job_id);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->state, JobState::kSucceeded);
    EXPECT_EQ(done->counts.succeeded, runs);
    EXPECT_NE(done->finished_at_ms, 0);
  }

  std::string url_;
  std::unique_ptr<PgStore> store_;
};

}  // namespace faultline::controller
