#pragma once
// The controller's stored records: what the store interfaces (interfaces.h) take and
// return. Plain structs; no libpqxx here.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/controller/core/board_health.h"
#include "services/controller/core/domain.h"
#include "services/controller/core/lifecycle.h"
#include "services/controller/core/phases.h"

namespace faultline::controller {

struct RunCounts {
  uint32_t total = 0, queued = 0, assigned = 0, running = 0, succeeded = 0, failed = 0,
           cancelled = 0;
};

struct JobRecord {
  int64_t id = 0;
  std::string name;
  std::string benchmark;
  std::string spec_json;
  std::vector<std::string> matrix_keys;
  JobState state = JobState::kQueued;
  RunCounts counts;
  int64_t created_at_ms = 0;
  int64_t finished_at_ms = 0;  // 0: not finished
  std::string baseline;
  double alpha = 0.01;
  double min_effect = 0.03;
  uint64_t shuffle_seed = 0;
};

struct RunRecord {
  int64_t id = 0;
  int64_t job_id = 0;
  int cell_index = 0;
  std::map<std::string, std::string> cell;
  std::string kernel;
  int repetition = 0;
  RunState state = RunState::kQueued;
  std::string board;
  std::string failure_reason;
  int64_t failed_build = 0;  // the build of its kernel whose failure failed it (0: none)
  int attempt = 0;
  bool has_result = false;
  double throughput = 0;
  double duration_seconds = 0;
  uint64_t rounds = 0;
  bool too_coarse = false;
  double pages_per_second = 0;
  std::string environment_json = "{}";
  std::string counters_json = "{}";  // the result's counters (name -> value)
  std::string folded_stacks;         // a profiled run's call stacks ("" : none)
  int64_t finished_ms = 0;           // when its result was stored (0: no result)
};

struct BoardRecord {
  BoardSummary summary;
  std::string facts_json;
  std::string previous_boot_log;  // hello: the failed boot's console tail, if the board kept it
  int64_t last_seen_ms = 0;
  bool online = false;
  int64_t current_run_id = 0;
};

struct Assignment {
  int64_t run_id = 0;
  std::string attempt_id;
  int64_t job_id = 0;
  std::string benchmark;
  std::string kernel;
  uint32_t duration_seconds = 0;
  std::map<std::string, std::string> params;
  MemcgLimitsBytes memcg;
  uint32_t lease_seconds = 0;
  uint64_t warmup_ms = 0;          // params.warmup, parsed at validation
  std::string run_options = "{}";  // the job's RunOptions as JSON (jobs.run_options)
};

// The board must boot another of its kernels before it can take the next run.
struct KernelSwitchOrder {
  std::string label;
  std::string reason;
  uint32_t deadline_seconds = 0;
  // A kernel a job brought: the agent fetches this image and expects this release.
  struct Built {
    int64_t build_id = 0;
    std::string image_sha256;
    uint64_t image_bytes = 0;
    std::string release;
    std::string location = "db";  // of the image: db (FetchArtifact) or s3 (by URL)
  };
  std::optional<Built> built;
};

// One kernel build (kbuild on a builder) as the controller tracks it.
// Which patch of a series did not apply to its tree, and where, as git said (the API's
// ApplyFailure; kbuild reads it from git's output).
struct ApplyFailureRecord {
  int patch = 0;  // 1-based within the series
  std::string subject, source, file, hunk, reason;
};

struct BuildRecord {
  int64_t id = 0;
  std::string label;
  std::string arch;
  BuildState state = BuildState::kQueued;
  std::string builder;
  std::string attempt_id;
  std::string source_json;  // v1.KernelSource as JSON
  std::string key, release, base_commit, tree_hash, config_sha256, compiler;
  std::vector<std::string> series;
  std::string image_sha256;
  uint64_t image_bytes = 0;
  double build_seconds = 0;
  bool cached = false;
  std::string error;
  uint32_t attempts = 0;
  uint32_t lease_seconds = 0;
  int64_t created_ms = 0, finished_ms = 0;
  struct BadBoot {
    std::string board, reason, console;
    int64_t at_ms = 0;
  };
  std::vector<BadBoot> bad_boots;                   // boards of its arch it did not boot on
  std::optional<ApplyFailureRecord> apply_failure;  // failed: a series did not apply
};

// What a board should do next: a run, a kernel switch, or (neither) wait.
struct WorkOrder {
  std::optional<Assignment> run;
  std::optional<KernelSwitchOrder> kernel_switch;
};

struct ResultRecord {
  double throughput = 0;
  uint64_t rounds = 0;
  double duration_seconds = 0;
  double warmup_seconds = 0;
  std::vector<std::pair<uint32_t, uint64_t>> samples;  // (second, rounds)
  std::vector<uint64_t> sample_pages;  // pages per sample, parallel to samples (may be empty)
  uint64_t pages = 0;
  double pages_per_second = 0;
  bool too_coarse = false;
  std::string counters_json = "{}";
  std::string environment_json = "{}";
  std::string folded_stacks;  // "root;...;leaf COUNT" a line ("" : not profiled)
};

// One run's outcome as its board uploads it (AgentService.ReportResult).
struct ResultUpload {
  std::string board;
  int64_t run_id = 0;
  std::string attempt_id;
  bool succeeded = false;
  std::string failure_reason;
  ResultRecord result;
};

// The latest median throughput of one series (study, benchmark, cell, board, kernel).
struct SeriesPoint {
  std::string study;
  std::string benchmark;
  std::map<std::string, std::string> cell;
  std::string arch;
  std::string board;
  std::string kernel;
  double median = 0;
  int64_t last_success_ms = 0;
};

// One series' history: per-job medians in job order.
struct SeriesHistory {
  SeriesPoint key;  // median/last_success unused
  std::vector<int64_t> job_ids;
  std::vector<double> medians;
};

struct ChangePointRecord {
  int64_t id = 0;
  std::string study, benchmark, config, arch, board, kernel;
  int64_t job_id = 0;           // first job at the new level
  int64_t previous_job_id = 0;  // last job at the old level (0: not known)
  double mean_before = 0, mean_after = 0, relative_change = 0, p_value = 1;
  ChangePointState state = ChangePointState::kOpen;
  int64_t detected_at_ms = 0;
};

// A counter that changed significantly under a comparison (beyond the study's min_effect).
struct CounterChange {
  std::string name;
  std::string unit;
  double ratio = 1, ci_low = 1, ci_high = 1;
};

// One A/B comparison of a finished job as /metrics shows it.
struct ComparisonSummary {
  std::map<std::string, std::string> cell;
  std::string board, baseline, candidate;
  double ratio = 1, ci_low = 1, ci_high = 1, p_value = 1, q_value = 1;
  std::string verdict;
  int64_t n_baseline = 0, n_candidate = 0;
  std::vector<CounterChange> counters;
};

// A finished multi-kernel job's comparisons, computed once after it finished.
struct JobComparisons {
  int64_t job_id = 0;
  int64_t finished_ms = 0;  // the job's finished_at when summarized
  std::string study;
  std::string benchmark;
  std::vector<ComparisonSummary> comparisons;
};

// A finished job as of one finish (a job whose runs are retried finishes again: a new
// version).
struct JobVersion {
  int64_t job_id = 0;
  int64_t finished_ms = 0;
  bool operator==(const JobVersion&) const = default;
};

struct MetricsSnapshot {
  std::vector<SeriesPoint> series;
  // The same version means the same series (no job was running, none finished since);
  // -1: no version (jobs are running: their series change with every result).
  int64_t series_version = -1;
  std::map<std::string, int64_t> runs_by_state;
  std::map<std::string, int64_t> jobs_by_state;
  // The latest summarized multi-kernel job per (study, benchmark): LoadComparisons has its
  // comparisons.
  std::vector<JobVersion> comparison_jobs;
  std::vector<ChangePointRecord> open_change_points;  // latest open one per series
  std::map<std::string, int64_t> change_points_by_state;
  // The series robot: posted series by what it decided (robot_series.state), and the patch
  // mails it has read and kept.
  std::map<std::string, int64_t> robot_series_by_state;
  int64_t robot_mails = 0;
  std::map<std::string, int64_t> robot_skipped_mails_by_reason;  // the reason's first words
  std::map<std::string, int64_t> robot_replies_by_state;         // robot_replies.state
  std::map<std::string, int64_t> robot_checks_by_status;         // robot_checks.status
  std::map<std::string, int64_t> robot_builds_by_state;          // the robot's jobs' kernel builds
  struct ScheduleHealth {
    std::string name;
    std::string cron;
    int64_t last_success_ms = 0;  // newest succeeded job of the schedule, else its creation
  };
  std::vector<ScheduleHealth> schedules;
  // Kernels jobs brought, built (or fetched) and done: the newest 500, what each one is.
  struct BuiltKernel {
    std::string label, arch, release, base_commit, ref, config_sha256, compiler, series, image_url,
        image_sha256;
    int patches = 0;
    int bad_boots = 0;
  };
  std::vector<BuiltKernel> built_kernels;
};

struct ScheduleRecord {
  int64_t id = 0;
  std::string name;
  std::string cron;
  std::string spec_json;
  int64_t next_run_ms = 0;
  int64_t last_run_ms = 0;
  int64_t last_job_id = 0;
  std::string last_error;
};

// A bisection (faultline bisect): its whole document (v1.Bisection as JSON: the request,
// the engine's steps and measurements) and where the driver is.
struct BisectionRecord {
  int64_t id = 0;
  BisectionState state = BisectionState::kRunning;
  std::string doc_json;
  int64_t current_job = 0;  // the job measuring the open step (0: none)
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

// The series robot's record of one version of a posted series (robot/robot.h).
struct SeriesRecord {
  std::string id;           // its cover letter's Message-ID, else patch 1's
  std::string thread_root;  // where its mails are kept (RobotStore::ThreadMails)
  int version = 1;
  std::string title;
  std::string from;  // the author, as written
  SeriesState state = SeriesState::kChosen;
  std::string reason;    // why chosen or skipped, why failed
  std::string previous;  // the earlier version it is also compared with ("" : none)
  std::string base;      // the commit (or ref) it was applied to
  std::vector<int64_t> jobs;
  // Its patches' Message-IDs, 1..n (the checks' patches); empty for a series decided before
  // they were stored.
  std::vector<std::string> patch_ids;
  int64_t updated_ms = 0;
};

// One reply of the robot in a series' thread (core/lifecycle.h: ReplyState).
struct ReplyRecord {
  std::string series_id;
  ReplyKind kind = ReplyKind::kResults;
  std::string message_id;  // the mail's, without brackets
  ReplyState state = ReplyState::kQueued;
  std::vector<std::string> recipients;
  std::string text;  // the whole mail
  int64_t sent_ms = 0;
};

// A patchwork check the robot owes one patch (core/lifecycle.h: CheckStatus): "pending"
// while its series' jobs run, then the verdict. Retried until patchwork takes it.
struct CheckRecord {
  std::string series_id;
  std::string patch_message_id;          // the patch mail's Message-ID (patchwork finds it by that)
  CheckKind kind = CheckKind::kPending;  // one of each per patch, ever
  CheckState state = CheckState::kPending;  // what it says (patchwork's vocabulary)
  std::string description;
  CheckStatus status = CheckStatus::kQueued;
  int attempts = 0;
  std::string error;    // the last refusal
  int64_t next_ms = 0;  // not tried again before
};

// A patch mail the robot keeps until its series is decided.
struct KeptMail {
  std::string message_id;  // a skipped mail without one: the archive's commit
  std::string thread_root;
  int version = 1;
  std::string raw;
  // Why the robot does not take it ("" : kept for its series). A skipped mail is kept
  // apart (robot_skipped_mails), its bytes with the reason.
  std::string skip_reason;
};

// An API credential. Only the SHA-256 of the token is stored.
struct TokenRecord {
  std::string name;
  TokenRole role = TokenRole::kUser;
  std::string board;  // agent tokens: the board they act for
  int64_t created_at_ms = 0;
  bool revoked = false;
};

struct StoreOptions {
  std::string database_url;
  int pool_size = 4;
  // A run's lease covers warm-up + duration + this grace; heartbeats renew it.
  int lease_grace_seconds = 120;
  int max_attempts = 3;
  int board_offline_after_seconds = 60;
  // A run whose lease lapsed waits before it is offered again: base · 2^(attempt − 1),
  // capped, times a uniform jitter in [0.5, 1].
  int requeue_backoff_seconds = 30;
  int requeue_backoff_cap_seconds = 600;
  // A board ordered to switch kernels must say hello from the new kernel within this.
  int kernel_switch_deadline_seconds = 900;

  RequeuePolicy requeue() const {
    return {max_attempts, static_cast<double>(requeue_backoff_seconds),
            static_cast<double>(requeue_backoff_cap_seconds)};
  }
};

}  // namespace faultline::controller
