#include "runtime/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace torch_tpu::runtime::trace {

namespace detail {
std::atomic<bool> on{false};
}

namespace {

struct Buffers {
  std::mutex mutex;
  Recording recording;
};

Buffers& buffers() {
  static Buffers b;
  return b;
}

thread_local std::vector<uint64_t> correlations;

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int32_t thread_id() {
  thread_local const int32_t id = static_cast<int32_t>(::syscall(SYS_gettid));
  return id;
}

void push_correlation(uint64_t id) { correlations.push_back(id); }

void pop_correlation() {
  if (!correlations.empty()) correlations.pop_back();
}

uint64_t correlation() { return correlations.empty() ? 0 : correlations.back(); }

void start() {
  Buffers& b = buffers();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.recording = {};
  detail::on.store(true, std::memory_order_relaxed);
}

void stop() { detail::on.store(false, std::memory_order_relaxed); }

std::shared_ptr<DeviceRun> device_run(std::string name, std::string fingerprint, int device,
                                      int64_t launch_ns) {
  auto run = std::make_shared<DeviceRun>();
  run->name = std::move(name);
  run->fingerprint = std::move(fingerprint);
  run->device = device;
  run->correlation = correlation();
  run->launch_ns = launch_ns;
  Buffers& b = buffers();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.recording.runs.push_back(run);
  return run;
}

void await_completions() {
  std::vector<std::shared_ptr<DeviceRun>> runs;
  {
    Buffers& b = buffers();
    std::lock_guard<std::mutex> lock(b.mutex);
    runs = b.recording.runs;
  }
  for (const auto& run : runs)
    while (run->end_ns.load() == 0) std::this_thread::yield();
}

void host_span(HostSpan span) {
  span.end_ns = now_ns();
  span.thread = thread_id();
  span.correlation = correlation();
  Buffers& b = buffers();
  std::lock_guard<std::mutex> lock(b.mutex);
  b.recording.spans.push_back(std::move(span));
}

Recording take() {
  Buffers& b = buffers();
  std::lock_guard<std::mutex> lock(b.mutex);
  Recording out = std::move(b.recording);
  b.recording = {};
  return out;
}

}  // namespace torch_tpu::runtime::trace
