#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>
#include <mutex>
#include <unordered_set>

#include "aten/allocator.h"
#include "aten/device.h"
#include "aten/generator.h"
#include "aten/registration.h"
#include "aten/storage.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

// A PJRT plugin copies from any host memory (XLA:CPU's device memory is host memory), so
// "pinned" host memory is ordinary host memory, remembered so that is_pinned() holds for
// it (DDP's reducer asserts that its pinned staging tensors are).
struct PinnedAllocator final : at::Allocator {
  at::DataPtr allocate(size_t n) override {
    at::DataPtr data = c10::GetCPUAllocator()->allocate(n);
    void* ptr = data.get();
    {
      std::lock_guard<std::mutex> lock(mutex);
      live.insert(ptr);
    }
    // Keep the CPU allocator's deleter and context; forget the pointer when it runs.
    auto* inner = new at::DataPtr(std::move(data));
    return {ptr, inner, &release, at::Device(at::kCPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dst, const void* src, size_t n) const override {
    std::memcpy(dst, src, n);
  }
  bool owns(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex);
    return live.count(const_cast<void*>(ptr)) > 0;
  }
  static void release(void* ctx) {
    auto* inner = static_cast<at::DataPtr*>(ctx);
    {
      std::lock_guard<std::mutex> lock(pinned().mutex);
      pinned().live.erase(inner->get());
    }
    delete inner;
  }
  static PinnedAllocator& pinned() {
    static auto* a = new PinnedAllocator();
    return *a;
  }
  std::mutex mutex;
  std::unordered_set<void*> live;
};

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
  at::Allocator* getPinnedMemoryAllocator() const override {
    return &PinnedAllocator::pinned();
  }
  bool isPinnedPtr(const void* ptr) const override { return PinnedAllocator::pinned().owns(ptr); }
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
