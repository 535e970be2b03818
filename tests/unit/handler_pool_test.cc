// HandlerPool: the bounded pool the agents' calls do their database work on.
#include "services/controller/api/handler_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace faultline::controller {
namespace {

TEST(HandlerPool, RunsTasksOnItsThreadsAndRefusesBeyondItsBound) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  {
    HandlerPool pool(1, 2);
    std::promise<std::thread::id> where;
    ASSERT_TRUE(pool.Submit([&] {
      where.set_value(std::this_thread::get_id());
      gate.wait();
      ++ran;
    }));
    EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
    // The thread is busy: two may wait, the third is refused (and never runs).
    EXPECT_TRUE(pool.Submit([&] { ++ran; }));
    EXPECT_TRUE(pool.Submit([&] { ++ran; }));
    EXPECT_EQ(pool.waiting(), 2u);
    EXPECT_FALSE(pool.Submit([&] { ran += 100; }));
    release.set_value();
  }  // the destructor runs what waits, then joins
  EXPECT_EQ(ran.load(), 3);
}

}  // namespace
}  // namespace faultline::controller
