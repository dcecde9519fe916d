// DDP's per-iteration timings (forward, backward compute, communication) for tpu
// modules, as CUDA has them: each point is a timing event on the device queue, so the
// differences are between the completions of the device work, not host calls that only
// enqueued it. Without a timer registered for the device, DDP warns on every run.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <array>
#include <memory>

namespace torch_tpu::distributed {

namespace {

class TpuTimer : public c10d::Timer {
 public:
  explicit TpuTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    Timer::record(event);  // the host timestamp, which DDP also reads
    auto& e = events_[static_cast<size_t>(event)];
    e = std::make_unique<c10::Event>(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
    c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
    e->record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    auto& a = events_[static_cast<size_t>(start)];
    auto& b = events_[static_cast<size_t>(end)];
    if (!a || !b) return std::nullopt;
    a->synchronize();
    b->synchronize();
    double ms = a->elapsedTime(*b);
    if (ms < 0) return std::nullopt;  // as CUDA's timer: end recorded before start
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  c10::Device device_;
  std::array<std::unique_ptr<c10::Event>, 5> events_;
};

}  // namespace

}  // namespace torch_tpu::distributed

namespace c10d {  // where the registry lives: its macro names it unqualified
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torch_tpu::distributed::TpuTimer);
}  // namespace c10d
