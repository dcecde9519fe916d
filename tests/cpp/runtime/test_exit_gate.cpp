#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "runtime/exit_gate.h"

namespace torch_tpu {
namespace {

using runtime::ExitGate;
using std::chrono::milliseconds;

TEST(ExitGate, PassesAreGivenWhileOpen) {
  ExitGate::Pass a;
  ExitGate::Pass b;  // nested passes, as a compile inside a launch would take
  EXPECT_FALSE(ExitGate::closed());
}

// Closing is for good, so each case runs in a child process.
TEST(ExitGateDeathTest, CloseWaitsForThePassesHeld) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atomic<bool> holding{false};
        std::thread worker([&] {
          ExitGate::Pass pass;
          holding = true;
          std::this_thread::sleep_for(milliseconds(200));
          std::fprintf(stderr, "work done\n");
        });
        while (!holding) std::this_thread::yield();
        const bool drained = ExitGate::close(milliseconds(10000));
        std::fprintf(stderr, "closed\n");
        worker.join();
        std::exit(drained ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^work done\nclosed\n$");
}

TEST(ExitGateDeathTest, CloseGivesUpAfterTheTimeout) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        std::atomic<bool> holding{false};
        std::thread([&] {
          ExitGate::Pass pass;
          holding = true;
          std::this_thread::sleep_for(std::chrono::hours(1));
        }).detach();
        while (!holding) std::this_thread::yield();
        std::exit(ExitGate::close(milliseconds(50)) ? 1 : 0);
      },
      testing::ExitedWithCode(0), "^$");
}

// Once closed, another thread asking for a pass is parked (never starts plugin work);
// the closing thread itself still gets passes.
TEST(ExitGateDeathTest, AfterCloseOtherThreadsAreParked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ASSERT_TRUE(ExitGate::close(milliseconds(1000)));
        { ExitGate::Pass own; }
        std::atomic<bool> started{false};
        std::thread([&] {
          started = true;
          ExitGate::Pass pass;
          std::fprintf(stderr, "passed\n");
        }).detach();
        while (!started) std::this_thread::yield();
        std::this_thread::sleep_for(milliseconds(200));
        std::exit(ExitGate::closed() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "^$");
}

}  // namespace
}  // namespace torch_tpu
