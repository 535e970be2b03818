// The agent's conversation with the controller (AgentClient::Serve): spooled results before
// hello, backoff after failures, no work while the board needs a check, work handed to the
// run and kernel-switch flows, and Stop() ending a long poll. The controller is a scripted
// AgentService served in-process over real gRPC; time is the fake clock (nothing sleeps).
#include "agent/rpc/agent_client.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "tests/unit/agent_fakes.h"

namespace faultline::agent {
namespace {

using testing::FakeClock;

// A controller that records every call in order and answers from a script.
class ScriptedController final : public v1::AgentService::Service {
 public:
  // Hello answers: each call pops one status (empty: OK).
  std::deque<grpc::Status> hello_script;
  // AcquireWork answers: each call pops one; when none are left the call blocks until the
  // client cancels it (after running `on_idle` once, which the tests use to stop the agent).
  std::deque<v1::AcquireWorkResponse> work_script;
  std::function<void()> on_idle = [] {};
  // Called on every hello with the number of hellos so far.
  std::function<void(int)> on_hello = [](int) {};
  uint32_t heartbeat_interval_seconds = 7;

  grpc::Status Hello(grpc::ServerContext* ctx, const v1::HelloRequest* req,
                     v1::HelloResponse* resp) override {
    grpc::Status status = grpc::Status::OK;
    int n = 0;
    {
      std::lock_guard lock(mu_);
      calls_.push_back("hello");
      hellos_.push_back(*req);
      n = static_cast<int>(hellos_.size());
      if (!hello_script.empty()) {
        status = hello_script.front();
        hello_script.pop_front();
      }
    }
    if (ctx->client_metadata().count("authorization") == 0) {
      return {grpc::StatusCode::UNAUTHENTICATED, "no token"};
    }
    on_hello(n);
    resp->set_heartbeat_interval_seconds(heartbeat_interval_seconds);
    return status;
  }

  grpc::Status AcquireWork(grpc::ServerContext* ctx, const v1::AcquireWorkRequest* req,
                           v1::AcquireWorkResponse* resp) override {
    bool idle = false;
    {
      std::lock_guard lock(mu_);
      calls_.push_back("acquire");
      EXPECT_EQ(req->board(), "b1");
      if (!work_script.empty()) {
        *resp = work_script.front();
        work_script.pop_front();
        return grpc::Status::OK;
      }
      idle = !idle_called_;
      idle_called_ = true;
    }
    if (idle) on_idle();
    // The long poll: held until the client gives up on it (Stop cancels it).
    std::unique_lock lock(mu_);
    while (!ctx->IsCancelled()) cv_.wait_for(lock, std::chrono::milliseconds(5));
    return {grpc::StatusCode::CANCELLED, "cancelled"};
  }

  grpc::Status ReportResult(grpc::ServerContext*, const v1::ReportResultRequest* req,
                            v1::ReportResultResponse*) override {
    std::lock_guard lock(mu_);
    calls_.push_back("report " + std::to_string(req->run_id()));
    return grpc::Status::OK;
  }

  std::vector<std::string> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<v1::HelloRequest> hellos() {
    std::lock_guard lock(mu_);
    return hellos_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> calls_;
  std::vector<v1::HelloRequest> hellos_;
  bool idle_called_ = false;
};

class AgentClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&controller_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    spool_dir_ = std::filesystem::temp_directory_path() /
                 ("faultline-agent-client-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(spool_dir_);
    std::filesystem::create_directories(spool_dir_);
    spool_ = std::make_unique<ResultSpool>(spool_dir_.string());
  }
  void TearDown() override {
    server_->Shutdown();
    std::filesystem::remove_all(spool_dir_);
  }

