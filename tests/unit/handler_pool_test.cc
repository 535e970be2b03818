// HandlerPool and BatchPool: the bounded pools the agents' calls do their database work on.
#include "services/controller/api/handler_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <vector>

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

// What waits while the thread is busy is taken together, in arrival order, at most
// max_batch at a time; a lone item goes at once, alone.
TEST(BatchPool, TakesWhatQueuedUpMeanwhileAsOneBatch) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> first_taken;
  std::mutex mu;
  std::vector<std::vector<int>> batches;
  {
    BatchPool<int> pool(1, 16, 3, [&](std::vector<int>& batch) {
      {
        std::lock_guard lock(mu);
        batches.push_back(batch);
      }
      if (batch.front() == 0) {
        first_taken.set_value();
        gate.wait();
      }
    });
    ASSERT_TRUE(pool.Submit(0));
    first_taken.get_future().wait();
    for (int i = 1; i <= 5; ++i) ASSERT_TRUE(pool.Submit(i));
    EXPECT_EQ(pool.waiting(), 5u);
    release.set_value();
  }  // the destructor runs what waits, then joins
  const std::vector<std::vector<int>> expected{{0}, {1, 2, 3}, {4, 5}};
  EXPECT_EQ(batches, expected);
}

TEST(BatchPool, RefusesBeyondItsBound) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> first_taken;
  std::atomic<int> seen{0};
  {
    BatchPool<int> pool(1, 1, 8, [&](std::vector<int>& batch) {
      seen += static_cast<int>(batch.size());
      if (batch.front() == 0) {
        first_taken.set_value();
        gate.wait();
      }
    });
    ASSERT_TRUE(pool.Submit(0));
    first_taken.get_future().wait();
    EXPECT_TRUE(pool.Submit(1));
    EXPECT_FALSE(pool.Submit(2));  // one may wait: refused, never run
    release.set_value();
  }
  EXPECT_EQ(seen.load(), 2);
}

}  // namespace
}  // namespace faultline::controller
