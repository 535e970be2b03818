// The CLI commands end to end against an in-process fake JobService (no sockets).
#include "services/cli/cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include "google/protobuf/util/json_util.h"

namespace faultline::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::RunCounts Counts(uint32_t total, uint32_t succeeded, uint32_t failed, uint32_t running) {
  v1::RunCounts runs;
  runs.set_total(total);
  runs.set_succeeded(succeeded);
  runs.set_failed(failed);
  runs.set_running(running);
  return runs;
}

v1::JobProgress Progress(v1::JobState state, v1::RunCounts runs) {
  v1::JobProgress p;
  p.set_job_id(42);
  p.set_state(state);
  *p.mutable_runs() = runs;
  return p;
}

class FakeJobService final : public v1::JobService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override {
    std::lock_guard lock(mu);
    submitted.push_back(request->spec());
    if (request->spec().duration() == "0s") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "spec.duration: must be at least 1s, got 0s");
    }
    response->set_job_id(42);
    response->set_runs(6);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    if (request->job_id() != 42)
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job 7\nsecond line");
    response->mutable_job()->set_id(42);
    response->mutable_job()->set_state(get_job_state);
    *response->mutable_job()->mutable_runs() = Counts(6, 6, 0, 0);
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    last_limit = request->limit();
    v1::Job* job = response->add_jobs();
    job->set_id(42);
    job->set_state(v1::JOB_STATE_RUNNING);
    job->mutable_spec()->set_benchmark("filemap-thrash");
    job->mutable_spec()->set_name("nightly");
    *job->mutable_runs() = Counts(6, 3, 0, 1);
    return grpc::Status::OK;
  }

  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override {
    response->mutable_job()->set_id(request->job_id());
    response->mutable_job()->set_state(v1::JOB_STATE_CANCELLED);
    *response->mutable_job()->mutable_runs() = Counts(6, 3, 0, 0);
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobProgress>* writer) override {
    if (request->job_id() != 42)
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "job 7 not found");
    if (watch_cut > 0) {  // a controller going away after the first event
      watch_cut--;
      if (!watch_events.empty()) writer->Write(watch_events.front());
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller stopping");
    }
    for (const v1::JobProgress& event : watch_events) writer->Write(event);
    return grpc::Status::OK;
  }

  grpc::Status GetReport(grpc::ServerContext*, const v1::GetReportRequest* request,
                         v1::GetReportResponse* response) override {
    response->mutable_job()->set_id(request->job_id());
    response->mutable_job()->mutable_spec()->set_benchmark("swap-in");
    response->add_matrix_keys("writers");
    v1::ReportRow* row = response->add_rows();
    (*row->mutable_cell())["writers"] = "4";
    row->set_kernel("vanilla");
    row->set_n(3);
    row->set_median(12596.234);
    // Per-run rows with the counters asked for, as the controller answers them.
    for (const std::string& name : request->run_counters()) {
      if (response->run_results_size() == 0) {
        v1::RunResult* run = response->add_run_results();
        run->set_kernel("vanilla");
        run->set_repetition(1);
        run->set_rounds(1234);
        run->set_throughput(123.4);
      }
      (*response->mutable_run_results(0)->mutable_counters())[name] = 4321;
    }
    return grpc::Status::OK;
  }

  grpc::Status ListAgents(grpc::ServerContext*, const v1::ListAgentsRequest*,
                          v1::ListAgentsResponse* response) override {
    v1::Board* board = response->add_boards();
    board->set_name("desk-i7");
    board->set_arch("x86_64");
    board->set_cpu_count(20);
    board->set_state(v1::BOARD_STATE_ONLINE);
    return grpc::Status::OK;
  }

  grpc::Status CreateSchedule(grpc::ServerContext*, const v1::CreateScheduleRequest* request,
                              v1::Schedule* response) override {
    std::lock_guard lock(mu);
    if (request->cron() == "61 * * * *") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "cron: minute must be 0..59, got 61");
    }
    schedule_requests.push_back(*request);
    response->set_id(7);
    response->set_name(request->name());
    response->set_cron(request->cron());
    response->mutable_next_run()->set_seconds(1796090400);  // 2026-12-01T02:00:00Z
    return grpc::Status::OK;
  }

  grpc::Status ListSchedules(grpc::ServerContext*, const v1::ListSchedulesRequest*,
                             v1::ListSchedulesResponse* response) override {
    v1::Schedule* s = response->add_schedules();
    s->set_id(7);
    s->set_name("nightly-swap");
    s->set_cron("0 2 * * *");
    s->mutable_spec()->set_benchmark("swap-in");
    s->mutable_next_run()->set_seconds(1796090400);
    s->set_last_job_id(41);
    v1::Schedule* never = response->add_schedules();
    never->set_id(8);
    never->set_name("weekly");
    never->set_cron("0 3 * * 0");
    never->mutable_spec()->set_benchmark("filemap-thrash");
    never->mutable_next_run()->set_seconds(1796349600);
    never->set_last_error("no board serves kernel 'patched'");
    return grpc::Status::OK;
  }

  grpc::Status DeleteSchedule(grpc::ServerContext*, const v1::DeleteScheduleRequest* request,
                              v1::DeleteScheduleResponse*) override {
    if (request->id() != 7) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no schedule 9");
    return grpc::Status::OK;
  }

  grpc::Status ListChangePoints(grpc::ServerContext*, const v1::ListChangePointsRequest* request,
                                v1::ListChangePointsResponse* response) override {
    last_include_closed = request->include_closed();
    v1::ChangePoint* c = response->add_change_points();
    c->set_id(3);
    c->set_state(v1::CHANGE_POINT_STATE_OPEN);
    c->set_study("nightly-swap");
    c->set_benchmark("swap-in");
    c->set_config("readers=2");
    c->set_board("lab-x86_64");
    c->set_kernel("patched");
    c->set_job_id(37);
    c->set_mean_before(1000);
    c->set_mean_after(812.5);
    c->set_relative_change(-0.1875);
    c->set_p_value(0.00042);
    return grpc::Status::OK;
  }

  grpc::Status SetChangePointState(grpc::ServerContext*,
                                   const v1::SetChangePointStateRequest* request,
                                   v1::ChangePoint* response) override {
    if (request->id() != 3) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no change point 4");
    response->set_id(3);
    response->set_state(request->state());
    return grpc::Status::OK;
  }

  grpc::Status ListBuilds(grpc::ServerContext*, const v1::ListBuildsRequest* request,
                          v1::ListBuildsResponse* response) override {
    last_builds_job_id = request->job_id();
    if (request->job_id() == 9) return grpc::Status::OK;  // a job without builds
    if (request->job_id() == 8) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job 8");
    v1::Build* done = response->add_builds();
    done->set_id(3);
    done->set_label("patched@3f9c2a1b04de");
    done->set_arch("x86_64");
    done->set_state("done");
    done->set_release("6.12.117-fl-3f9c2a1b");
    done->set_key("8d1c0b7e5a4f3e2d1c0b9a8f7e6d5c4b3a29180706f5e4d3c2b1a09f8e7d6c5b");
    done->set_base_commit("a1b2c3d4e5f60718293a4b5c6d7e8f9012345678");
    done->add_series("mm: add foo");
    done->add_series("mm: use foo");
    done->set_config_sha256("c0ffee00112233445566778899aabbccddeeff00112233445566778899aabbcc");
    done->set_compiler("gcc 14.2.0");
    done->set_build_seconds(62.4);
    done->set_image_bytes(12'900'000);
    v1::Build* cached = response->add_builds();
    *cached = *done;
    cached->set_id(4);
    cached->set_arch("aarch64");
    cached->set_cached(true);
    cached->set_image_bytes(870'400);
    v1::Build* failed = response->add_builds();
    failed->set_id(5);
    failed->set_label("next@0123456789ab");
    failed->set_arch("x86_64");
    failed->set_state("failed");
    failed->set_error("\ngit am: patch 2/2 does not apply (mm/filemap.c)\nmore log");
    failed->set_build_seconds(3);
    v1::Build* queued = response->add_builds();
    queued->set_id(6);
    queued->set_label("next@0123456789ab");
    queued->set_arch("aarch64");
    queued->set_state("queued");
    return grpc::Status::OK;
  }

  std::mutex mu;
  int64_t last_builds_job_id = -1;
  std::vector<v1::CreateScheduleRequest> schedule_requests;
  bool last_include_closed = false;
  std::vector<v1::JobSpec> submitted;
  std::vector<v1::JobProgress> watch_events;
  std::atomic<int> watch_cut{0};  // streams to end UNAVAILABLE after their first event
  v1::JobState get_job_state = v1::JOB_STATE_SUCCEEDED;
  uint32_t last_limit = 0;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    server_->Shutdown();
    for (const auto& path : written_) std::remove(path.c_str());
  }

  int Run(std::vector<std::string> args, bool tty = false) {
    out_.str("");
    err_.str("");
    std::vector<const char*> argv = {"faultline"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    CliEnv env;
    env.out = &out_;
    env.err = &err_;
    env.err_is_tty = tty;
    env.controller = "default:50051";
    return RunCli(static_cast<int>(argv.size()), argv.data(), env, [this](const CliEnv& env) {
      target_ = env.controller;
      return std::unique_ptr<JobStub>(
          v1::JobService::NewStub(server_->InProcessChannel(grpc::ChannelArguments())));
    });
  }

  std::string WriteSpec(const std::string& text) {
    const std::string path = ::testing::TempDir() + "/faultline_cli_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                             ".yaml";
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/faultline_cli_test_" +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                             name;
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }

  FakeJobService service_;
  std::unique_ptr<grpc::Server> server_;
  std::ostringstream out_;
  std::ostringstream err_;
  std::string target_;
  std::vector<std::string> written_;  // removed after each test
};

