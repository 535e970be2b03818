// JobService and AgentService on a real in-process gRPC server over the in-memory stores:
// status mapping, validation, parking, and the authorization rules with a FakeClock.
#include "services/controller/api/services.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "tests/support/fake_stores.h"
#include "tests/support/gate.h"

namespace faultline::controller {
namespace {

using fakes::FakeStores;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

const std::chrono::system_clock::time_point kStart{seconds(1'700'000'000)};
// Only guards against a hung test; no test waits it out.
constexpr auto kGuard = seconds(20);

v1::JobSpec Spec() {
  v1::JobSpec spec;
  spec.set_benchmark("filemap-thrash");
  spec.set_duration("5s");
  spec.set_repetitions(2);
  spec.add_kernels("vanilla");
  spec.mutable_memcg()->set_memory_max("256M");
  return spec;
}

v1::Board HelloBoard(const std::string& name) {
  v1::Board b;
  b.set_name(name);
  b.set_arch("x86_64");
  b.set_memory_bytes(8ull << 30);
  auto* k = b.add_kernels();
  k->set_label("vanilla");
  k->set_boot_method("none");
  b.set_running_kernel_label("vanilla");
  b.add_running_kernel_labels("vanilla");
  b.set_boot_id("boot-1");
  return b;
}

BoardSummary Summary(const std::string& name) {
  return BoardSummary{.name = name,
                      .arch = "x86_64",
                      .memory_bytes = 8ull << 30,
                      .kernel_labels = {"vanilla"},
                      .running_kernel_label = "vanilla",
                      .running_kernel_labels = {"vanilla"}};
}

class ServicesTest : public ::testing::Test {
 protected:
  void SetUp() override { Serve(nullptr); }
  void TearDown() override {
    dispatcher_.Stop();  // ends parked calls first, so Shutdown has nothing to wait for
    server_->Shutdown();
  }

  void Serve(Authorizer* auth) {
    jobs_service_ =
        std::make_unique<JobServiceImpl>(fake_.stores(), &dispatcher_, nullptr, auth, &clock_);
    agents_service_ =
        std::make_unique<AgentServiceImpl>(fake_.stores(), &dispatcher_, nullptr, auth, &clock_);
    agents_service_->SetHandlerPools(board_pool_.get(), result_pool_.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(jobs_service_.get());
    builder.RegisterService(agents_service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto channel = server_->InProcessChannel(grpc::ChannelArguments());
    jobs_ = v1::JobService::NewStub(channel);
    agents_ = v1::AgentService::NewStub(channel);
  }

  // A client context with a guard deadline and, optionally, a bearer token.
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& token = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + kGuard);
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }

  // An asynchronous call in flight, from the client's side.
  template <typename Request, typename Response>
  struct PendingCall {
    Request req;
    Response resp;
    std::unique_ptr<grpc::ClientContext> ctx = Context();
    std::promise<grpc::Status> done;
    std::future<grpc::Status> answered = done.get_future();
  };
  using PendingAcquire = PendingCall<v1::AcquireWorkRequest, v1::AcquireWorkResponse>;
  std::unique_ptr<PendingAcquire> StartAcquire(const std::string& board, uint32_t wait_seconds) {
    auto call = std::make_unique<PendingAcquire>();
    call->req.set_board(board);
    call->req.set_wait_seconds(wait_seconds);
    agents_->async()->AcquireWork(call->ctx.get(), &call->req, &call->resp,
                                  [c = call.get()](grpc::Status s) { c->done.set_value(s); });
    return call;
  }

  // A board that builds and boots kernels jobs bring, and a schedule that builds its
  // kernel ("nightly") from a tree every slot.
  v1::CreateScheduleRequest NightlyOnABuilder(const std::string& name) {
    BoardSummary board = Summary("b1");
    board.boots_built_kernels = true;
    board.build_arches = {"x86_64"};
    fake_.boards.AddBoard(board);
    v1::CreateScheduleRequest req;
    req.set_name(name);
    req.set_cron("0 2 * * *");
    *req.mutable_spec() = Spec();
    req.mutable_spec()->clear_kernels();
    req.mutable_spec()->add_kernels("nightly");
    auto& source = (*req.mutable_spec()->mutable_kernel_sources())["nightly"];
    source.set_tree("/srv/linux");
    source.set_ref("main");
    return req;
  }

  int64_t Submit() {
    v1::SubmitJobRequest req;
    *req.mutable_spec() = Spec();
    v1::SubmitJobResponse resp;
    grpc::Status s = jobs_->SubmitJob(Context().get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job_id();
  }

  FakeClock clock_{kStart};
  FakeStores fake_{&clock_};
  Dispatcher dispatcher_{&fake_.work, &fake_.jobs, &clock_};
  // Set before Serve: the agents' calls run on them (they outlive the server).
  std::unique_ptr<HandlerPool> board_pool_;
  std::unique_ptr<ResultPool> result_pool_;
  std::unique_ptr<JobServiceImpl> jobs_service_;
  std::unique_ptr<AgentServiceImpl> agents_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
};

TEST_F(ServicesTest, SubmitJobWithABadSpecIsInvalidArgumentNamingTheField) {
  fake_.boards.AddBoard(Summary("b1"));
  v1::SubmitJobRequest req;
  *req.mutable_spec() = Spec();
  req.mutable_spec()->set_benchmark("no-such-benchmark");
  v1::SubmitJobResponse resp;
  grpc::Status s = jobs_->SubmitJob(Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.benchmark"));
  EXPECT_EQ(fake_.jobs.create_calls(), 0);

  req.mutable_spec()->set_benchmark("filemap-thrash");
  req.mutable_spec()->mutable_memcg()->set_memory_max("1T");  // more than any board has
  s = jobs_->SubmitJob(Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.memcg.memory_max"));

  req.mutable_spec()->mutable_memcg()->set_memory_max("256M");
  req.mutable_spec()->add_events("sw:page-faults");
  req.mutable_spec()->add_events("sw:pagefaults");
  s = jobs_->SubmitJob(Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.events[1]: 'sw:pagefaults': unknown software"));
  EXPECT_EQ(fake_.jobs.create_calls(), 0);
  req.mutable_spec()->clear_events();

  req.set_request_id(std::string(129, 'r'));
  s = jobs_->SubmitJob(Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("request_id"));
}

TEST_F(ServicesTest, SubmitJobStoresTheJobOncePerRequestId) {
  fake_.boards.AddBoard(Summary("b1"));
  v1::SubmitJobRequest req;
  *req.mutable_spec() = Spec();
  req.set_request_id("once");
  v1::SubmitJobResponse first, retry;
  ASSERT_TRUE(jobs_->SubmitJob(Context().get(), req, &first).ok());
  EXPECT_GT(first.job_id(), 0);
  EXPECT_EQ(first.runs(), 2u);
  ASSERT_TRUE(jobs_->SubmitJob(Context().get(), req, &retry).ok());
  EXPECT_EQ(retry.job_id(), first.job_id());

  v1::GetJobRequest get;
  get.set_job_id(first.job_id());
  get.set_include_runs(true);
  v1::GetJobResponse job;
  ASSERT_TRUE(jobs_->GetJob(Context().get(), get, &job).ok());
  EXPECT_EQ(job.job().state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.runs_size(), 2);
}

TEST_F(ServicesTest, GetJobOfAnUnknownJobIsNotFound) {
  v1::GetJobRequest req;
  req.set_job_id(404);
  v1::GetJobResponse resp;
  grpc::Status s = jobs_->GetJob(Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("404"));
}

TEST_F(ServicesTest, CancelJobOfAFinishedJobIsFailedPrecondition) {
  fake_.boards.AddBoard(Summary("b1"));
  const int64_t done = Submit();
  fake_.jobs.SetRunStates(done, RunState::kSucceeded);
  v1::CancelJobRequest req;
  req.set_job_id(done);
  v1::CancelJobResponse resp;
  grpc::Status s = jobs_->CancelJob(Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("already succeeded"));

  const int64_t open = Submit();
  req.set_job_id(open);
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), req, &resp).ok());
  EXPECT_EQ(resp.job().state(), v1::JOB_STATE_CANCELLED);

  req.set_job_id(404);
  EXPECT_EQ(jobs_->CancelJob(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServicesTest, ListJobsBoundsItsLimit) {
  v1::ListJobsRequest req;
  req.set_limit(1001);
  v1::ListJobsResponse resp;
  EXPECT_EQ(jobs_->ListJobs(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServicesTest, DatabaseOutageIsUnavailable) {
  fake_.jobs.SetUnavailable(true);
  v1::GetJobRequest req;
  req.set_job_id(1);
  v1::GetJobResponse resp;
  EXPECT_EQ(jobs_->GetJob(Context().get(), req, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ServicesTest, CreateScheduleTakesItsFirstSlotFromTheClock) {
  fake_.boards.AddBoard(Summary("b1"));
  v1::CreateScheduleRequest req;
  req.set_name("nightly");
  req.set_cron("0 2 * * *");
  *req.mutable_spec() = Spec();
  v1::Schedule created;
  ASSERT_TRUE(jobs_->CreateSchedule(Context().get(), req, &created).ok());
  // kStart is 2023-11-14 22:13:20 UTC: the first slot is the next day's 02:00.
  EXPECT_EQ(created.next_run().seconds(), 1'700'013'600);
  EXPECT_EQ(created.name(), "nightly");

  v1::Schedule again;
  EXPECT_EQ(jobs_->CreateSchedule(Context().get(), req, &again).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  req.set_name("bad-cron");
  req.set_cron("0 25 * * *");
  EXPECT_EQ(jobs_->CreateSchedule(Context().get(), req, &again).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  req.set_cron("0 2 * * *");
  req.mutable_spec()->clear_kernels();
  grpc::Status s = jobs_->CreateSchedule(Context().get(), req, &again);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("spec.kernels"));
  EXPECT_EQ(fake_.schedules.ListSchedules()->size(), 1u);
}

// A schedule may bring its kernel (built every slot, kernel_sources.h): it is checked as a
// job would be, with the source's own field named.
TEST_F(ServicesTest, AScheduleMayBuildItsKernelFromATree) {
  v1::CreateScheduleRequest req = NightlyOnABuilder("track");
  auto& source = (*req.mutable_spec()->mutable_kernel_sources())["nightly"];
  v1::Schedule created;
  grpc::Status s = jobs_->CreateSchedule(Context().get(), req, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Stored as written (the label is named at each slot).
  EXPECT_THAT(fake_.schedules.ListSchedules()->front().spec_json, HasSubstr("\"ref\":\"main\""));
  req.set_name("no-ref");
  source.clear_ref();
  s = jobs_->CreateSchedule(Context().get(), req, &created);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("kernels.nightly.ref"));
}

// --untrusted-users: every kernel a user brings is a stranger's (built in the sandbox, on
// private object directories); without it a spec marks its own.
TEST_F(ServicesTest, AnOperatorWhoTrustsNoUserMarksEveryKernelUntrusted) {
  v1::CreateScheduleRequest req = NightlyOnABuilder("trusted");
  v1::Schedule created;
  ASSERT_TRUE(jobs_->CreateSchedule(Context().get(), req, &created).ok());
  auto spec_of = [&](const std::string& name) {
    const auto schedules = fake_.schedules.ListSchedules();  // held: not a temporary
    for (const auto& s : *schedules) {
      if (s.name == name) return s.spec_json;
    }
    return std::string();
  };
  EXPECT_THAT(spec_of("trusted"), Not(HasSubstr("\"untrusted\":true")));
  jobs_service_->SetUntrustedUsers(true);
  req.set_name("strangers");
  ASSERT_TRUE(jobs_->CreateSchedule(Context().get(), req, &created).ok());
  EXPECT_THAT(spec_of("strangers"), HasSubstr("\"untrusted\":true"));
}

TEST_F(ServicesTest, HelloWithMissingFieldsIsInvalidArgument) {
  struct Case {
    std::function<void(v1::Board*)> spoil;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::Board* b) { b->clear_name(); }, "board.name"},
      {[](v1::Board* b) { b->clear_arch(); }, "board.arch"},
      {[](v1::Board* b) { b->clear_memory_bytes(); }, "board.memory_bytes"},
      {[](v1::Board* b) { b->clear_kernels(); }, "board.kernels"},
  };
  for (const auto& c : cases) {
    v1::HelloRequest req;
    *req.mutable_board() = HelloBoard("b1");
    c.spoil(req.mutable_board());
    v1::HelloResponse resp;
    grpc::Status s = agents_->Hello(Context().get(), req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(s.error_message(), HasSubstr(c.field));
  }
  EXPECT_TRUE(fake_.boards.ListBoards()->empty());
}

TEST_F(ServicesTest, HelloRegistersTheBoardAndReleasesItsRuns) {
  v1::HelloRequest req;
  *req.mutable_board() = HelloBoard("b1");
  v1::HelloResponse resp;
  ASSERT_TRUE(agents_->Hello(Context().get(), req, &resp).ok());
  EXPECT_EQ(resp.heartbeat_interval_seconds(), AgentServiceImpl::kHeartbeatIntervalSeconds);
  auto boards = fake_.boards.ListBoards();
  ASSERT_EQ(boards->size(), 1u);
  EXPECT_EQ(boards->front().summary.name, "b1");
  EXPECT_EQ(boards->front().summary.health, BoardHealth::kOk);
  EXPECT_EQ(fake_.boards.released(), std::vector<std::string>{"b1"});
}

TEST_F(ServicesTest, AcquireWorkBeforeHelloIsFailedPrecondition) {
  v1::AcquireWorkRequest req;
  req.set_board("stranger");
  v1::AcquireWorkResponse resp;
  EXPECT_EQ(agents_->AcquireWork(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  req.set_board("");
  EXPECT_EQ(agents_->AcquireWork(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServicesTest, AcquireWorkParksUntilTheStoreHasAnOrder) {
  fake_.boards.AddBoard(Summary("b1"));
  dispatcher_.Start();
  auto call = StartAcquire("b1", 30);
  const v1::AcquireWorkResponse& resp = call->resp;
  auto& answered = call->answered;

  // Parked: the dispatcher found nothing for b1 and the call still waits.
  ASSERT_TRUE(fake_.work.WaitForNextWorkCalls(1, kGuard));
  EXPECT_EQ(dispatcher_.parked(), 1u);
  EXPECT_EQ(fake_.boards.touches("b1"), 1);

  Assignment a;
  a.run_id = 17;
  a.attempt_id = "attempt-17";
  a.job_id = 3;
  a.benchmark = "filemap-thrash";
  a.kernel = "vanilla";
  a.duration_seconds = 5;
  a.lease_seconds = 125;
  a.run_options = R"({"events":["mmap_lock:mmap_lock_start_locking","sw:page-faults"]})";
  fake_.work.Queue("b1", WorkOrder{a, std::nullopt});
  dispatcher_.WorkAvailable();

  ASSERT_EQ(answered.wait_for(kGuard), std::future_status::ready);
  grpc::Status s = answered.get();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(resp.has_assignment());
  EXPECT_EQ(resp.assignment().run_id(), 17);
  EXPECT_EQ(resp.assignment().attempt_id(), "attempt-17");
  EXPECT_EQ(resp.assignment().job_id(), 3);
  EXPECT_THAT(resp.assignment().options().events(),
              ::testing::ElementsAre("mmap_lock:mmap_lock_start_locking", "sw:page-faults"));
  EXPECT_FALSE(resp.has_switch_kernel());
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

TEST_F(ServicesTest, HeartbeatOfASupersededAttemptTellsTheAgentToStop) {
  v1::HeartbeatRequest req;
  req.set_board("b1");
  req.set_run_id(5);
  req.set_attempt_id("old");
  v1::HeartbeatResponse resp;
  ASSERT_TRUE(agents_->Heartbeat(Context().get(), req, &resp).ok());
  EXPECT_FALSE(resp.cancel());
  fake_.work.SetRenewLease(false);
  ASSERT_TRUE(agents_->Heartbeat(Context().get(), req, &resp).ok());
  EXPECT_TRUE(resp.cancel());
  auto renewals = fake_.work.renewals();
  ASSERT_EQ(renewals.size(), 2u);
  EXPECT_EQ(renewals[1].board, "b1");
  EXPECT_EQ(renewals[1].run_id, 5);
  EXPECT_EQ(renewals[1].attempt_id, "old");
}

TEST_F(ServicesTest, ReportResultIsFencedAndStored) {
  v1::ReportResultRequest req;
  req.set_board("b1");
  v1::ReportResultResponse resp;
  EXPECT_EQ(agents_->ReportResult(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // no run id
  req.set_run_id(5);
  EXPECT_EQ(agents_->ReportResult(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // no attempt id
  req.set_attempt_id("a5");
  req.set_succeeded(true);
  req.mutable_result()->set_throughput_rounds_per_second(12.5);
  ASSERT_TRUE(agents_->ReportResult(Context().get(), req, &resp).ok());
  auto results = fake_.work.results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].run_id, 5);
  EXPECT_EQ(results[0].attempt_id, "a5");
  EXPECT_DOUBLE_EQ(results[0].result.throughput, 12.5);

  fake_.work.SetStoreResult(absl::FailedPreconditionError("attempt a5 is not current"));
  EXPECT_EQ(agents_->ReportResult(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ServicesTest, WatchJobStreamsProgressUntilTheJobIsFinal) {
  fake_.boards.AddBoard(Summary("b1"));
  const int64_t job = Submit();
  dispatcher_.Start();
  v1::WatchJobRequest req;
  req.set_job_id(job);
  auto ctx = Context();
  auto stream = jobs_->WatchJob(ctx.get(), req);
  v1::JobProgress progress;
  ASSERT_TRUE(stream->Read(&progress));
  EXPECT_EQ(progress.job_id(), job);
  EXPECT_EQ(progress.state(), v1::JOB_STATE_QUEUED);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(job);
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &cancelled).ok());
  ASSERT_TRUE(stream->Read(&progress));
  EXPECT_EQ(progress.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(progress.runs().cancelled(), 2u);
  EXPECT_FALSE(stream->Read(&progress));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServicesTest, WatchJobOfAnUnknownJobIsNotFound) {
  v1::WatchJobRequest req;
  req.set_job_id(404);
  auto ctx = Context();
  auto stream = jobs_->WatchJob(ctx.get(), req);
  v1::JobProgress progress;
  EXPECT_FALSE(stream->Read(&progress));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// The agents' database work on bounded pools, off gRPC's callback threads.
class PooledServicesTest : public ServicesTest {
 protected:
  void SetUp() override {
    board_pool_ = std::make_unique<HandlerPool>(1, 8);
    result_pool_ = std::make_unique<ResultPool>(1, 1, 8, [this](std::vector<PendingResult>& batch) {
      agents_service_->StoreReported(batch);
    });
    Serve(nullptr);
  }
  void TearDown() override {
    gate_.Open();  // Shutdown waits for the calls on the pools
    for (auto& call : filling_) {
      ASSERT_EQ(call->answered.wait_for(kGuard), std::future_status::ready);
      EXPECT_TRUE(call->answered.get().ok());
    }
    ServicesTest::TearDown();
  }
  using PendingReport = PendingCall<v1::ReportResultRequest, v1::ReportResultResponse>;
  void StartReport(const v1::ReportResultRequest& req) {
    auto call = std::make_unique<PendingReport>();
    call->req = req;
    agents_->async()->ReportResult(call->ctx.get(), &call->req, &call->resp,
                                   [c = call.get()](grpc::Status s) { c->done.set_value(s); });
    filling_.push_back(std::move(call));
  }
  // Occupies the result pool's thread (an upload held in the store) and its one waiting
  // place (a second upload) until gate_ opens; both are stored then.
  void FillResultPool() {
    fake_.work.OnStoreResult([this] { gate_.Wait(); });
    StartReport(Result());
    gate_.WaitForWaiters(1);
    StartReport(Result());
    while (result_pool_->waiting() == 0) std::this_thread::yield();
  }
  // Occupies the board pool's one thread until gate_ opens.
  void BlockBoardPool() {
    ASSERT_TRUE(board_pool_->Submit([this] { gate_.Wait(); }));
    gate_.WaitForWaiters(1);
  }
  // A result upload of run 5 by board b1.
  static v1::ReportResultRequest Result() {
    v1::ReportResultRequest req;
    req.set_board("b1");
    req.set_run_id(5);
    req.set_attempt_id("a5");
    req.set_succeeded(true);
    return req;
  }
  testing_support::Gate gate_;
  std::vector<std::unique_ptr<PendingReport>> filling_;
};

TEST_F(PooledServicesTest, AgentCallsAreAnsweredFromThePools) {
  v1::HelloRequest hello;
  *hello.mutable_board() = HelloBoard("b1");
  v1::HelloResponse hello_resp;
  ASSERT_TRUE(agents_->Hello(Context().get(), hello, &hello_resp).ok());
  EXPECT_EQ(hello_resp.heartbeat_interval_seconds(), AgentServiceImpl::kHeartbeatIntervalSeconds);
  v1::ReportResultRequest req = Result();
  v1::ReportResultResponse resp;
  ASSERT_TRUE(agents_->ReportResult(Context().get(), req, &resp).ok());
  ASSERT_EQ(fake_.work.results().size(), 1u);
  req.set_run_id(0);
  EXPECT_EQ(agents_->ReportResult(Context().get(), req, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(PooledServicesTest, AFullResultPoolSaysComeBackLaterAndHeartbeatsStillPass) {
  FillResultPool();
  const v1::ReportResultRequest req = Result();
  v1::ReportResultResponse resp;
  grpc::Status busy = agents_->ReportResult(Context().get(), req, &resp);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::UNAVAILABLE);  // agents retry with backoff
  EXPECT_NE(busy.error_message().find("busy"), std::string::npos) << busy.error_message();
  EXPECT_TRUE(fake_.work.results().empty());
  v1::HeartbeatRequest beat;
  beat.set_board("b1");
  beat.set_run_id(5);
  beat.set_attempt_id("a5");
  v1::HeartbeatResponse beat_resp;
  EXPECT_TRUE(agents_->Heartbeat(Context().get(), beat, &beat_resp).ok());
  gate_.Open();
  // Once the pool has room again, the retry is stored.
  while (result_pool_->waiting() > 0) std::this_thread::yield();
  grpc::Status stored = agents_->ReportResult(Context().get(), req, &resp);
  ASSERT_TRUE(stored.ok()) << stored.error_message();
  EXPECT_EQ(fake_.work.results().size(), 3u);  // the two that filled the pool, and the retry
}

TEST_F(PooledServicesTest, AcquireWorkChecksTheBoardOnThePoolThenParks) {
  fake_.boards.AddBoard(Summary("b1"));
  dispatcher_.Start();
  BlockBoardPool();
  auto call = StartAcquire("b1", 30);
  // Queued behind the gate: neither touched nor parked, and gRPC's thread was not held.
  while (board_pool_->waiting() == 0) std::this_thread::yield();
  EXPECT_EQ(fake_.boards.touches("b1"), 0);
  EXPECT_EQ(dispatcher_.parked(), 0u);
  gate_.Open();
  ASSERT_TRUE(fake_.work.WaitForNextWorkCalls(1, kGuard));
  EXPECT_EQ(fake_.boards.touches("b1"), 1);
  EXPECT_EQ(dispatcher_.parked(), 1u);
  call->ctx->TryCancel();
  ASSERT_EQ(call->answered.wait_for(kGuard), std::future_status::ready);
  EXPECT_EQ(call->answered.get().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(PooledServicesTest, AcquireWorkCancelledWhileQueuedIsNeverLeftParked) {
  fake_.boards.AddBoard(Summary("b1"));
  dispatcher_.Start();
  BlockBoardPool();
  // Longer than the guard: a call left parked fails the test.
  auto call = StartAcquire("b1", 60);
  while (board_pool_->waiting() == 0) std::this_thread::yield();
  call->ctx->TryCancel();
  ASSERT_EQ(call->answered.wait_for(kGuard), std::future_status::ready);
  EXPECT_EQ(call->answered.get().error_code(), grpc::StatusCode::CANCELLED);
  gate_.Open();
  std::promise<void> drained;  // the pool runs in order: the check has run after this
  ASSERT_TRUE(board_pool_->Submit([&] { drained.set_value(); }));
  ASSERT_EQ(drained.get_future().wait_for(kGuard), std::future_status::ready);
  // Whether the server saw the cancel before or after the check, the call is not parked
  // (or unparked at once), long before its 60 s wait.
  const auto guard = std::chrono::steady_clock::now() + kGuard;
  while (dispatcher_.parked() > 0 && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

TEST_F(PooledServicesTest, AcquireWorkOnAFullBoardPoolSaysComeBackLater) {
  fake_.boards.AddBoard(Summary("b1"));
  BlockBoardPool();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(board_pool_->Submit([this] { gate_.Wait(); }));
  v1::AcquireWorkRequest req;
  req.set_board("b1");
  req.set_wait_seconds(30);
  v1::AcquireWorkResponse resp;
  grpc::Status busy = agents_->AcquireWork(Context().get(), req, &resp);
  EXPECT_EQ(busy.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(busy.error_message().find("busy"), std::string::npos) << busy.error_message();
  EXPECT_EQ(fake_.boards.touches("b1"), 0);
  EXPECT_EQ(dispatcher_.parked(), 0u);
}

// ---- Authorization ----

class AuthTest : public ServicesTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.tokens.CreateToken("alice", TokenRole::kUser, "", Sha256Hex(kUser)).ok());
    ASSERT_TRUE(
        fake_.tokens.CreateToken("agent-b1", TokenRole::kAgent, "b1", Sha256Hex(kAgentB1)).ok());
    Serve(&auth_);
  }
  grpc::Status ListJobs(const std::string& token) {
    v1::ListJobsRequest req;
    v1::ListJobsResponse resp;
    return jobs_->ListJobs(Context(token).get(), req, &resp);
  }
  grpc::Status Hello(const std::string& board, const std::string& token) {
    v1::HelloRequest req;
    *req.mutable_board() = HelloBoard(board);
    v1::HelloResponse resp;
    return agents_->Hello(Context(token).get(), req, &resp);
  }

  static constexpr const char* kUser = "flt_user_token";
  static constexpr const char* kAgentB1 = "flt_agent_b1_token";
  Authorizer auth_{&fake_.tokens, /*required=*/true, &clock_};
};

TEST_F(AuthTest, NoTokenOrAnUnknownOneIsUnauthenticated) {
  EXPECT_EQ(ListJobs("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Hello("b1", "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListJobs("flt_nobody").error_code(), grpc::StatusCode::UNAUTHENTICATED);

  v1::ListJobsRequest req;
  v1::ListJobsResponse resp;
  auto ctx = Context();
  ctx->AddMetadata("authorization", std::string("Basic ") + kUser);
  EXPECT_EQ(jobs_->ListJobs(ctx.get(), req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthTest, EachServiceTakesItsOwnRole) {
  EXPECT_TRUE(ListJobs(kUser).ok());
  grpc::Status s = ListJobs(kAgentB1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("agent token"));

  EXPECT_TRUE(Hello("b1", kAgentB1).ok());
  EXPECT_EQ(Hello("b1", kUser).error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(AuthTest, AnAgentTokenActsForItsBoardOnly) {
  grpc::Status s = Hello("b2", kAgentB1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("'b1'"));
  EXPECT_TRUE(fake_.boards.ListBoards()->empty());

  fake_.boards.AddBoard(Summary("b2"));
  v1::AcquireWorkRequest req;
  req.set_board("b2");
  v1::AcquireWorkResponse resp;
  EXPECT_EQ(agents_->AcquireWork(Context(kAgentB1).get(), req, &resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::HeartbeatRequest beat;
  beat.set_board("b2");
  beat.set_run_id(1);
  beat.set_attempt_id("a");
  v1::HeartbeatResponse beat_resp;
  EXPECT_EQ(agents_->Heartbeat(Context(kAgentB1).get(), beat, &beat_resp).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(fake_.work.renewals().empty());
}

TEST_F(AuthTest, ARevokedTokenWorksUntilItsCacheEntryLapses) {
  ASSERT_TRUE(ListJobs(kUser).ok());
  EXPECT_EQ(fake_.tokens.find_calls(), 1);
  ASSERT_TRUE(*fake_.tokens.RevokeToken("alice"));

  clock_.Advance(seconds(10) - milliseconds(1));
  EXPECT_TRUE(ListJobs(kUser).ok());  // still cached
  EXPECT_EQ(fake_.tokens.find_calls(), 1);

  clock_.Advance(milliseconds(1));
  grpc::Status s = ListJobs(kUser);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("revoked"));
  EXPECT_EQ(fake_.tokens.find_calls(), 2);
}

TEST_F(AuthTest, AnUnreachableTokenStoreIsUnavailableNotUnauthenticated) {
  fake_.tokens.SetUnavailable(true);
  EXPECT_EQ(ListJobs(kUser).error_code(), grpc::StatusCode::UNAVAILABLE);
  fake_.tokens.SetUnavailable(false);
  EXPECT_TRUE(ListJobs(kUser).ok());
}

}  // namespace
}  // namespace faultline::controller
