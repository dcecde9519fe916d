#include "aten/event.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include <c10/util/Exception.h>

#include "aten/device.h"
#include "runtime/fused_group.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

using Clock = std::chrono::steady_clock;

// When the last of an event's work finished, filled in by PJRT completion callbacks.
struct Completion {
  explicit Completion(size_t pending) : remaining(pending) {}
  std::atomic<size_t> remaining;
  std::atomic<int64_t> at_ns{0};
  void finish_one() {
    if (remaining.fetch_sub(1) == 1)
      at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
                  .count();
  }
};

struct TpuEvent {
  std::vector<std::shared_ptr<pjrt::Event>> work;
  bool timing = false;
  std::shared_ptr<Completion> completion;  // timing events only
};

thread_local std::unordered_map<c10::DeviceIndex, c10::StreamId> current_ids;
std::atomic<c10::StreamId> next_stream_id{1};

}  // namespace

c10::Stream current_stream(c10::DeviceIndex device) {
  auto it = current_ids.find(device);
  c10::StreamId id = it == current_ids.end() ? 0 : it->second;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

c10::Stream exchange_stream(c10::Stream stream) {
  c10::Stream previous = current_stream(stream.device_index());
  current_ids[stream.device_index()] = stream.id();
  return previous;
}

c10::Stream new_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                     next_stream_id++);
}

void record_event(void** event, c10::DeviceIndex device, c10::EventFlag flag) {
  if (*event == nullptr) *event = new TpuEvent();
  auto* e = static_cast<TpuEvent*>(*event);
  // An event marks the work issued so far, recorded ops included.
  if (runtime::Runtime::initialized()) runtime::FusedGroup::get().flush();
  e->work = runtime::Runtime::initialized()
                ? runtime::Runtime::get().in_flight(device < 0 ? current_device() : device)
                : std::vector<std::shared_ptr<pjrt::Event>>{};
  // As on CUDA, timing is on unless the event asked for PyTorch's default (no timing).
  e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
  e->completion.reset();
  if (!e->timing) return;
  e->completion = std::make_shared<Completion>(e->work.size() + 1);
  for (const auto& work : e->work) work->on_ready([c = e->completion] { c->finish_one(); });
  e->completion->finish_one();  // the record itself: an event with no work completes now
}

bool query_event(void* event) {
  if (event == nullptr) return true;
  for (const auto& work : static_cast<TpuEvent*>(event)->work)
    if (!work->is_ready()) return false;
  return true;
}

void synchronize_event(void* event) {
  if (event == nullptr) return;
  for (const auto& work : static_cast<TpuEvent*>(event)->work) work->await();
}

void destroy_event(void* event) noexcept { delete static_cast<TpuEvent*>(event); }

double elapsed_ms(void* start, void* end) {
  auto* a = static_cast<TpuEvent*>(start);
  auto* b = static_cast<TpuEvent*>(end);
  TORCH_CHECK(a != nullptr && b != nullptr,
              "Both events must be recorded before calculating elapsed time.");
  TORCH_CHECK(a->timing && b->timing,
              "Both events must be created with argument 'enable_timing=True'.");
  TORCH_CHECK(query_event(a) && query_event(b),
              "Both events must be completed before calculating elapsed time.");
  // Completion callbacks can trail the readiness flag by a moment.
  while (a->completion->at_ns == 0 || b->completion->at_ns == 0) std::this_thread::yield();
  return static_cast<double>(b->completion->at_ns - a->completion->at_ns) / 1e6;
}

bool query_device(c10::DeviceIndex device) {
  if (!runtime::Runtime::initialized()) return true;
  if (runtime::FusedGroup::get().pending_ops() > 0) return false;
  for (const auto& work : runtime::Runtime::get().in_flight(device))
    if (!work->is_ready()) return false;
  return true;
}

}  // namespace torch_tpu::aten
