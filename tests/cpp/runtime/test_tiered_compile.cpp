#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "runtime/tiered_compile.h"

namespace torch_tpu {
namespace {

using runtime::BackgroundCompiler;

TEST(BackgroundCompiler, RunsJobsInOrderOffTheCallingThread) {
  BackgroundCompiler& worker = BackgroundCompiler::get();
  std::vector<int> order;  // written by the worker only, read after wait_idle
  std::atomic<bool> elsewhere{true};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(worker.post([&, i] {
      order.push_back(i);
      if (std::this_thread::get_id() == caller) elsewhere = false;
    }));
  worker.wait_idle();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(elsewhere);
}

TEST(BackgroundCompiler, AJobThatThrowsIsDroppedAndTheNextRuns) {
  BackgroundCompiler& worker = BackgroundCompiler::get();
  std::atomic<int> ran{0};
  worker.post([] { throw std::runtime_error("compile failed"); });
  worker.post([&] { ran++; });
  worker.wait_idle();
  EXPECT_EQ(ran.load(), 1);
}

// exit() while a job runs and more are queued: the exit handler waits for the running
// one, drops the rest, and the process ends with its own status (no std::terminate).
TEST(BackgroundCompilerDeathTest, ExitWaitsForTheRunningJobAndDropsTheQueue) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        BackgroundCompiler& worker = BackgroundCompiler::get();
        std::atomic<bool> started{false};
        worker.post([&] {
          started = true;
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          std::fprintf(stderr, "job finished\n");
        });
        worker.post([] { std::fprintf(stderr, "queued job ran\n"); });
        while (!started) std::this_thread::yield();
        std::exit(3);
      },
      testing::ExitedWithCode(3), "^job finished\n$");
}

TEST(BackgroundCompilerDeathTest, PostAfterStopRunsNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        BackgroundCompiler& worker = BackgroundCompiler::get();
        worker.stop();
        std::exit(worker.post([] { std::fprintf(stderr, "ran\n"); }) ? 1 : 0);
      },
      testing::ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace torch_tpu
