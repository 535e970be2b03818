// PgStore against a real PostgreSQL 15 (tests/integration/store_fixture.h): Migrations, the
// schema's upgrades and the database going away.
#include "tests/integration/store_fixture.h"

namespace faultline::controller {
namespace {

TEST_F(StoreTest, MigrationsAreIdempotentAndChecksummed) {
  EXPECT_TRUE(store_->Migrate().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM schema_migrations"),
            static_cast<int64_t>(Migrations().size()));
  // Grafana's role reads but never writes.
  EXPECT_EQ(Count("SELECT count(*) FROM pg_roles WHERE rolname = 'faultline_grafana'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM information_schema.role_table_grants "
                  "WHERE grantee = 'faultline_grafana' AND privilege_type <> 'SELECT'"),
            0);
  {
    pqxx::connection c(url_);
    pqxx::work w(c);
    w.exec("UPDATE schema_migrations SET checksum = 'tampered' WHERE version = 1");
    w.commit();
  }
  absl::Status s = store_->Migrate();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message()).find("must never change"), std::string::npos);
}

// Migration 18 moves each result's per-second samples into one row (arrays); the rows a
// database held before read back the same through the samples view.
TEST_F(StoreTest, SamplesKeptBeforeMigration18ReadBackTheSame) {
  const std::string url = FreshDatabase("t_samples_before_18");
  {
    pqxx::connection c(url);
    pqxx::work w(c);
    MigrateBelow(w, 18);
    w.exec("SET LOCAL session_replication_role = replica");  // rows without their parents
    w.exec(R"sql(
      INSERT INTO results (run_id, attempt_id, board, throughput, rounds, duration_seconds,
                           warmup_seconds, counters, environment)
      VALUES (7, gen_random_uuid(), 'box', 20, 60, 3, 0, '{}', '{}'),
             (8, gen_random_uuid(), 'box', 5, 5, 1, 0, '{}', '{}'))sql");
    w.exec(
        "INSERT INTO samples VALUES (7, 2, 20, 200), (7, 1, 10, 100), (7, 3, 30, 300), "
        "(8, 1, 5, 0)");
    w.commit();
  }
  StoreOptions options;
  options.database_url = url;
  PgStore upgraded(options);
  ASSERT_TRUE(upgraded.Migrate().ok());
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT string_agg(run_id || ':' || second || ':' || rounds || ':' || pages, "
                   "' ' ORDER BY run_id, second) FROM samples")[0][0]
                .as<std::string>(),
            "7:1:10:100 7:2:20:200 7:3:30:300 8:1:5:0");
  EXPECT_EQ(n.exec("SELECT count(*) FROM run_samples")[0][0].as<int>(), 2);
  // The arrays are compressed with lz4 when the server has it (pglz cost 3x the COPY).
  const bool has_lz4 = n.exec(
                            "SELECT 'lz4' = ANY (enumvals) FROM pg_settings "
                            "WHERE name = 'default_toast_compression'")[0][0]
                           .as<bool>();
  if (has_lz4) {
    EXPECT_EQ(n.exec("SELECT string_agg(attcompression::text, '' ORDER BY attname) "
                     "FROM pg_attribute WHERE attrelid = 'run_samples'::regclass "
                     "AND attname IN ('rounds', 'pages')")[0][0]
                  .as<std::string>(),
              "ll");
  }
}

