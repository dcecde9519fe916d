// torch.profiler's device events for tpu: a Kineto child profiler, registered through
// PyTorch's PrivateUse1 route (REGISTER_PRIVATEUSE1_PROFILER). While a session asking for
// device activities records, the runtime keeps its trace records (runtime/trace.h); at the
// end they become Kineto activities: one kernel per program execution on a lane per
// device, linked to the host op that launched it by its correlation id (which gives
// key_averages its device time per op), and the host spans (compiles, transfers, flushes)
// on the threads that did them.
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <output_base.h>

#include "runtime/runtime.h"
#include "runtime/trace.h"

// libkineto declares CpuTraceBuffer without defining it in the headers PyTorch ships,
// and a session must return one (ours returns none: Kineto then keeps no buffer of
// ours). A deleter that is never called (the pointer is always null) lets this file
// compile; hidden visibility keeps it out of libkineto's way.
template <>
struct std::default_delete<libkineto::CpuTraceBuffer> {
  void operator()(libkineto::CpuTraceBuffer*) const noexcept {}
};

namespace torch_tpu::aten {

namespace {

using libkineto::ActivityType;

const std::set<ActivityType>& device_activities() {
  static const std::set<ActivityType> types{ActivityType::CONCURRENT_KERNEL,
                                            ActivityType::PRIVATEUSE1_RUNTIME};
  return types;
}

class TpuProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  // Once registered, Kineto configures this profiler for every session, CPU-only ones
  // too: such a session records nothing.
  TpuProfilerSession(bool devices, bool host)
      : active_(devices || host), host_(host), devices_wanted_(devices) {}

  void start() override {
    if (!active_) return;
    runtime::trace::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (!active_) return;
    // Every run launched so far must have completed for its end time to be known.
    if (runtime::Runtime::initialized()) {
      runtime::Runtime& rt = runtime::Runtime::get();
      for (int d = 0; d < rt.device_count(); ++d) rt.synchronize(d);
    }
    runtime::trace::await_completions();
    runtime::trace::stop();
    recording_ = runtime::trace::take();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(
        logger, [](int32_t) { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked,
                    int64_t start, int64_t end) override {
    if (!active_) return;
    span_ = std::make_unique<libkineto::TraceSpan>(start, end, "tpu");
    if (devices_wanted_) emit_runs(logger, linked);
    if (host_) emit_spans(logger, linked);
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    if (!active_) return nullptr;
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "tpu:0", "tpu"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (int d : devices_) infos.push_back({0, d, d, "tpu:" + std::to_string(d) + " programs"});
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override {
    if (active_) runtime::trace::push_correlation(id);
  }
  void popCorrelationId() override {
    if (active_) runtime::trace::pop_correlation();
  }

 private:
  // A device's runs in the order they were launched (a device lane, as a TPU's or a
  // CUDA stream's); each starts when it was launched or when the run before it ended,
  // whichever is later. Not in the order their completions were seen: a small program
  // that reads a large one's output can run inline as that output becomes ready (XLA:CPU)
  // and report its completion before the large one does, which put the large run's whole
  // time on the small one (vLLM's logits gather after the step program: 40 ms, not 0.1).
  void emit_runs(libkineto::ActivityLogger& logger,
                 const libkineto::getLinkedActivityCallback& linked) {
    std::map<int, std::vector<const runtime::trace::DeviceRun*>> per_device;
    for (const auto& run : recording_.runs) per_device[run->device].push_back(run.get());
    for (auto& [device, runs] : per_device) {
      devices_.push_back(device);
      std::stable_sort(runs.begin(), runs.end(),
                       [](const auto* a, const auto* b) { return a->launch_ns < b->launch_ns; });
      int64_t device_free = 0;
      for (const auto* run : runs) {
        int64_t begin = std::max(run->launch_ns, device_free);
        // A completion seen before the previous run's, or in the same nanosecond, still
        // gets a distinct, ordered span.
        int64_t finish = std::max(run->end_ns.load(), begin + 1);
        device_free = finish;
        auto& a = activities_.emplace_back(*span_, ActivityType::CONCURRENT_KERNEL, run->name);
        a.startTime = begin;
        a.endTime = finish;
        a.device = device;
        a.resource = 0;
        a.id = static_cast<int32_t>(run->correlation);
        a.linked = run->correlation != 0 ? linked(a.id) : nullptr;
        a.addMetadataQuoted("program", run->fingerprint);
        a.addMetadata("device", device);
        a.addMetadata("correlation", run->correlation);
        a.log(logger);
      }
    }
  }

  void emit_spans(libkineto::ActivityLogger& logger,
                  const libkineto::getLinkedActivityCallback& linked) {
    const int32_t pid = static_cast<int32_t>(::getpid());
    for (const auto& span : recording_.spans) {
      auto& a = activities_.emplace_back(*span_, ActivityType::PRIVATEUSE1_RUNTIME, span.name);
      a.startTime = span.start_ns;
      a.endTime = std::max(span.end_ns, span.start_ns + 1);
      a.device = pid;
      a.resource = span.thread;
      a.threadId = span.thread;
      a.id = static_cast<int32_t>(span.correlation);
      a.linked = span.correlation != 0 ? linked(a.id) : nullptr;
      for (const auto& [key, value] : span.text) a.addMetadataQuoted(key, value);
      for (const auto& [key, value] : span.numbers) a.addMetadata(key, value);
      a.log(logger);
    }
  }

  bool active_, host_, devices_wanted_;
  runtime::trace::Recording recording_;
  std::vector<int> devices_;
  // Kineto's logger keeps pointers to the activities: they live as long as the session.
  std::unique_ptr<libkineto::TraceSpan> span_;
  std::deque<libkineto::GenericTraceActivity> activities_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
  static int level(const std::string& config, const std::string& name) {
    size_t at = config.find(name + ":");
    if (at == std::string::npos || (at > 0 && config[at - 1] != ',')) return 1;
    return std::atoi(config.c_str() + at + name.size() + 1);
  }

 public:
  const std::string& name() const override {
    static const std::string n = "torch_tpu";
    return n;
  }
  const std::set<ActivityType>& availableActivities() const override { return device_activities(); }
  // torch.tpu.profiler.TpuProfilerConfig's levels arrive in Kineto's custom config
  // ("host_tracer_level:2,device_tracer_level:1,..."): level 0 turns that side off.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config& config) override {
    const bool asked = types.count(ActivityType::CONCURRENT_KERNEL) > 0;
    return std::make_unique<TpuProfilerSession>(
        asked && level(config.getCustomConfig(), "device_tracer_level") != 0,
        asked && level(config.getCustomConfig(), "host_tracer_level") != 0);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace

}  // namespace torch_tpu::aten
