#include "runtime/tiered_compile.h"

#include <unistd.h>

#include <cstdlib>

#include "runtime/settings.h"

namespace torch_tpu::runtime {

int64_t tier_up_runs() {
  static const int64_t runs = *settings::integer("TORCH_TPU_TIERED_COMPILE");
  return runs;
}

BackgroundCompiler& BackgroundCompiler::get() {
  static BackgroundCompiler* instance = [] {
    auto* c = new BackgroundCompiler();  // leaked: see the header
    std::atexit([] { BackgroundCompiler::get().stop(); });
    return c;
  }();
  return *instance;
}

BackgroundCompiler::BackgroundCompiler() : owner_pid_(::getpid()) {}

bool BackgroundCompiler::owned() const { return ::getpid() == owner_pid_; }

bool BackgroundCompiler::post(std::function<void()> job) {
  if (!owned()) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return false;
  if (thread_ == nullptr) {
    thread_ = new std::thread([this] { loop(); });
    thread_->detach();
  }
  jobs_.push_back(std::move(job));
  changed_.notify_all();
  return true;
}

void BackgroundCompiler::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
    if (stopping_) {
      jobs_.clear();
      changed_.notify_all();
      changed_.wait(lock, [] { return false; });  // parked until the process ends
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    try {
      job();  // a job reports its own errors; one that throws is dropped
    } catch (...) {
    }
    job = nullptr;
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

void BackgroundCompiler::wait_idle() {
  if (!owned()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return (jobs_.empty() && !running_) || stopping_; });
}

void BackgroundCompiler::stop() {
  if (!owned()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  jobs_.clear();
  changed_.notify_all();
  changed_.wait(lock, [&] { return !running_; });
}

}  // namespace torch_tpu::runtime
