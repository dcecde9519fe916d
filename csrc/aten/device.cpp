#include "aten/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "aten/device_asserts.h"
#include "aten/event.h"
#include "runtime/fused_group.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {
thread_local c10::DeviceIndex current = 0;
}

c10::DeviceIndex current_device() { return current; }

c10::DeviceIndex device_count() {
  try {
    return static_cast<c10::DeviceIndex>(runtime::Runtime::configured_device_count());
  } catch (const std::exception&) {
    return 0;
  }
}

void check_device(c10::DeviceIndex index) {
  int count = runtime::Runtime::get().device_count();  // throws the plugin error, if any
  TORCH_CHECK(index >= 0 && index < count, "Invalid device id: tpu:", static_cast<int>(index),
              " (the tpu runtime has ", count, " device", count == 1 ? "" : "s",
              "; set TORCH_TPU_NUM_DEVICES for more virtual XLA:CPU devices)");
}

void set_device(c10::DeviceIndex index) {
  check_device(index);
  current = index;
}

void synchronize(c10::DeviceIndex index) {
  if (!runtime::Runtime::initialized()) return;
  runtime::FusedGroup::get().flush();
  runtime::Runtime::get().synchronize(index < 0 ? current : index);
  check_device_asserts();
}

namespace {

// Streams and events: see aten/event.h.
struct TpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    if (device.index() != current) setDevice(device);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kType, current); }
  void setDevice(c10::Device device) const override {
    if (device.index() >= 0) set_device(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0) current = device.index();
  }
  c10::Stream getStream(c10::Device device) const override {
    return current_stream(device.index() < 0 ? current : device.index());
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return new_stream(device.index() < 0 ? current : device.index());
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool high_priority) const override {
    return new_stream(device.index() < 0 ? current : device.index());
  }
  c10::Stream exchangeStream(c10::Stream stream) const override { return exchange_stream(stream); }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    record_event(event, device >= 0 ? device : stream.device_index(), flag);
  }
  // One queue per device ordered by data dependencies (aten/event.h): nothing to add.
  void block(void* event, const c10::Stream& stream) const override {}
  bool queryEvent(void* event) const override { return query_event(event); }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    destroy_event(event);
  }
  bool queryStream(const c10::Stream& stream) const override {
    return query_device(stream.device_index());
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    synchronize(stream.device_index());
  }
  void synchronizeEvent(void* event) const override { synchronize_event(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    return elapsed_ms(start, end);
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override { synchronize(index); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

}  // namespace torch_tpu::aten
