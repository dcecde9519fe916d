#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/generator.h"
#include "aten/host_allocator.h"
#include "aten/registration.h"
#include "aten/storage.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override {
    return runtime::Runtime::initialized();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = current_device();
    set_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<TpuGenerator>(device < 0 ? current_device() : device);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return at::Device(c10::DeviceType::PrivateUse1, device_of_address(data));
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return &host_allocator(); }
  bool isPinnedPtr(const void* ptr) const override { return is_pinned(ptr); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

}  // namespace

void register_hooks() {
  static bool done = false;
  if (done) return;
  done = true;
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator());
}

}  // namespace torch_tpu::aten
