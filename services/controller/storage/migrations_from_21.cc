// Migrations 21 on (kernels that jobs bring, bisections, the series robot): the schema's
// history continued from migrations.cc, which hands them out in Migrations().
#include "services/controller/storage/migrations.h"

namespace faultline::controller {
namespace {

constexpr MigrationText kMigrations[] = {
    {21, "kernels jobs bring: builds, their artifacts (content-addressed), builders", R"sql(
-- One row per (label, arch): the label is unique to the kernel's source (tree, ref, config,
-- series), so jobs asking for the same kernel share its build.
CREATE TABLE builds (
  id            bigserial PRIMARY KEY,
  label         text NOT NULL,
  arch          text NOT NULL,
  source        jsonb NOT NULL,
  state         text NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'building', 'done', 'failed')),
  builder       text,
  attempt_id    text,
  attempts      integer NOT NULL DEFAULT 0,
  lease_expires timestamptz,
  not_before    timestamptz,
  outcome       jsonb,            -- key, release, base_commit, tree_hash, config_sha256, ...
  image_sha256  text,
  error         text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  finished_at   timestamptz,
  UNIQUE (label, arch)
);
CREATE INDEX builds_open ON builds (id) WHERE state IN ('queued', 'building');
CREATE TABLE job_builds (
  job_id   bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  build_id bigint NOT NULL REFERENCES builds (id),
  PRIMARY KEY (job_id, build_id)
);
CREATE INDEX job_builds_build ON job_builds (build_id);
-- Images by sha256, in chunks: every controller replica serves them from here.
CREATE TABLE artifacts (
  sha256     text PRIMARY KEY,
  bytes      bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE artifact_chunks (
  sha256 text NOT NULL REFERENCES artifacts (sha256) ON DELETE CASCADE,
  offset_bytes bigint NOT NULL,
  data   bytea NOT NULL,
  PRIMARY KEY (sha256, offset_bytes)
);
ALTER TABLE boards ADD COLUMN boots_built_kernels boolean NOT NULL DEFAULT false,
                   ADD COLUMN build_arches jsonb NOT NULL DEFAULT '[]';
)sql"},
    {22, "built kernels that did not boot on a board; artifacts in an object store", R"sql(
-- A switch to a built kernel that lapsed or came back on another kernel: the board no
-- longer offers that kernel (pg::MarkBadBoot). `console`: the failed boot's console tail as
-- the board kept it (pstore), sent with its next hello.
CREATE TABLE bad_boots (
  label   text NOT NULL,
  board   text NOT NULL,
  reason  text NOT NULL,
  console text NOT NULL DEFAULT '',
  at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (label, board)
);
-- Where an image's bytes are: 'db' (artifact_chunks) or 's3' (an object store; boards
-- fetch it by a presigned URL).
ALTER TABLE artifacts ADD COLUMN location text NOT NULL DEFAULT 'db'
  CHECK (location IN ('db', 's3'));
)sql"},
    {23, "jobs that trace mmap_lock waits", R"sql(
ALTER TABLE jobs ADD COLUMN mmap_lock_waits boolean NOT NULL DEFAULT false;
)sql"},
    {24, "bisections: the request, the engine's steps and the job measuring now", R"sql(
CREATE TABLE bisections (
  id          bigserial PRIMARY KEY,
  request_id  text UNIQUE,
  state       text NOT NULL DEFAULT 'running'
              CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
  doc         jsonb NOT NULL,
  current_job bigint REFERENCES jobs (id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bisections_running ON bisections (id) WHERE state = 'running';
)sql"},
    {25, "schedules that follow a branch: one label per slot, one series", R"sql(
-- A schedule's kernel on a branch is built anew at every slot under its own label,
-- "LABEL@<source hash>+<slot>" (orchestration/kernel_sources.h); its series is the label
-- without "+<slot>", so the nights form one history.
CREATE OR REPLACE FUNCTION faultline_series_kernel(label text) RETURNS text
  LANGUAGE sql IMMUTABLE AS $$
  SELECT regexp_replace(label, '^(.+@[0-9a-f]{12})\+[0-9]{8}T[0-9]{4}$', '\1')
$$;
CREATE OR REPLACE FUNCTION faultline_job_medians(job_ids bigint[])
  RETURNS TABLE (job_id bigint, study text, benchmark text, cell jsonb, arch text, board text,
                 kernel text, median double precision, last_success timestamptz)
  LANGUAGE sql STABLE AS $$
  SELECT j.id, coalesce(nullif(j.name, ''), j.benchmark), j.benchmark, r.cell,
         coalesce(b.arch, ''), coalesce(r.board, ''), faultline_series_kernel(r.kernel),
         percentile_cont(0.5) WITHIN GROUP (ORDER BY res.throughput), max(res.created_at)
    FROM jobs j JOIN runs r ON r.job_id = j.id JOIN results res ON res.run_id = r.id
    LEFT JOIN boards b ON b.name = r.board
   WHERE j.id = ANY (job_ids)
   GROUP BY j.id, r.cell, coalesce(b.arch, ''), coalesce(r.board, ''),
            faultline_series_kernel(r.kernel)
$$;
-- A change point names the last job at the old level too: a bisection starts between them.
ALTER TABLE change_points ADD COLUMN previous_job_id bigint REFERENCES jobs (id)
  ON DELETE SET NULL;
)sql"},
    {26, "what a board may boot, written once", R"sql(
-- The labels a board offers to boot: those its hello announced and, when it boots built
-- kernels, every label built for its arch; less those that did not boot on it (bad_boots).
-- boards.bootable_kernel_labels holds this function's value, refreshed by whatever changes
-- an input (a hello, a finished build, a bad boot); the announced ones are kept apart.
ALTER TABLE boards ADD COLUMN announced_bootable_labels jsonb NOT NULL DEFAULT '[]';
UPDATE boards SET announced_bootable_labels = bootable_kernel_labels;
CREATE FUNCTION faultline_bootable_labels(board_name text) RETURNS jsonb
  LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(x.label ORDER BY x.src, x.ord, x.label), '[]'::jsonb)
    FROM (SELECT a.label, 0 AS src, a.ord
            FROM boards b,
                 jsonb_array_elements_text(b.announced_bootable_labels) WITH ORDINALITY
                   AS a(label, ord)
           WHERE b.name = board_name
          UNION ALL
          SELECT DISTINCT bu.label, 1, 0
            FROM boards b JOIN builds bu ON bu.arch = b.arch AND bu.state = 'done'
           WHERE b.name = board_name AND b.boots_built_kernels
             AND NOT b.announced_bootable_labels ? bu.label) x
   WHERE NOT EXISTS (SELECT 1 FROM bad_boots bb
                      WHERE bb.label = x.label AND bb.board = board_name)
$$;
)sql"},
    {27, "the series robot: where it is in each archive, the patch mails, the series", R"sql(
CREATE TABLE robot_cursors (
  archive text NOT NULL,
  epoch int NOT NULL,
  last_commit text NOT NULL,
  PRIMARY KEY (archive, epoch)
);
-- Patch mails ([PATCH ...], not replies), kept until their series is decided.
CREATE TABLE robot_mails (
  message_id text PRIMARY KEY,
  thread_root text NOT NULL,
  version int NOT NULL,
  raw text NOT NULL,
  seq bigserial,
  kept_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX robot_mails_thread ON robot_mails (thread_root, version, seq);
CREATE TABLE robot_series (
  id text PRIMARY KEY,
  thread_root text NOT NULL,
  version int NOT NULL,
  title text NOT NULL DEFAULT '',
  author text NOT NULL DEFAULT '',
  state text NOT NULL CHECK (state IN ('skipped', 'chosen', 'submitted', 'measured',
                                       'replied', 'failed')),
  reason text NOT NULL DEFAULT '',
  previous text NOT NULL DEFAULT '',
  base text NOT NULL DEFAULT '',
  jobs jsonb NOT NULL DEFAULT '[]',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX robot_series_state ON robot_series (state, created_at);
)sql"},
    {28, "the series robot's outbox: one reply per series and kind, ever", R"sql(
CREATE TABLE robot_replies (
  series_id text NOT NULL REFERENCES robot_series (id),
  kind text NOT NULL,
  message_id text NOT NULL UNIQUE,
  state text NOT NULL CHECK (state IN ('queued', 'sending', 'sent', 'uncertain')),
  recipients jsonb NOT NULL,
  text text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  sent_at timestamptz,
  PRIMARY KEY (series_id, kind)
);
CREATE INDEX robot_replies_state ON robot_replies (state, created_at);
)sql"},
    {29, "the robot's patchwork checks go through an outbox; a series may not apply", R"sql(
CREATE TABLE robot_checks (
  series_id text NOT NULL REFERENCES robot_series (id),
  patch_message_id text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('pending', 'verdict')),
  state text NOT NULL,
  description text NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'posted', 'superseded', 'failed')),
  attempts int NOT NULL DEFAULT 0,
  error text NOT NULL DEFAULT '',
  next_ms bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  seq bigserial,
  PRIMARY KEY (patch_message_id, kind)
);
CREATE INDEX robot_checks_due ON robot_checks (status, next_ms);
ALTER TABLE robot_series DROP CONSTRAINT robot_series_state_check;
ALTER TABLE robot_series ADD CONSTRAINT robot_series_state_check
  CHECK (state IN ('skipped', 'chosen', 'submitted', 'measured', 'replied', 'failed',
                   'does_not_apply'));
)sql"},
    {30, "the robot's outbox also holds mails about bisections' culprits", R"sql(
-- series_id: the series answered, or "bisection/<id>" for a culprit's author.
ALTER TABLE robot_replies DROP CONSTRAINT robot_replies_series_id_fkey;
)sql"},
    {31, "jobs: call-stack sampling per run (JobSpec.profile)", R"sql(
ALTER TABLE jobs ADD COLUMN profile_hz integer NOT NULL DEFAULT 0 CHECK (profile_hz >= 0);
ALTER TABLE jobs ADD COLUMN profile_pmu boolean NOT NULL DEFAULT false;
)sql"},
    {32, "the robot keeps a mail as the bytes it came as (a stranger's may be no UTF-8)", R"sql(
ALTER TABLE robot_mails ALTER COLUMN raw TYPE bytea USING convert_to(raw, 'UTF8');
-- Mails the robot read and could not take (unreadable, too large, a 10,000-patch "series"):
-- kept as bytes with the reason, counted in /metrics (faultline_robot_mails_skipped).
CREATE TABLE robot_skipped_mails (
  archive text NOT NULL,
  message_id text NOT NULL,
  reason text NOT NULL,
  raw bytea NOT NULL,
  skipped_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (archive, message_id)
);
)sql"},
    {33, "the robot stores each chosen series assembled: its mbox and its patches' ids", R"sql(
-- Assembled once by the robot's intake; the rooms after it read these instead of the raw
-- mails (a series decided before: mbox NULL, patch_ids empty, assembled again from them).
ALTER TABLE robot_series ADD COLUMN mbox bytea;
ALTER TABLE robot_series ADD COLUMN patch_ids jsonb NOT NULL DEFAULT '[]'::jsonb;
)sql"},
    {34, "a profiled run's call stacks are a result of their own, not an environment fact", R"sql(
-- Agents before WorkloadResult.folded_stacks sent them as the environment's profile.folded:
-- moved here, so no report lists them among the environment's differences.
ALTER TABLE results ADD COLUMN folded_stacks text NOT NULL DEFAULT '';
ALTER TABLE results ALTER COLUMN folded_stacks SET COMPRESSION lz4;
UPDATE results SET folded_stacks = environment->>'profile.folded',
                   environment = environment - 'profile.folded'
 WHERE environment ? 'profile.folded';
)sql"},
    {35, "a job's run options are one value (RunOptions as JSON), stored once", R"sql(
-- What each run measures besides throughput (events, mmap_lock waits, profile) as the
-- controller checked it. The older columns stay, written beside it, for a release.
ALTER TABLE jobs ADD COLUMN run_options jsonb NOT NULL DEFAULT '{}'::jsonb;
UPDATE jobs SET run_options = jsonb_strip_nulls(jsonb_build_object(
    'events', CASE WHEN jsonb_array_length(events) > 0 THEN events END,
    'mmap_lock_waits', CASE WHEN mmap_lock_waits THEN true END,
    'profile', CASE WHEN profile_hz > 0
                    THEN jsonb_build_object('frequency_hz', profile_hz, 'pmu', profile_pmu) END))
 WHERE jsonb_array_length(events) > 0 OR mmap_lock_waits OR profile_hz > 0;
)sql"},
    {36, "a run failed by its kernel's build says which build", R"sql(
-- Set with the failure reason when a build fails the queued runs of its label, so a
-- bisection knows a commit that did not build without reading the reason's words.
ALTER TABLE runs ADD COLUMN failed_build bigint;
)sql"},
    {37, "where a job's time went: builds' claims, kernel switches, phases per arch", R"sql(
-- When the attempt that ends a build was claimed (its queue time ends there).
ALTER TABLE builds ADD COLUMN started_at timestamptz;
-- Every kernel switch a board was ordered, for the job whose run asked for it, until the
-- hello from the new kernel (or its lapse, or an order that never reached the board).
CREATE TABLE kernel_switches (
  id         bigserial PRIMARY KEY,
  board      text NOT NULL,
  arch       text NOT NULL,
  label      text NOT NULL,
  job_id     bigint REFERENCES jobs (id) ON DELETE CASCADE,
  ordered_at timestamptz NOT NULL DEFAULT now(),
  ended_at   timestamptz,
  outcome    text CHECK (outcome IN ('booted', 'other-kernel', 'lapsed', 'abandoned'))
);
CREATE INDEX kernel_switches_job ON kernel_switches (job_id);
CREATE INDEX kernel_switches_open ON kernel_switches (board) WHERE ended_at IS NULL;
-- A finished job's phases per arch ({"x86_64": {"build_queue": s, ...}}), recorded once by
-- the controller holding the duty lease (and observed into /metrics there).
ALTER TABLE jobs ADD COLUMN phases jsonb;
CREATE INDEX jobs_phases_pending ON jobs (id) WHERE phases IS NULL AND finished_at IS NOT NULL;
-- Jobs that finished before have no timeline: none of them is observed.
UPDATE jobs SET phases = '{}'::jsonb WHERE finished_at IS NOT NULL;
)sql"},
};

}  // namespace

void AppendMigrationsFrom21(std::vector<Migration>* out) {
  for (const MigrationText& m : kMigrations) out->push_back({m.version, m.name, m.sql});
}

}  // namespace faultline::controller