long Lines(const std::string& text) {
  return std::count(text.begin(), text.end(), '\n');
}

constexpr char kSpec[] =
    "benchmark: filemap-thrash\nduration: 5s\nrepetitions: 3\nmatrix: {threads: [4, 8]}\n";

TEST_F(CliTest, SubmitPrintsTheJobIdAlone) {
  EXPECT_EQ(Run({"submit", WriteSpec(kSpec)}), 0);
  EXPECT_EQ(out_.str(), "42\n");
  ASSERT_EQ(service_.submitted.size(), 1u);
  EXPECT_EQ(service_.submitted[0].benchmark(), "filemap-thrash");
  EXPECT_EQ(service_.submitted[0].matrix().at("threads").values_size(), 2);
  EXPECT_EQ(target_, "default:50051");
}

TEST_F(CliTest, ControllerFlagOverridesTheDefault) {
  EXPECT_EQ(Run({"--controller", "ctl.lab:7000", "jobs", "--limit", "5"}), 0);
  EXPECT_EQ(target_, "ctl.lab:7000");
  EXPECT_EQ(service_.last_limit, 5u);
  EXPECT_THAT(out_.str(), StartsWith("ID   STATE     BENCHMARK        NAME      RUNS   CREATED\n"
                                     "42   running   filemap-thrash   nightly    3/6   -\n"));
}