  AgentClient& Client() {
    AgentClientOptions options;
    options.board.set_name("b1");
    options.board.set_arch("x86_64");
    options.acquire_wait_seconds = 30;
    options.min_backoff = std::chrono::milliseconds(500);
    options.max_backoff = std::chrono::milliseconds(10'000);
    options.spool = spool_.get();
    options.token = "agent-token";
    client_ = std::make_unique<AgentClient>(
        options, server_->InProcessChannel(grpc::ChannelArguments()), clock_);
    return *client_;
  }

  static v1::ReportResultRequest Result(int64_t run_id) {
    v1::ReportResultRequest r;
    r.set_run_id(run_id);
    r.set_attempt_id("attempt-" + std::to_string(run_id));
    r.mutable_result()->set_rounds(10);
    return r;
  }

  ScriptedController controller_;
  std::unique_ptr<grpc::Server> server_;
  std::filesystem::path spool_dir_;
  std::unique_ptr<ResultSpool> spool_;
  FakeClock clock_;
  std::unique_ptr<AgentClient> client_;
};

TEST_F(AgentClientTest, SendsTheSpoolBeforeHelloThenPollsAndStops) {
  ASSERT_TRUE(spool_->Put(Result(12)).ok());
  ASSERT_TRUE(spool_->Put(Result(9)).ok());
  AgentClient& client = Client();
  controller_.on_idle = [&] { client.Stop(); };

  WorkHandlers handlers;
  handlers.run = [](const v1::Assignment&, const std::atomic<bool>&) {
    ADD_FAILURE() << "no assignment was handed out";
  };
  EXPECT_EQ(client.Serve(handlers), 0);

  // Oldest run first, both before the hello (which releases the board's runs).
  EXPECT_EQ(controller_.calls(),
            (std::vector<std::string>{"report 9", "report 12", "hello", "acquire"}));
  auto left = spool_->List();
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty()) << "delivered results stay spooled";
  ASSERT_EQ(controller_.hellos().size(), 1u);
  EXPECT_EQ(controller_.hellos()[0].board().health(), v1::BOARD_HEALTH_OK);
  EXPECT_EQ(client.heartbeat_interval(), std::chrono::seconds(7));
  EXPECT_TRUE(clock_.waits().empty()) << "no backoff without a failure";
}

TEST_F(AgentClientTest, BacksOffAfterFailedHellosWithinBoundsAndResetsOnSuccess) {
  for (int i = 0; i < 6; ++i) {
    controller_.hello_script.push_back({grpc::StatusCode::UNAVAILABLE, "database down"});
  }
  AgentClient& client = Client();
  controller_.on_idle = [&] { client.Stop(); };
  WorkHandlers handlers;
  handlers.run = [](const v1::Assignment&, const std::atomic<bool>&) {};
  EXPECT_EQ(client.Serve(handlers), 0);

  const auto waits = clock_.waits();
  ASSERT_EQ(waits.size(), 6u) << "one backoff per failed hello";
  for (size_t i = 0; i < waits.size(); ++i) {
    const int64_t cap = std::min<int64_t>(10'000, int64_t{500} << (i + 1));
    EXPECT_GE(waits[i].count(), 250) << "backoff " << i;
    EXPECT_LE(waits[i].count(), cap) << "backoff " << i;
  }
  EXPECT_EQ(controller_.hellos().size(), 7u);
  EXPECT_EQ(controller_.calls().back(), "acquire");
}

TEST_F(AgentClientTest, ABoardThatNeedsACheckSaysSoAndAsksForNoWork) {
  AgentClient& client = Client();
  controller_.on_hello = [&](int n) {
    if (n == 3) client.Stop();
  };
  WorkHandlers handlers;
  handlers.run = [](const v1::Assignment&, const std::atomic<bool>&) {
    ADD_FAILURE() << "a board that needs a check got work";
  };
  handlers.health = [] { return std::string("switch to 'patched' came back running 6.1"); };
  EXPECT_EQ(client.Serve(handlers), 0);

  const auto hellos = controller_.hellos();
  ASSERT_GE(hellos.size(), 2u);
  for (const auto& h : hellos) {
    EXPECT_EQ(h.board().health(), v1::BOARD_HEALTH_NEEDS_CHECK);
    EXPECT_EQ(h.board().health_reason(), "switch to 'patched' came back running 6.1");
  }
  for (const auto& call : controller_.calls()) EXPECT_NE(call, "acquire");
  // Between hellos it stays visible at the heartbeat interval the controller asked for.
  const auto waits = clock_.waits();
  ASSERT_GE(waits.size(), 2u);
  EXPECT_EQ(waits[0], std::chrono::seconds(7));
}

TEST_F(AgentClientTest, HandsRunsToTheRunFlowAndASwitchFailureBecomesNeedsCheckAtOnce) {
  v1::AcquireWorkResponse run;
  run.mutable_assignment()->set_run_id(41);
  v1::AcquireWorkResponse nothing;  // the long poll's deadline passed without work
  v1::AcquireWorkResponse order;
  order.mutable_switch_kernel()->set_label("patched");
  controller_.work_script = {run, nothing, order};

  AgentClient& client = Client();
  std::string health_reason;
  std::vector<int64_t> ran;
  std::vector<std::string> switched;
  controller_.on_idle = [&] { client.Stop(); };
  WorkHandlers handlers;
  handlers.run = [&](const v1::Assignment& a, const std::atomic<bool>& stopping) {
    EXPECT_FALSE(stopping.load());
    ran.push_back(a.run_id());
  };
  handlers.kernel_switch = [&](const v1::KernelSwitch& s, const std::atomic<bool>&) {
    switched.push_back(s.label());
    health_reason = "switch to 'patched': kexec failed";
    return health_reason;
  };
  handlers.health = [&] { return health_reason; };
  // After the failed switch the agent says hello with needs-check; the test then clears the
  // check (an operator did) so the agent polls again and the script ends.
  controller_.on_hello = [&](int n) {
    if (n == 2) health_reason.clear();
  };
  EXPECT_EQ(client.Serve(handlers), 0);

  EXPECT_EQ(ran, (std::vector<int64_t>{41}));
  EXPECT_EQ(switched, (std::vector<std::string>{"patched"}));
  const auto hellos = controller_.hellos();
  ASSERT_GE(hellos.size(), 3u);
  EXPECT_EQ(hellos[0].board().health(), v1::BOARD_HEALTH_OK);
  EXPECT_EQ(hellos[1].board().health(), v1::BOARD_HEALTH_NEEDS_CHECK);
  EXPECT_EQ(hellos[1].board().health_reason(), "switch to 'patched': kexec failed");
  EXPECT_EQ(controller_.calls(), (std::vector<std::string>{"hello", "acquire", "acquire", "acquire",
                                                           "hello", "hello", "acquire"}));
  // The failed switch is reported at once: no backoff before the needs-check hello.
  const auto waits = clock_.waits();
  ASSERT_EQ(waits.size(), 1u) << "only the needs-check wait";
  EXPECT_EQ(waits[0], std::chrono::seconds(7));
}

TEST_F(AgentClientTest, AnAgentThatCannotSwitchKernelsNeverTakesAnOrder) {
  v1::AcquireWorkResponse order;
  order.mutable_switch_kernel()->set_label("patched");
  controller_.work_script = {order};
  AgentClient& client = Client();
  controller_.on_idle = [&] { client.Stop(); };
  WorkHandlers handlers;
  handlers.run = [](const v1::Assignment&, const std::atomic<bool>&) {};
  // kernel_switch left null: the order is refused and the agent says hello again.
  EXPECT_EQ(client.Serve(handlers), 0);
  EXPECT_EQ(controller_.calls(),
            (std::vector<std::string>{"hello", "acquire", "hello", "acquire"}));
}

}  // namespace
}  // namespace faultline::agent
