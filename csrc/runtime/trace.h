// What the profiler shows: program executions with their device times, and the host
// work done for them (compiles, transfers, fused-group flushes, collectives). Recorded
// only while a profiler session is on; when none is, the cost is one relaxed atomic load
// per event site. Torch-free: csrc/aten/profiler.cpp turns the records into Kineto
// activities for torch.profiler.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch_tpu::runtime::trace {

namespace detail {
extern std::atomic<bool> on;
}

inline bool enabled() { return detail::on.load(std::memory_order_relaxed); }

// Nanoseconds since the Unix epoch on the system clock: Kineto's time base.
int64_t now_ns();
// The calling thread's kernel id, as Kineto names host lanes.
int32_t thread_id();

// The profiler's correlation ids: the session pushes the id of each host op as it starts
// on the op's thread; a launch or host event is tagged with the innermost one.
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t correlation();

// One program execution. The device's end is when the run's PJRT completion event
// fired (set from the plugin's thread); its start is derived when the trace is read:
// the later of the launch and the end of the run the device finished before it.
struct DeviceRun {
  std::string name;         // the op, "fused group (N ops)" or "graph (N ops)"
  std::string fingerprint;  // the program's
  int device = 0;
  uint64_t correlation = 0;
  int64_t launch_ns = 0;
  std::atomic<int64_t> end_ns{0};
};

// A host-side span on the thread that did the work.
struct HostSpan {
  std::string name;
  int64_t start_ns = 0, end_ns = 0;
  int32_t thread = 0;
  uint64_t correlation = 0;
  std::vector<std::pair<std::string, std::string>> text;  // metadata shown as strings
  std::vector<std::pair<std::string, double>> numbers;    // and as numbers
};

// Starts a recording (dropping what an earlier one left), or ends it.
void start();
void stop();

// Registers an execution launched at `launch_ns`; the caller sets `end_ns` when it
// completes, from the run's completion event.
std::shared_ptr<DeviceRun> device_run(std::string name, std::string fingerprint, int device,
                                      int64_t launch_ns);
// Waits until every registered run has its end time. Call after the device work is
// done: a completion event's callback may still be running when its waiters wake.
void await_completions();
// Records a host span that began at `start_ns` and ends now, on this thread.
void host_span(HostSpan span);

struct Recording {
  std::vector<std::shared_ptr<DeviceRun>> runs;
  std::vector<HostSpan> spans;
};
// Hands over what was recorded, leaving the buffers empty.
Recording take();

// A host span from construction to destruction, when a recording is on.
class Scope {
 public:
  explicit Scope(const char* name) : on_(enabled()) {
    if (on_) {
      span_.name = name;
      span_.start_ns = now_ns();
    }
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if (on_) host_span(std::move(span_));
  }
  void name(std::string n) {
    if (on_) span_.name = std::move(n);
  }
  void text(const char* key, std::string value) {
    if (on_) span_.text.emplace_back(key, std::move(value));
  }
  void number(const char* key, double value) {
    if (on_) span_.numbers.emplace_back(key, value);
  }

 private:
  bool on_;
  HostSpan span_;
};

}  // namespace torch_tpu::runtime::trace