TEST_F(CliTest, SpecErrorsAreUsageErrorsWithLineAndColumn) {
  const std::string path = WriteSpec("benchmark: swap-in\nduraton: 5s\n");
  EXPECT_EQ(Run({"submit", path}), 2);
  EXPECT_THAT(err_.str(),
              StartsWith("faultline: " + path + ":2:1: unknown field 'duraton' in JobSpec"));
  EXPECT_EQ(Lines(err_.str()), 1);
  EXPECT_EQ(out_.str(), "");
  EXPECT_TRUE(service_.submitted.empty());
}

TEST_F(CliTest, RpcErrorsNameTheStatusCode) {
  EXPECT_EQ(Run({"submit", WriteSpec("benchmark: swap-in\nduration: 0s\n")}), 1);
  EXPECT_EQ(err_.str(),
            "faultline: INVALID_ARGUMENT: spec.duration: must be at least 1s, got 0s\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CliTest, SubmitWaitWatchesToCompletion) {
  service_.watch_events = {Progress(v1::JOB_STATE_QUEUED, Counts(6, 0, 0, 0)),
                           Progress(v1::JOB_STATE_RUNNING, Counts(6, 3, 0, 1)),
                           Progress(v1::JOB_STATE_SUCCEEDED, Counts(6, 6, 0, 0))};
  EXPECT_EQ(Run({"submit", WriteSpec(kSpec), "--wait"}), 0);
  EXPECT_EQ(out_.str(), "42\n");
  EXPECT_EQ(err_.str(),
            "job 42 submitted (6 runs)\n"
            "[--------------------] 0/6 runs (0 running, 0 failed)\n"
            "[##########----------] 3/6 runs (1 running, 0 failed)\n"
            "[####################] 6/6 runs (0 running, 0 failed)\n"
            "job 42 succeeded (6/6 runs succeeded)\n");
}

TEST_F(CliTest, WatchFailsWhenTheJobFails) {
  service_.watch_events = {Progress(v1::JOB_STATE_FAILED, Counts(6, 5, 1, 0))};
  EXPECT_EQ(Run({"watch", "42"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("job 42 failed (1 of 6 runs failed)\n"));
}

TEST_F(CliTest, WatchRewritesTheLineOnATerminal) {
  service_.watch_events = {Progress(v1::JOB_STATE_RUNNING, Counts(2, 1, 0, 1)),
                           Progress(v1::JOB_STATE_SUCCEEDED, Counts(2, 2, 0, 0))};
  EXPECT_EQ(Run({"watch", "42"}, /*tty=*/true), 0);
  EXPECT_EQ(err_.str(),
            "\r[##########----------] 1/2 runs (1 running, 0 failed)\x1b[K"
            "\r[####################] 2/2 runs (0 running, 0 failed)\x1b[K\n"
            "job 42 succeeded (2/2 runs succeeded)\n");
}

TEST_F(CliTest, WatchAsksForTheStateWhenTheStreamEndsEarly) {
  service_.watch_events = {Progress(v1::JOB_STATE_RUNNING, Counts(6, 3, 0, 1))};
  service_.get_job_state = v1::JOB_STATE_SUCCEEDED;
  EXPECT_EQ(Run({"watch", "42"}), 0);
  service_.get_job_state = v1::JOB_STATE_RUNNING;
  EXPECT_EQ(Run({"watch", "42"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("faultline: watch of job 42 ended while the job is running\n"));
}

// The controller goes away mid-watch (a failover): the CLI watches again.
TEST_F(CliTest, WatchSurvivesAControllerGoingAway) {
  service_.watch_events = {Progress(v1::JOB_STATE_RUNNING, Counts(2, 1, 0, 1)),
                           Progress(v1::JOB_STATE_SUCCEEDED, Counts(2, 2, 0, 0))};
  service_.watch_cut = 2;
  EXPECT_EQ(Run({"watch", "42"}), 0);
  EXPECT_EQ(service_.watch_cut.load(), 0);
  EXPECT_THAT(err_.str(), HasSubstr("job 42 succeeded (2/2 runs succeeded)\n"));
  // Not forever: after 10 cuts in a row without an event, it fails naming the cause.
  service_.watch_events.clear();
  service_.watch_cut = 100;
  EXPECT_EQ(Run({"watch", "42"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("controller stopping\n"));
  EXPECT_EQ(service_.watch_cut.load(), 100 - 11);
}

TEST_F(CliTest, WatchOfAnUnknownJob) {
  EXPECT_EQ(Run({"watch", "7"}), 1);
  EXPECT_EQ(err_.str(), "faultline: NOT_FOUND: job 7 not found\n");
}

TEST_F(CliTest, ReportFormats) {
  EXPECT_EQ(Run({"report", "42"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("|    4    | vanilla |   -   | 3 | 12596.23 /s |"));
  EXPECT_EQ(Run({"report", "42", "--format", "markdown"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("| writers | kernel  | board |"));
  EXPECT_EQ(Run({"report", "42", "--format", "json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"matrix_keys\": ["));
  EXPECT_EQ(Run({"report", "42", "--format", "xml"}), 2);
  EXPECT_THAT(err_.str(), StartsWith("faultline: "));
}

TEST_F(CliTest, ReportColumnsAskForTheCountersAndPrintAPerRunTable) {
  EXPECT_EQ(Run({"report", "42", "--columns", "Drops=vmstat.retry_mmap_drop,vmstat.pswpin"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("per run:\n"));
  EXPECT_THAT(out_.str(),
              HasSubstr("| Vanilla (Run 1) |    1,234     | 123.40 /s  | 4,321 |     4,321     |"));
  EXPECT_EQ(Run({"report", "42", "--columns", "=vmstat.x"}), 2);
  EXPECT_THAT(err_.str(),
              HasSubstr("faultline: --columns: '=vmstat.x': the label before '=' is empty"));
  EXPECT_EQ(Run({"report", "42", "--counters", "some"}), 2);
}

TEST_F(CliTest, ReportCsv) {
  EXPECT_EQ(Run({"report", "42", "--format", "csv"}), 0);
  EXPECT_EQ(out_.str(),
            "writers,kernel,board,n,median,min,max,mean,failed,baseline,ratio,ci_low,ci_high,p_"
            "value,q_value,verdict\n"
            "4,vanilla,,3,12596.234,0,0,0,0,,,,,,,\n");  // every row has every column
}

TEST_F(CliTest, AReportSavedAsJsonRendersAgainWithoutAController) {
  v1::GetReportResponse saved;
  saved.mutable_job()->set_id(12);
  saved.mutable_job()->mutable_spec()->set_benchmark("filemap-thrash");
  v1::ReportRow* row = saved.add_rows();
  row->set_kernel("vanilla@849d35e96b26");
  row->set_n(14);
  row->set_median(108.5);
  v1::Comparison* c = saved.add_comparisons();
  c->set_board("lab-x86_64");
  c->set_baseline("vanilla@849d35e96b26");
  c->set_candidate("patched@19879d9e9838");
  v1::MedianTable* t = c->add_tables();
  t->set_title("mmap_lock Acquisitions And Wait Time");
  t->set_first_column("Metric");
  t->set_unit("round");
  v1::MedianTableRow* r = t->add_rows();
  r->set_label("Write Lock Count");
  r->set_per_unit(true);
  r->mutable_baseline()->set_n(14);
  r->mutable_baseline()->set_median(14.6);
  r->mutable_candidate()->set_n(14);
  r->mutable_candidate()->set_median(12.0);
  r->set_ratio(0.95);
  for (v1::MedianSummary* m : {r->mutable_baseline(), r->mutable_candidate()}) {
    m->set_ci_low(std::nan(""));
    m->set_ci_high(std::nan(""));
  }
  r->set_ci_low(0.9);
  r->set_ci_high(1.01);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(saved, &json).ok());
  const std::string path = WriteFile("saved-report.json", json);

  EXPECT_EQ(Run({"report", "--from", path}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("job 12: filemap-thrash"));
  EXPECT_THAT(out_.str(), HasSubstr("== mmap_lock Acquisitions And Wait Time =="));
  EXPECT_THAT(out_.str(),
              HasSubstr("Metric            Vanilla (median)  Patched (median)   Change\n"
                        "-------------------------------------------------------------\n"
                        "Write Lock Count  14.6              12.0              -5.00%\n"));
  EXPECT_TRUE(target_.empty());  // offline: never connected
  EXPECT_EQ(Run({"report", "--from", path, "--format", "markdown"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("**mmap_lock Acquisitions And Wait Time** (per round)"));

  EXPECT_EQ(Run({"report"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("report: give a JOB or --from FILE (one of them)"));
  EXPECT_EQ(Run({"report", "12", "--from", path}), 2);
  EXPECT_EQ(Run({"report", "--from", path + ".missing"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("--from: cannot read"));
  const std::string bad = WriteFile("not-a-report.json", "{\"rows\": 3}");
  EXPECT_EQ(Run({"report", "--from", bad}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("not a saved report (faultline report JOB --format json)"));
}

TEST_F(CliTest, CompareWorksOfflineOnSampleFiles) {
  // Seed 000's published runs: a large apparent effect, but 2 runs per side cannot show it.
  const std::string a = WriteFile("a.txt", "# Baseline (Run 1), (Run 2)\n37.85\n39.22 /s\n");
  const std::string b = WriteFile("b.txt", "# With Series (Run A), (Run B)\n90.71\n\n59.91\n");
  EXPECT_EQ(Run({"compare", a, b}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("| +91.3% | unbounded | 0.1667 | 0.3333 | inconclusive |"));
  EXPECT_THAT(out_.str(), HasSubstr("\nverdict: inconclusive\n"));
  EXPECT_EQ(err_.str(), "");
  EXPECT_TRUE(target_.empty());  // offline: never connected

  // 10 vs 10 with +30%: an improvement.
  const std::string base =
      WriteFile("base.txt", "1000\n1012\n995\n1030\n987\n1005\n1021\n978\n1010\n999\n");
  const std::string cand =
      WriteFile("cand.txt", "1300\n1318\n1290\n1335\n1281\n1307\n1322\n1276\n1312\n1296\n");
  EXPECT_EQ(Run({"compare", base, cand}), 0);
  EXPECT_THAT(
      out_.str(),
      HasSubstr("| 10  | 10  | +29.8% | [+28.0%, +31.9%] | <0.0001 | <0.0001 | improvement |"));
  EXPECT_THAT(out_.str(), HasSubstr("\nverdict: improvement\n"));
  EXPECT_EQ(Run({"compare", cand, base}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\nverdict: regression\n"));
  // When only ±50% counts, a CI of +28%..+32% lies within "no change".
  EXPECT_EQ(Run({"compare", base, cand, "--min-effect", "0.5"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\nverdict: no-change\n"));
  EXPECT_THAT(out_.str(), HasSubstr("α = 0.01, δ = 50%"));
  EXPECT_EQ(Run({"compare", base, cand, "--format", "csv", "--alpha", "0.05"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr(",improvement,0.05,0.03\n"));
  EXPECT_EQ(Run({"compare", base, cand, "--format", "json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"verdict\": \"improvement\""));
  EXPECT_EQ(Run({"compare", base, cand, "--format", "markdown"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("**verdict: improvement**"));
}

TEST_F(CliTest, ComparePairedUsesLineIOfBothFilesAsAPair) {
  // A board that slows down over the study, B alternating with A and 4% faster in each pair.
  std::string a_text, b_text;
  const double levels[] = {300, 281, 266, 248, 233, 219, 205, 192, 180, 170};
  const double noise[] = {1.00, 1.01, 0.99, 1.00, 1.01, 0.99, 1.00, 1.01, 0.99, 1.00};
  for (int i = 0; i < 10; ++i) {
    a_text += std::to_string(levels[i] * noise[i]) + "\n";
    b_text += std::to_string(levels[i] * 1.04 * noise[9 - i]) + "\n";
  }
  const std::string a = WriteFile("pa.txt", a_text), b = WriteFile("pb.txt", b_text);
  EXPECT_EQ(Run({"compare", a, b}), 0);  // unpaired: the drift swamps 4%
  EXPECT_THAT(out_.str(), HasSubstr("\nverdict: inconclusive\n"));
  EXPECT_EQ(Run({"compare", "--paired", a, b}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("paired (line i of A with line i of B)"));
  EXPECT_THAT(out_.str(), HasSubstr("| pairs | n B | Change |"));
  EXPECT_THAT(out_.str(), HasSubstr("\nverdict: improvement\n"));
  EXPECT_EQ(Run({"compare", "--paired", a, b, "--format", "json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"paired\": true"));
  // Unequal lengths: an error naming both counts.
  const std::string short_b = WriteFile("short.txt", "1\n2\n3\n");
  EXPECT_EQ(Run({"compare", "--paired", a, short_b}), 2);
  EXPECT_EQ(err_.str(), "faultline: --paired: line i of A is paired with line i of B, but " + a +
                            " has 10 samples and " + short_b + " has 3\n");
}

TEST_F(CliTest, CompareErrorsNameTheFileAndLine) {
  const std::string good = WriteFile("good.txt", "1\n2\n");
  const std::string bad = WriteFile("bad.txt", "1\n2\nx\n");
  EXPECT_EQ(Run({"compare", good, bad}), 2);
  EXPECT_EQ(err_.str(), "faultline: " + bad + ":3: 'x' is not a number\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(Run({"compare", good, "/nonexistent/b.txt"}), 2);
  EXPECT_EQ(err_.str(), "faultline: /nonexistent/b.txt: cannot read: No such file or directory\n");
  EXPECT_EQ(Run({"compare", good}), 2);
  EXPECT_THAT(err_.str(), StartsWith("faultline: "));
  EXPECT_EQ(Run({"compare", good, good, "--alpha", "2"}), 2);
  EXPECT_EQ(Run({"compare", good, good, "--format", "xml"}), 2);
  EXPECT_TRUE(target_.empty());
}

TEST_F(CliTest, ScheduleSchedulesAndUnschedule) {
  const std::string spec = WriteSpec(kSpec);
  EXPECT_EQ(Run({"schedule", spec, "--cron", "0 2 * * *", "--name", "nightly"}), 0);
  EXPECT_EQ(out_.str(), "7\n");  // the id alone on stdout, for scripts
  EXPECT_EQ(err_.str(), "schedule 7 'nightly' (0 2 * * *) next run 2026-12-01T02:00:00Z\n");
  ASSERT_EQ(service_.schedule_requests.size(), 1u);
  EXPECT_EQ(service_.schedule_requests[0].spec().benchmark(), "filemap-thrash");
  EXPECT_EQ(service_.schedule_requests[0].spec().matrix().at("threads").values_size(), 2);
  // The controller's refusal: exit 1, one line naming the field.
  EXPECT_EQ(Run({"schedule", spec, "--cron", "61 * * * *", "--name", "bad"}), 1);
  EXPECT_EQ(err_.str(), "faultline: INVALID_ARGUMENT: cron: minute must be 0..59, got 61\n");
  // A bad spec file never reaches the controller.
  EXPECT_EQ(Run({"schedule", WriteFile("bad.yaml", "duration: [\n"), "--cron", "0 2 * * *",
                 "--name", "x"}),
            2);
  EXPECT_EQ(service_.schedule_requests.size(), 1u);
  EXPECT_EQ(Run({"schedule", spec, "--name", "no-cron"}), 2);  // --cron is required

  EXPECT_EQ(Run({"schedules"}), 0);
  EXPECT_EQ(out_.str(),
            "id\tname\tcron\tbenchmark\tnext run\tlast job\tlast error\n"
            "7\tnightly-swap\t0 2 * * *\tswap-in\t2026-12-01T02:00:00Z\t41\t-\n"
            "8\tweekly\t0 3 * * 0\tfilemap-thrash\t2026-12-04T02:00:00Z\t-\tno board serves kernel "
            "'patched'\n");

  EXPECT_EQ(Run({"unschedule", "7"}), 0);
  EXPECT_EQ(out_.str(), "schedule 7 deleted\n");
  EXPECT_EQ(Run({"unschedule", "9"}), 1);
  EXPECT_EQ(err_.str(), "faultline: NOT_FOUND: no schedule 9\n");
  EXPECT_EQ(Run({"unschedule", "0"}), 2);  // ids are positive
}

TEST_F(CliTest, ChangesAndMark) {
  EXPECT_EQ(Run({"changes"}), 0);
  EXPECT_FALSE(service_.last_include_closed);
  EXPECT_EQ(
      out_.str(),
      "id\tstate\tstudy\tbenchmark\tconfig\tboard\tkernel\tfrom job\tbefore\tafter\tchange\tp\n"
      "3\topen\tnightly-swap\tswap-in\treaders=2\tlab-x86_64\tpatched\t37\t1000.00\t812.50\t-18.8%"
      "\t0.00042\n");
  EXPECT_EQ(Run({"changes", "--all"}), 0);
  EXPECT_TRUE(service_.last_include_closed);

  EXPECT_EQ(Run({"mark", "3", "acknowledged"}), 0);
  EXPECT_EQ(out_.str(), "change point 3 is acknowledged\n");
  EXPECT_EQ(Run({"mark", "4", "fixed"}), 1);
  EXPECT_EQ(err_.str(), "faultline: NOT_FOUND: no change point 4\n");
  EXPECT_EQ(Run({"mark", "3", "done"}), 2);  // not a state: a usage error, nothing sent
  EXPECT_THAT(err_.str(), HasSubstr("STATE"));
}

TEST_F(CliTest, CancelAndAgents) {
  EXPECT_EQ(Run({"cancel", "42"}), 0);
  EXPECT_EQ(out_.str(), "job 42 cancelled (3/6 runs finished)\n");
  EXPECT_EQ(Run({"agents"}), 0);
  EXPECT_THAT(
      out_.str(),
      StartsWith("NAME      ARCH     CPUS   MEMORY   PAGE   CGROUP   KERNEL   STATE    LAST SEEN   "
                 "SWITCHES   HEALTH\n"
                 "desk-i7   x86_64     20        -      -   -        -        online   -         "
                 "         0   -\n"));
}

TEST_F(CliTest, KernelsListsTheBuilds) {
  EXPECT_EQ(Run({"kernels"}), 0);
  EXPECT_EQ(service_.last_builds_job_id, 0);  // every job's
  EXPECT_EQ(out_.str(),
            "ID   LABEL                  ARCH      STATE    RELEASE                KEY            "
            "BASE           SERIES   CONFIG         COMPILER       TIME       SIZE\n"
            " 3   patched@3f9c2a1b04de   x86_64    done     6.12.117-fl-3f9c2a1b   8d1c0b7e5a4f   "
            "a1b2c3d4e5f6        2   c0ffee001122   gcc 14.2.0   1m 02s   12.3 MiB\n"
            " 4   patched@3f9c2a1b04de   aarch64   done     6.12.117-fl-3f9c2a1b   8d1c0b7e5a4f   "
            "a1b2c3d4e5f6        2   c0ffee001122   gcc 14.2.0   cached    850 KiB\n"
            " 5   next@0123456789ab      x86_64    failed   -                      -              "
            "-                   0   -              -                3s          -\n"
            " 6   next@0123456789ab      aarch64   queued   -                      -              "
            "-                   0   -              -                 -          -\n"
            "build 5 (next@0123456789ab, x86_64) failed: git am: patch 2/2 does not apply "
            "(mm/filemap.c)\n");
  EXPECT_EQ(err_.str(), "");

  EXPECT_EQ(Run({"kernels", "--job", "42"}), 0);
  EXPECT_EQ(service_.last_builds_job_id, 42);
  EXPECT_EQ(Run({"kernels", "--job", "9"}), 0);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(), "no kernel builds for job 9\n");
  EXPECT_EQ(Run({"kernels", "--job", "8"}), 1);  // the RPC's error, as every command's
  EXPECT_EQ(err_.str(), "faultline: NOT_FOUND: no job 8\n");
  EXPECT_EQ(Run({"kernels", "--job", "x"}), 2);
  EXPECT_EQ(err_.str(), "faultline: --job: 'x' is not a job id (see faultline --help)\n");
}

TEST(FormatBuildsTest, TimesAndSizes) {
  EXPECT_EQ(report::FormatBuildTime(0), "-");
  EXPECT_EQ(report::FormatBuildTime(0.4), "0s");
  EXPECT_EQ(report::FormatBuildTime(59.4), "59s");
  EXPECT_EQ(report::FormatBuildTime(62), "1m 02s");
  EXPECT_EQ(report::FormatBuildTime(3599), "59m 59s");
  EXPECT_EQ(report::FormatBuildTime(3900), "1h 05m");
  EXPECT_EQ(report::FormatImageSize(0), "-");
  EXPECT_EQ(report::FormatImageSize(812), "812 B");
  EXPECT_EQ(report::FormatImageSize(870'400), "850 KiB");
  EXPECT_EQ(report::FormatImageSize(12'900'000), "12.3 MiB");
  // A failed build without an error still gets its line.
  v1::ListBuildsResponse response;
  v1::Build* build = response.add_builds();
  build->set_id(1);
  build->set_label("a@000000000000");
  build->set_arch("x86_64");
  build->set_state("failed");
  EXPECT_THAT(report::FormatBuilds(response),
              ::testing::EndsWith("\nbuild 1 (a@000000000000, x86_64) failed\n"));
}

TEST_F(CliTest, UsageErrors) {
  EXPECT_EQ(Run({}), 2);
  EXPECT_THAT(err_.str(), StartsWith("faultline: "));
  EXPECT_EQ(Lines(err_.str()), 1);
  EXPECT_EQ(Run({"watch", "abc"}), 2);
  EXPECT_EQ(err_.str(), "faultline: JOB: 'abc' is not a job id (see faultline --help)\n");
  EXPECT_EQ(Run({"frobnicate"}), 2);
  EXPECT_EQ(err_.str(), "faultline: unknown command 'frobnicate' (see faultline --help)\n");
  EXPECT_EQ(Run({"watch"}), 2);
  EXPECT_EQ(Run({"jobs", "--limit", "0"}), 2);
  EXPECT_TRUE(target_.empty());  // never connected
  EXPECT_EQ(Run({"--help"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("submit"));
  EXPECT_EQ(Run({"report", "--help"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("--format"));
}

TEST(RpcErrorTest, OneLineWithTheCodeName) {
  EXPECT_EQ(
      FormatRpcError(grpc::Status(grpc::StatusCode::NOT_FOUND, "no job 7\nsecond line"), "c:1"),
      "NOT_FOUND: no job 7; second line");
  EXPECT_EQ(FormatRpcError(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""), "c:1"),
            "DEADLINE_EXCEEDED");
  EXPECT_EQ(FormatRpcError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "failed to connect"), "c:1"),
            "UNAVAILABLE: cannot reach controller at c:1: failed to connect");
}

TEST(RealChannelTest, UnreachableControllerIsAnRpcError) {
  std::ostringstream out, err;
  CliEnv env;
  env.out = &out;
  env.err = &err;
  env.controller = "127.0.0.1:1";  // nothing listens on port 1
  env.rpc_timeout = std::chrono::seconds(5);
  const char* argv[] = {"faultline", "agents"};
  EXPECT_EQ(RunCli(2, argv, env, Connect), 1);
  EXPECT_THAT(err.str(),
              StartsWith("faultline: UNAVAILABLE: cannot reach controller at 127.0.0.1:1"));
}

}  // namespace
}  // namespace faultline::cli