// Jobs finished before migration 20 get their counts from the migration.
TEST_F(StoreTest, JobsFinishedBeforeMigration20KeepTheirRunCounts) {
  const std::string url = FreshDatabase("t_counts_before_20");
  {
    pqxx::connection c(url);
    pqxx::work w(c);
    MigrateBelow(w, 20);
    w.exec(R"sql(
      INSERT INTO jobs (id, benchmark, spec, matrix_keys, duration_seconds, memory_max, state)
      VALUES (1, 'filemap-thrash', '{}', '[]', 3, 268435456, 'failed'),
             (2, 'filemap-thrash', '{}', '[]', 3, 268435456, 'running'))sql");
    w.exec(R"sql(
      INSERT INTO runs (job_id, cell_index, cell, params, kernel, repetition, state, sequence)
      VALUES (1, 0, '{}', '{}', 'vanilla', 1, 'succeeded', 0),
             (1, 0, '{}', '{}', 'vanilla', 2, 'failed', 1),
             (1, 0, '{}', '{}', 'vanilla', 3, 'cancelled', 2),
             (2, 0, '{}', '{}', 'vanilla', 1, 'succeeded', 0),
             (2, 0, '{}', '{}', 'vanilla', 2, 'queued', 1))sql");
    w.commit();
  }
  StoreOptions options;
  options.database_url = url;
  PgStore upgraded(options);
  ASSERT_TRUE(upgraded.Migrate().ok());
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  auto kept = n.exec("SELECT runs_succeeded, runs_failed, runs_cancelled FROM jobs WHERE id = 1");
  EXPECT_EQ(kept[0][0].as<int>(), 1);
  EXPECT_EQ(kept[0][1].as<int>(), 1);
  EXPECT_EQ(kept[0][2].as<int>(), 1);
  EXPECT_TRUE(n.exec("SELECT runs_succeeded FROM jobs WHERE id = 2")[0][0].is_null());
  auto snap = upgraded.history().Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status();
  EXPECT_EQ(snap->runs_by_state["succeeded"], 2);
  EXPECT_EQ(snap->runs_by_state["failed"], 1);
  EXPECT_EQ(snap->runs_by_state["cancelled"], 1);
  EXPECT_EQ(snap->runs_by_state["queued"], 1);
}

// Jobs stored before run_options (migration 35) get their options from the older columns,
// and their runs are assigned with them, the same as a job submitted after.
TEST_F(StoreTest, JobsStoredBeforeMigration35KeepTheirRunOptions) {
  const std::string url = FreshDatabase("t_run_options_before_35");
  {
    pqxx::connection c(url);
    pqxx::work w(c);
    MigrateBelow(w, 35);
    w.exec(R"sql(
      INSERT INTO jobs (id, benchmark, spec, matrix_keys, duration_seconds, memory_max,
                        events, mmap_lock_waits, profile_hz, profile_pmu)
      VALUES (1, 'filemap-thrash', '{}', '[]', 3, 268435456, '["sw:page-faults"]', true, 997,
              true),
             (2, 'filemap-thrash', '{}', '[]', 3, 268435456, '[]', false, 0, false),
             (3, 'filemap-thrash', '{}', '[]', 3, 268435456, '[]', false, 99, false))sql");
    w.commit();
  }
  StoreOptions options;
  options.database_url = url;
  PgStore upgraded(options);
  ASSERT_TRUE(upgraded.Migrate().ok());
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  auto options_of = [&](int id) {
    return n.exec("SELECT run_options::text FROM jobs WHERE id = " + std::to_string(id))[0][0]
        .as<std::string>();
  };
  EXPECT_EQ(options_of(1),
            R"({"events": ["sw:page-faults"], "profile": {"pmu": true, "frequency_hz": 997}, )"
            R"("mmap_lock_waits": true})");
  EXPECT_EQ(options_of(2), "{}");
  EXPECT_EQ(options_of(3), R"({"profile": {"pmu": false, "frequency_hz": 99}})");
}

TEST_F(StoreTest, DatabaseRestartIsUnavailableThenHealsByItself) {
  int64_t before = Submit(1);
  ASSERT_TRUE(store_->jobs().ListJobs(10).ok());
  faultline::testing::HaltCluster();
  EXPECT_EQ(store_->jobs().ListJobs(10).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_->Ping().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ClaimRun("box").status().code(), absl::StatusCode::kUnavailable);
  faultline::testing::ResumeCluster();
  // No restart of the store: it reconnects on the next calls by itself. A pooled connection
  // from before the outage may fail one call; never more.
  int failures = 0;
  for (int i = 0; i < 3; ++i) failures += store_->jobs().ListJobs(10).ok() ? 0 : 1;
  EXPECT_LE(failures, 1);
  EXPECT_TRUE(store_->Ping().ok());
  // Nothing accepted before the outage was lost, and work goes on.
  auto job = store_->jobs().GetJob(before);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->counts.total, 2u);
  auto claimed = ClaimRun("box");
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << claimed.status();
  EXPECT_GT(Submit(1), before);
}

TEST_F(StoreTest, DatabaseDownIsUnavailable) {
  StoreOptions options;
  options.database_url = "postgresql://faultline@127.0.0.1:1/none?connect_timeout=2";
  PgStore dead(options);
  EXPECT_EQ(dead.Ping().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dead.jobs().ListJobs(10).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace faultline::controller
