#include "services/controller/storage/migrations.h"

namespace faultline::controller {
namespace {

constexpr MigrationText kMigrations[] = {
    {1, "initial schema", R"sql(
CREATE TABLE boards (
  name                 text PRIMARY KEY,
  arch                 text NOT NULL,
  memory_bytes         bigint NOT NULL,
  kernel_labels        jsonb NOT NULL,          -- ["vanilla", "patched"]
  running_kernel_label text NOT NULL DEFAULT '',
  facts                jsonb NOT NULL,          -- the agent's Board message
  first_seen           timestamptz NOT NULL DEFAULT now(),
  last_seen            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
  id               bigserial PRIMARY KEY,
  name             text NOT NULL DEFAULT '',
  benchmark        text NOT NULL,
  spec             jsonb NOT NULL,              -- the JobSpec as submitted
  matrix_keys      jsonb NOT NULL,              -- column order of a cell
  duration_seconds integer NOT NULL CHECK (duration_seconds > 0),
  warmup_ms        bigint NOT NULL DEFAULT 0,
  memory_max       bigint NOT NULL,
  memory_high      bigint,                      -- NULL: not set
  swap_max         bigint,                      -- NULL: unlimited
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  finished_at      timestamptz
);

CREATE TABLE runs (
  id               bigserial PRIMARY KEY,
  job_id           bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  cell_index       integer NOT NULL,
  cell             jsonb NOT NULL,              -- {"threads": "4"}
  params           jsonb NOT NULL,              -- every knob of the run
  kernel           text NOT NULL,
  repetition       integer NOT NULL,
  arches           jsonb NOT NULL DEFAULT '[]', -- placement filters ([] = any)
  boards           jsonb NOT NULL DEFAULT '[]',
  state            text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'assigned', 'running', 'succeeded', 'failed',
                                    'cancelled')),
  board            text,
  attempt          integer NOT NULL DEFAULT 0,
  attempt_id       uuid,
  lease_expires_at timestamptz,
  failure_reason   text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  assigned_at      timestamptz,
  started_at       timestamptz,
  finished_at      timestamptz,
  UNIQUE (job_id, cell_index, kernel, repetition)
);
CREATE INDEX runs_queued ON runs (job_id, id) WHERE state = 'queued';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE state IN ('assigned', 'running');
CREATE INDEX runs_job ON runs (job_id);

-- Exactly one result per succeeded run: the primary key fences duplicates.
CREATE TABLE results (
  run_id           bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  attempt_id       uuid NOT NULL,
  board            text NOT NULL,
  throughput       double precision NOT NULL,   -- rounds per second
  rounds           bigint NOT NULL,
  duration_seconds double precision NOT NULL,
  warmup_seconds   double precision NOT NULL,
  counters         jsonb NOT NULL,
  environment      jsonb NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE samples (
  run_id  bigint NOT NULL REFERENCES results (run_id) ON DELETE CASCADE,
  second  integer NOT NULL CHECK (second > 0),
  rounds  bigint NOT NULL,
  PRIMARY KEY (run_id, second)
);
)sql"},
    {2, "a/b settings, run order, running kernel labels", R"sql(
ALTER TABLE jobs
  ADD COLUMN baseline     text NOT NULL DEFAULT '',
  ADD COLUMN block_size   integer NOT NULL DEFAULT 1,
  ADD COLUMN shuffle_seed bigint NOT NULL DEFAULT 0,
  ADD COLUMN alpha        double precision NOT NULL DEFAULT 0.01,
  ADD COLUMN min_effect   double precision NOT NULL DEFAULT 0.03;
-- Claim order within a job: kernel blocks alternate, cells shuffled within a block.
ALTER TABLE runs ADD COLUMN sequence integer NOT NULL DEFAULT 0;
DROP INDEX runs_queued;
CREATE INDEX runs_queued ON runs (job_id, sequence) WHERE state = 'queued';
ALTER TABLE boards ADD COLUMN running_kernel_labels jsonb NOT NULL DEFAULT '[]';
)sql"},
    // Same statements as deploy/grafana/readonly-role.sql. A controller role without
    // CREATEROLE skips it with a notice (then run that file as a superuser once).
    {3, "read-only role for Grafana", R"sql(
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faultline_grafana') THEN
    CREATE ROLE faultline_grafana LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
  END IF;
  ALTER ROLE faultline_grafana SET default_transaction_read_only = on;
  ALTER ROLE faultline_grafana SET statement_timeout = '30s';
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO faultline_grafana', current_database());
  GRANT USAGE ON SCHEMA public TO faultline_grafana;
  GRANT SELECT ON ALL TABLES IN SCHEMA public TO faultline_grafana;
  ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO faultline_grafana;
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'faultline_grafana not set up (no privilege): run deploy/grafana/readonly-role.sql as a superuser';
END
$$;
)sql"},
    {4, "idempotent submissions", R"sql(
ALTER TABLE jobs ADD COLUMN request_id text, ADD COLUMN spec_digest text;
CREATE UNIQUE INDEX jobs_request_id ON jobs (request_id) WHERE request_id IS NOT NULL;
)sql"},
    {5, "recurring jobs", R"sql(
CREATE TABLE schedules (
  id          bigserial PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  cron        text NOT NULL,
  spec        jsonb NOT NULL,
  next_run    timestamptz NOT NULL,
  last_run    timestamptz,
  last_job_id bigint REFERENCES jobs (id) ON DELETE SET NULL,
  last_error  text NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE jobs ADD COLUMN schedule_id bigint REFERENCES schedules (id) ON DELETE SET NULL;
)sql"},
    {6, "change points in series histories", R"sql(
CREATE TABLE change_points (
  id              bigserial PRIMARY KEY,
  study           text NOT NULL,
  benchmark       text NOT NULL,
  config          text NOT NULL,
  arch            text NOT NULL,
  board           text NOT NULL,
  kernel          text NOT NULL,
  job_id          bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  mean_before     double precision NOT NULL,
  mean_after      double precision NOT NULL,
  relative_change double precision NOT NULL,
  p_value         double precision NOT NULL,
  state           text NOT NULL DEFAULT 'open'
                  CHECK (state IN ('open', 'acknowledged', 'fixed', 'invalid')),
  detected_at     timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (study, benchmark, config, arch, board, kernel, job_id)
);
)sql"},
    {7, "kernel switches and board health", R"sql(
ALTER TABLE boards
  ADD COLUMN bootable_kernel_labels jsonb NOT NULL DEFAULT '[]',
  ADD COLUMN boot_id text NOT NULL DEFAULT '',
  ADD COLUMN health text NOT NULL DEFAULT 'ok'
             CHECK (health IN ('ok', 'switching', 'needs-check')),
  ADD COLUMN health_reason text NOT NULL DEFAULT '',
  ADD COLUMN switch_label text,
  ADD COLUMN switch_from_boot_id text,
  ADD COLUMN switch_deadline timestamptz,
  ADD COLUMN kernel_switches bigint NOT NULL DEFAULT 0;
)sql"},
    {8, "requeue backoff", R"sql(
ALTER TABLE runs ADD COLUMN not_before timestamptz;
)sql"},
    {9, "API tokens (stored hashed)", R"sql(
CREATE TABLE api_tokens (
  id           bigserial PRIMARY KEY,
  name         text NOT NULL UNIQUE,
  role         text NOT NULL CHECK (role IN ('user', 'agent')),
  board        text,  -- agent tokens act for this one board only
  token_sha256 text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz,
  CHECK ((role = 'agent') = (board IS NOT NULL))
);
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'faultline_grafana') THEN
    REVOKE ALL ON api_tokens FROM faultline_grafana;
  END IF;
END
$$;
)sql"},
    {10, "adaptive repetitions", R"sql(
ALTER TABLE jobs
  ADD COLUMN max_repetitions integer NOT NULL DEFAULT 0,
  ADD COLUMN target_ci_half_width double precision NOT NULL DEFAULT 0;
)sql"},
    {11, "progress in pages; runs too coarse to compare in rounds", R"sql(
ALTER TABLE results
  ADD COLUMN pages bigint NOT NULL DEFAULT 0,
  ADD COLUMN pages_per_second double precision NOT NULL DEFAULT 0,
  ADD COLUMN too_coarse boolean NOT NULL DEFAULT false;
ALTER TABLE samples ADD COLUMN pages bigint NOT NULL DEFAULT 0;
)sql"},
    {12, "each_board jobs: one copy of a run per board", R"sql(
ALTER TABLE runs DROP CONSTRAINT runs_job_id_cell_index_kernel_repetition_key;
CREATE UNIQUE INDEX runs_job_cell_kernel_repetition_boards
  ON runs (job_id, cell_index, kernel, repetition, boards);
)sql"},
    {13, "perf events counted per run", R"sql(
ALTER TABLE jobs ADD COLUMN events jsonb NOT NULL DEFAULT '[]';  -- ["sw:page-faults", ...]
)sql"},
    {14, "busy boards found by index", R"sql(
CREATE INDEX runs_board_busy ON runs (board) WHERE state IN ('assigned', 'running');
)sql"},
    {15, "the background duties' lease (one controller at a time)", R"sql(
CREATE TABLE duty_leases (
  name        text PRIMARY KEY,
  holder      text NOT NULL,
  expires_at  timestamptz NOT NULL,
  acquired_at timestamptz NOT NULL
);
)sql"},
    {16, "NOTIFY faultline_work when runs are queued (every controller LISTENs)", R"sql(
CREATE FUNCTION faultline_notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM changed_runs WHERE state = 'queued') THEN
    PERFORM pg_notify('faultline_work', '');
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER runs_queued_on_insert AFTER INSERT ON runs
  REFERENCING NEW TABLE AS changed_runs FOR EACH STATEMENT
  EXECUTE FUNCTION faultline_notify_work();
CREATE TRIGGER runs_queued_on_update AFTER UPDATE ON runs
  REFERENCING NEW TABLE AS changed_runs FOR EACH STATEMENT
  EXECUTE FUNCTION faultline_notify_work();
)sql"},
    {17, "per-job medians and comparisons kept when a job finishes (/metrics reads them)", R"sql(
-- The median throughput of every series (cell, arch, board, kernel) of a finished job,
-- written in the transaction that finishes it: /metrics and the change-point scan read
-- these rows instead of aggregating every result again.
CREATE TABLE job_series_medians (
  job_id       bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  study        text NOT NULL,
  benchmark    text NOT NULL,
  cell         jsonb NOT NULL,
  arch         text NOT NULL,
  board        text NOT NULL,
  kernel       text NOT NULL,
  median       double precision NOT NULL,
  last_success timestamptz NOT NULL,
  PRIMARY KEY (job_id, cell, arch, board, kernel)
);
-- The newest finished job's median of every series: what /metrics shows (one row per series).
CREATE TABLE series_latest (
  study        text NOT NULL,
  benchmark    text NOT NULL,
  cell         jsonb NOT NULL,
  arch         text NOT NULL,
  board        text NOT NULL,
  kernel       text NOT NULL,
  job_id       bigint NOT NULL,
  median       double precision NOT NULL,
  last_success timestamptz NOT NULL,
  PRIMARY KEY (study, benchmark, cell, arch, board, kernel)
);
-- The A/B comparisons of a finished multi-kernel job, as /metrics shows them, computed once
-- by the controller holding the duty lease. finished_at is the job's at that time: a job
-- that finishes again is summarized again.
CREATE TABLE job_comparisons (
  job_id      bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  finished_at timestamptz NOT NULL,
  study       text NOT NULL,
  benchmark   text NOT NULL,
  comparisons jsonb NOT NULL
);
CREATE INDEX job_comparisons_study ON job_comparisons (study, benchmark, job_id DESC);
-- Bumped in every transaction that changes series_latest: a controller re-reads the table
-- only when it moved.
CREATE TABLE series_generation (n bigint NOT NULL);
INSERT INTO series_generation VALUES (0);

-- One row per (job, series) of the given jobs: the job's median throughput in that series
-- and its newest result. /metrics reads it live for jobs still running.
CREATE FUNCTION faultline_job_medians(job_ids bigint[])
  RETURNS TABLE (job_id bigint, study text, benchmark text, cell jsonb, arch text, board text,
                 kernel text, median double precision, last_success timestamptz)
  LANGUAGE sql STABLE AS $$
  SELECT j.id, coalesce(nullif(j.name, ''), j.benchmark), j.benchmark, r.cell,
         coalesce(b.arch, ''), coalesce(r.board, ''), r.kernel,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY res.throughput), max(res.created_at)
    FROM jobs j JOIN runs r ON r.job_id = j.id JOIN results res ON res.run_id = r.id
    LEFT JOIN boards b ON b.name = r.board
   WHERE j.id = ANY (job_ids)
   GROUP BY j.id, r.cell, coalesce(b.arch, ''), coalesce(r.board, ''), r.kernel
$$;
-- Called in the transaction that finishes (or cancels) a job: its medians, and each series
-- moves to it unless a newer job already finished there (jobs may finish out of order).
-- Idempotent: a job that finishes again is written again.
CREATE FUNCTION faultline_keep_job_series(finished_job bigint) RETURNS void
  LANGUAGE sql AS $$
  DELETE FROM job_series_medians WHERE job_id = finished_job;
  INSERT INTO job_series_medians SELECT * FROM faultline_job_medians(ARRAY[finished_job]);
  INSERT INTO series_latest AS s
  SELECT study, benchmark, cell, arch, board, kernel, job_id, median, last_success
    FROM job_series_medians WHERE job_id = finished_job
  ON CONFLICT (study, benchmark, cell, arch, board, kernel) DO UPDATE
     SET job_id = greatest(s.job_id, excluded.job_id),
         median = CASE WHEN excluded.job_id >= s.job_id THEN excluded.median ELSE s.median END,
         last_success = greatest(s.last_success, excluded.last_success);
  UPDATE series_generation SET n = n + 1;
$$;
-- The history so far.
SELECT faultline_keep_job_series(id) FROM jobs
 WHERE state IN ('succeeded', 'failed', 'cancelled') ORDER BY id;
)sql"},
    {18, "one row of per-second samples per result (arrays), samples a view", R"sql(
-- A result's per-second samples in one row: the seconds are 1..n by the stored invariant
-- (core ResultShapeProblem), so the arrays' positions are the seconds. One row and one
-- foreign-key check per result instead of per sample: COPY of a fleet's results went from
-- ~230,000 to over a million samples/s, and a sample takes 16 bytes before compression
-- instead of ~88 as a row with its key (README, "Fleet simulation").
CREATE TABLE run_samples (
  run_id bigint PRIMARY KEY REFERENCES results (run_id) ON DELETE CASCADE,
  rounds bigint[] NOT NULL,
  pages  bigint[] NOT NULL,
  CHECK (cardinality(rounds) = cardinality(pages))
);
-- lz4 where the server has it: pglz compressing the arrays took 3x the rest of the COPY
-- (1.1M random samples: 1.44 s with pglz, 0.44 s with lz4, 0.39 s uncompressed; lz4 kept
-- them in 9.8 MB, pglz 8.0 MB). Also the results' counters and environment.
DO $$
BEGIN
  ALTER TABLE run_samples ALTER COLUMN rounds SET COMPRESSION lz4,
                          ALTER COLUMN pages SET COMPRESSION lz4;
  ALTER TABLE results ALTER COLUMN counters SET COMPRESSION lz4,
                      ALTER COLUMN environment SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'no lz4 in this server: samples compressed with pglz';
END $$;
INSERT INTO run_samples
SELECT run_id, array_agg(rounds ORDER BY second), array_agg(pages ORDER BY second)
  FROM samples GROUP BY run_id;
DROP TABLE samples;
-- The rows as they were: one per (run, second).
CREATE VIEW samples AS
SELECT s.run_id, u.second::integer AS second, u.rounds, u.pages
  FROM run_samples s, unnest(s.rounds, s.pages) WITH ORDINALITY AS u(rounds, pages, second);
)sql"},
    {19, "drop runs_job: runs_job_cell_kernel_repetition_boards leads with job_id", R"sql(
-- Every change of a run's state writes a new row version into each of the table's indexes;
-- this one answered nothing the unique index on (job_id, ...) does not.
DROP INDEX runs_job;
)sql"},
    {20, "a finished job's run counts kept on the job (/metrics counts runs by state)", R"sql(
-- A job's runs no longer change state once the job is final, so their counts are kept on it
-- when it finishes, by the function every finishing path runs. /metrics then counts only
-- the open runs (by their partial indexes) and the runs of live jobs: before, each scrape
-- read the whole runs table (20-28 ms at 120,000 runs, growing with the history).
ALTER TABLE jobs ADD COLUMN runs_succeeded integer, ADD COLUMN runs_failed integer,
                 ADD COLUMN runs_cancelled integer;
CREATE OR REPLACE FUNCTION faultline_keep_job_series(finished_job bigint) RETURNS void
  LANGUAGE sql AS $$
  DELETE FROM job_series_medians WHERE job_id = finished_job;
  INSERT INTO job_series_medians SELECT * FROM faultline_job_medians(ARRAY[finished_job]);
  INSERT INTO series_latest AS s
  SELECT study, benchmark, cell, arch, board, kernel, job_id, median, last_success
    FROM job_series_medians WHERE job_id = finished_job
  ON CONFLICT (study, benchmark, cell, arch, board, kernel) DO UPDATE
     SET job_id = greatest(s.job_id, excluded.job_id),
         median = CASE WHEN excluded.job_id >= s.job_id THEN excluded.median ELSE s.median END,
         last_success = greatest(s.last_success, excluded.last_success);
  UPDATE series_generation SET n = n + 1;
  UPDATE jobs j SET runs_succeeded = c.succeeded, runs_failed = c.failed,
                    runs_cancelled = c.cancelled
    FROM (SELECT count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                 count(*) FILTER (WHERE state = 'failed') AS failed,
                 count(*) FILTER (WHERE state = 'cancelled') AS cancelled
            FROM runs WHERE job_id = finished_job) c
   WHERE j.id = finished_job;
$$;
UPDATE jobs j SET runs_succeeded = coalesce(c.succeeded, 0), runs_failed = coalesce(c.failed, 0),
                  runs_cancelled = coalesce(c.cancelled, 0)
  FROM jobs f LEFT JOIN (
         SELECT job_id, count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
                count(*) FILTER (WHERE state = 'failed') AS failed,
                count(*) FILTER (WHERE state = 'cancelled') AS cancelled
           FROM runs GROUP BY job_id) c ON c.job_id = f.id
 WHERE j.id = f.id AND f.state IN ('succeeded', 'failed', 'cancelled');
)sql"},
};

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration>* const migrations = [] {
    auto* out = new std::vector<Migration>();
    for (const MigrationText& m : kMigrations) out->push_back({m.version, m.name, m.sql});
    AppendMigrationsFrom21(out);
    return out;
  }();
  return *migrations;
}

}  // namespace faultline::controller
