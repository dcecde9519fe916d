// Tiered compilation. A new program compiles first at XLA:CPU's cheapest backend
// optimization level (0: about 0.6x the compile time of the default level, up to twice
// the run time of a small program); once it has run TORCH_TPU_TIERED_COMPILE times it is
// hot, and a background thread compiles it again at the level it would have had
// (compile_policy.h), stores that in the disk tier and swaps it into the program: runs
// launched before keep the old executable alive until they complete. Disk entries are
// keyed by tier: a miss looks for the optimized entry first (a warm start that finds it
// never tiers), then for the first tier's (stored when compiled, so programs that never
// got hot do not compile again either).
//
// The background compile is not a user-visible compile: it never takes the GIL, is
// allowed under no_compile(), counts in metrics().tier_ups (not compiles) and logs a
// "tier-up" record.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace torch_tpu::runtime {

// The backend optimization level of the first tier.
inline constexpr int64_t kFirstTierOptimizationLevel = 0;

// TORCH_TPU_TIERED_COMPILE: the runs after which a first-tier program is recompiled
// optimized; 0 turns tiering off (every program compiles optimized at once).
int64_t tier_up_runs();

// One worker thread running jobs in order, for the process's life. It is never joined
// nor destroyed (the instance is leaked): at exit a handler drops the queued jobs and
// waits for the one running, so no compile is cut off while the plugin's statics are
// torn down, and no joinable std::thread is ever destroyed. In a forked child (the
// thread did not follow) post() runs nothing and exit waits for nothing.
class BackgroundCompiler {
 public:
  static BackgroundCompiler& get();
  // Queues `job`; false (and `job` dropped) once the process is exiting or in a fork.
  bool post(std::function<void()> job);
  // Waits until every job posted so far has run.
  void wait_idle();
  // Drops the queued jobs and waits for the running one; later posts are dropped.
  void stop();

 private:
  BackgroundCompiler();
  void loop();
  bool owned() const;  // false in a forked child

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false, stopping_ = false;
  int owner_pid_;
  std::thread* thread_ = nullptr;  // detached, leaked with the instance
};

}  // namespace torch_tpu::runtime
