#pragma once
// faultline-fleetsim (tests/bench/fleetsim.cc): the simulated users (submit, watch, report) and the
// agent tokens they mint.
#include "tests/bench/fleetsim/support.h"

namespace faultline::fleetsim {

// ---- simulated users ----

struct Users {
  Options opt;
  Fleet* fleet;
  std::string token;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::JobService::Stub> stub;
  TimePoint hard_deadline;
  std::atomic<bool> work_done{false};
  std::atomic<int> finished{0};  // user threads done
  std::mutex mu;
  std::set<grpc::ClientContext*> live;  // cancelled at the deadline
  std::vector<double> report_ms;
  std::vector<int64_t> job_ids;

  void Prepare(grpc::ClientContext* ctx) {
    const auto left = hard_deadline - Clock::now();
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  }
  void Track(grpc::ClientContext* ctx, bool add) {
    std::lock_guard lock(mu);
    if (add) {
      live.insert(ctx);
    } else {
      live.erase(ctx);
    }
  }
  void CancelAll() {
    std::lock_guard lock(mu);
    for (auto* ctx : live) ctx->TryCancel();
  }

  // `runs` is a multiple of the number of kernels. A job has at most 1,000 repetitions: more
  // runs are spread over matrix cells (threads 1..c), rounded up to a multiple of cells x
  // kernels. Returns the spec; *planned is the number of runs it expands to.
  v1::JobSpec Spec(int user, int job, uint32_t runs, uint32_t* planned = nullptr) const {
    const auto k = static_cast<uint32_t>(opt.kernels.size());
    const uint32_t cells = (runs + k * 1000 - 1) / (k * 1000);
    const uint32_t repetitions = (runs + k * cells - 1) / (k * cells);
    if (planned != nullptr) *planned = cells * k * repetitions;
    v1::JobSpec spec;
    spec.set_name("fleetsim-u" + std::to_string(user) + "-j" + std::to_string(job));
    spec.set_benchmark("filemap-thrash");
    spec.set_duration(std::to_string(opt.run_seconds) + "s");
    spec.set_repetitions(repetitions);
    for (const auto& label : opt.kernels) spec.add_kernels(label);
    spec.mutable_memcg()->set_memory_max("128M");
    spec.mutable_memcg()->set_swap_max("0");
    (*spec.mutable_params())["file_size"] = "2M";
    if (cells > 1) {
      auto& threads = (*spec.mutable_matrix())["threads"];
      for (uint32_t c = 1; c <= cells; ++c) threads.add_values(std::to_string(c));
    } else {
      (*spec.mutable_params())["threads"] = "2";
    }
    spec.set_block_size(1);
    return spec;
  }

  // One user: submits its jobs, watches each to its end, reads its report and checks the
  // runs the controller recorded.
  void User(int user, const std::vector<uint32_t>& jobs) {
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (fleet->stopping) return;
      grpc::ClientContext ctx;
      Prepare(&ctx);
      v1::SubmitJobRequest req;
      *req.mutable_spec() = Spec(user, static_cast<int>(j), jobs[j]);
      req.set_request_id("fleetsim-" + std::to_string(user) + "-" + std::to_string(j) + "-" +
                         std::to_string(std::random_device{}()));
      v1::SubmitJobResponse resp;
      JobSeen seen;
      seen.submit_started = Clock::now();
      grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
      seen.submit_returned = Clock::now();
      fleet->stats.Rpc("SubmitJob", s, seen.submit_returned - seen.submit_started, false);
      if (!s.ok()) {
        fleet->stats.Problem("SubmitJob: " + CodeName(s.error_code()) + ": " + s.error_message());
        continue;
      }
      seen.runs = resp.runs();
      fleet->stats.JobSubmitted(resp.job_id(), seen);
      {
        std::lock_guard lock(mu);
        job_ids.push_back(resp.job_id());
      }
      Watch(resp.job_id());
    }
  }

