#include "runtime/exit_gate.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace torch_tpu::runtime {

namespace {

struct State {
  std::mutex mutex;
  std::condition_variable changed;
  int held = 0;
  bool closed = false;
  std::thread::id closer;
};

// Leaked: parked threads wait on it while the process's static destructors run.
State& state() {
  static State* s = new State();
  return *s;
}

}  // namespace

ExitGate::Pass::Pass() {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.closed && std::this_thread::get_id() != s.closer)
    s.changed.wait(lock, [] { return false; });  // parked until the process ends
  ++s.held;
}

ExitGate::Pass::~Pass() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  --s.held;
  s.changed.notify_all();
}

bool ExitGate::close(std::chrono::milliseconds timeout) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.closed = true;
  s.closer = std::this_thread::get_id();
  return s.changed.wait_for(lock, timeout, [&] { return s.held == 0; });
}

bool ExitGate::closed() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.closed;
}

}  // namespace torch_tpu::runtime