  void Watch(int64_t job_id) {
    v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
    grpc::Status s;
    // A stream cut by a controller that went away is opened again (the channel fails over
    // to the next controller when given several).
    for (int attempt = 0; attempt < 10; ++attempt) {
      grpc::ClientContext ctx;
      Prepare(&ctx);
      Track(&ctx, true);
      v1::WatchJobRequest req;
      req.set_job_id(job_id);
      const TimePoint started = Clock::now();
      auto reader = stub->WatchJob(&ctx, req);
      v1::JobProgress p;
      while (reader->Read(&p)) {
        fleet->stats.WatchEvent();
        last = p.state();
      }
      s = reader->Finish();
      Track(&ctx, false);
      fleet->stats.Rpc("WatchJob", s, Clock::now() - started, fleet->stopping);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE || fleet->stopping) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // as the CLI's retry
    }
    if (!s.ok()) {
      if (!fleet->stopping) {
        fleet->stats.Problem("WatchJob " + std::to_string(job_id) + ": " +
                             CodeName(s.error_code()) + ": " + s.error_message());
      }
      return;
    }
    fleet->stats.JobFinal(job_id, v1::JobState_Name(last));
    Read(job_id);
    Verify(job_id);
  }

  void Read(int64_t job_id) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GetReportRequest req;
    req.set_job_id(job_id);
    req.add_run_counters("vmstat.pgfault");
    req.add_run_counters("vmstat.pgmajfault");
    v1::GetReportResponse resp;
    const TimePoint started = Clock::now();
    grpc::Status s = stub->GetReport(&ctx, req, &resp);
    const auto took = Clock::now() - started;
    fleet->stats.Rpc("GetReport", s, took, fleet->stopping);
    if (s.ok()) {
      std::lock_guard lock(mu);
      report_ms.push_back(Ms(took));
    }
  }

  // The controller's record of the job: every run succeeded on its first attempt.
  void Verify(int64_t job_id) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GetJobRequest req;
    req.set_job_id(job_id);
    req.set_include_runs(true);
    v1::GetJobResponse resp;
    const TimePoint started = Clock::now();
    grpc::Status s = stub->GetJob(&ctx, req, &resp);
    fleet->stats.Rpc("GetJob", s, Clock::now() - started, fleet->stopping);
    if (!s.ok()) {
      fleet->stats.Problem("GetJob " + std::to_string(job_id) + ": " + s.error_message());
      return;
    }
    for (const auto& r : resp.runs()) {
      if (r.state() != v1::RUN_STATE_SUCCEEDED) {
        fleet->stats.Problem("run " + std::to_string(r.id()) + " ended " +
                             v1::RunState_Name(r.state()) + " " + r.failure_reason());
      } else if (r.attempt() != 1 && !opt.allow_retries) {
        fleet->stats.Problem("run " + std::to_string(r.id()) + " took " +
                             std::to_string(r.attempt()) + " attempts");
      }
    }
  }

  // A reader: lists jobs and reads the newest one's report, once a second, until the work
  // is done.
  void Reader() {
    while (!work_done && !fleet->stopping) {
      int64_t latest = 0;
      {
        std::lock_guard lock(mu);
        if (!job_ids.empty()) latest = job_ids.back();
      }
      {
        grpc::ClientContext ctx;
        Prepare(&ctx);
        v1::ListJobsRequest req;
        req.set_limit(20);
        v1::ListJobsResponse resp;
        const TimePoint started = Clock::now();
        grpc::Status s = stub->ListJobs(&ctx, req, &resp);
        fleet->stats.Rpc("ListJobs", s, Clock::now() - started, fleet->stopping);
      }
      if (latest > 0) Read(latest);
      std::unique_lock lock(fleet->mu);
      fleet->cv.wait_for(lock, std::chrono::seconds(1),
                         [&] { return work_done.load() || fleet->stopping.load(); });
    }
  }
};

// ---- mint: agent tokens for N boards (and one user token), written as the controller's
// `tokens create` writes them, in one go ----

inline int Mint(const std::string& database_url, int boards, const std::string& prefix,
                const std::string& out, const std::string& user_out) {
  using namespace faultline::controller;
  StoreOptions options;
  options.database_url = database_url;
  options.pool_size = 1;
  PgStore store(options);
  if (absl::Status s = store.Migrate(); !s.ok()) {
    std::cerr << "faultline-fleetsim: " << s.message() << "\n";
    return 1;
  }
  std::ofstream tokens(out);
  for (int i = 0; i < boards; ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "%s-%05d", prefix.c_str(), i);
    const std::string token = NewToken();
    if (token.empty()) {
      std::cerr << "faultline-fleetsim: cannot read /dev/urandom\n";
      return 1;
    }
    absl::Status s = store.tokens().CreateToken(std::string("agent-") + name, TokenRole::kAgent,
                                                name, Sha256Hex(token));
    if (!s.ok()) {
      std::cerr << "faultline-fleetsim: " << s.message() << "\n";
      return 1;
    }
    tokens << name << " " << token << "\n";
  }
  if (!user_out.empty()) {
    const std::string token = NewToken();
    absl::Status s = store.tokens().CreateToken(prefix + "-user-" + std::to_string(::getpid()),
                                                TokenRole::kUser, "", Sha256Hex(token));
    if (!s.ok()) {
      std::cerr << "faultline-fleetsim: " << s.message() << "\n";
      return 1;
    }
    std::ofstream(user_out) << token << "\n";
  }
  return tokens.good() ? 0 : 1;
}

}  // namespace faultline::fleetsim
