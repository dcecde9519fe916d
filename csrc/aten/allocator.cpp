#include "aten/allocator.h"

#include <c10/core/Allocator.h>

#include <array>
#include <atomic>

#include "aten/device.h"
#include "runtime/fused_group.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

constexpr int kMaxDevices = 64;
// Synthetic addresses: device in the bits above 44, a running offset below, so that
// ranges never overlap and aliasing checks on data pointers work as on real memory.
constexpr int kDeviceShift = 44;

struct DeviceCounters {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> frees{0};
  std::atomic<uint64_t> next_address{64};
  std::atomic<int64_t> ooms{0};
};

std::array<DeviceCounters, kMaxDevices>& counters() {
  static std::array<DeviceCounters, kMaxDevices> c;
  return c;
}

// torch.profiler(profile_memory=True): allocations and frees become its memory events.
void report_to_profiler(const runtime::DeviceBuffer& buffer, int64_t delta, int64_t allocated) {
  if (!c10::memoryProfilingEnabled()) return;
  c10::reportMemoryUsageToProfiler(reinterpret_cast<void*>(buffer.address), delta, allocated,
                                   allocated,
                                   c10::Device(c10::DeviceType::PrivateUse1, buffer.device));
}

void delete_buffer(void* context) {
  auto* buffer = static_cast<runtime::DeviceBuffer*>(context);
  DeviceCounters& c = counters()[buffer->device];
  int64_t now = (c.allocated -= static_cast<int64_t>(buffer->nbytes));
  c.frees++;
  report_to_profiler(*buffer, -static_cast<int64_t>(buffer->nbytes), now);
  if (buffer->pending >= 0) runtime::FusedGroup::get().forget(*buffer);
  delete buffer;
}

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }

  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
    int64_t capacity = runtime::Runtime::get().memory_capacity(device);
    DeviceCounters& c = counters()[device];
    int64_t in_use = c.allocated.load();
    if (in_use + static_cast<int64_t>(nbytes) > capacity) {
      c.ooms++;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory. Tried to allocate ",
                       format_bytes(nbytes), ". Device tpu:", static_cast<int>(device),
                       " has a total capacity of ", format_bytes(capacity), " of which ",
                       format_bytes(in_use), " is allocated by PyTorch.");
    }
    auto* buffer = new runtime::DeviceBuffer(device, nbytes);
    int64_t now = (c.allocated += static_cast<int64_t>(nbytes));
    int64_t peak = c.peak.load();
    while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
    }
    c.allocations++;
    uint64_t offset = c.next_address.fetch_add((nbytes + 127) / 64 * 64);
    void* address = reinterpret_cast<void*>((static_cast<uint64_t>(device + 1) << kDeviceShift) |
                                            (offset & ((1ULL << kDeviceShift) - 1)));
    buffer->address = reinterpret_cast<uintptr_t>(address);
    report_to_profiler(*buffer, static_cast<int64_t>(nbytes), now);
    return {address, buffer, &delete_buffer, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "torch_tpu: device memory cannot be copied with memcpy; use Tensor.copy_");
  }

  bool initialized() override { return runtime::Runtime::initialized(); }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    DeviceCounters& c = counters().at(device);
    c10::CachingDeviceAllocator::DeviceStats stats;
    for (auto* array : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.requested_bytes}) {
      auto& s = (*array)[0];
      s.current = c.allocated.load();
      s.peak = c.peak.load();
    }
    stats.allocation[0].current = c.allocations.load() - c.frees.load();
    stats.allocation[0].allocated = c.allocations.load();
    stats.allocation[0].freed = c.frees.load();
    stats.num_ooms = c.ooms.load();
    return stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    DeviceCounters& c = counters().at(device);
    c.allocations = 0;
    c.frees = 0;
    c.ooms = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    DeviceCounters& c = counters().at(device);
    c.peak = c.allocated.load();
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    int64_t total = runtime::Runtime::get().memory_capacity(device);
    int64_t used = counters().at(device).allocated.load();
    return {static_cast<size_t>(std::max<int64_t>(total - used, 0)), static_cast<size_t>(total)};
  }

 private:
  static std::string format_bytes(int64_t bytes) {
    char buf[64];
    if (bytes >= (1LL << 30)) {
      std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1LL << 30));
    } else {
      std::snprintf(buf, sizeof(buf), "%.2f MiB", bytes / double(1LL << 20));
    }
    return buf;
  }
};

TpuAllocator tpu_allocator;

}  // namespace

c10::DeviceAllocator* allocator() { return &tpu_allocator; }

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
  return tpu_allocator.allocate_on(device, nbytes);
}

runtime::DeviceBuffer& device_buffer(const c10::Storage& storage) {
  auto* buffer = static_cast<runtime::DeviceBuffer*>(storage.data_ptr().get_context());
  TORCH_INTERNAL_ASSERT(buffer != nullptr, "tpu storage without a device buffer");
  return *buffer;
}

c10::DeviceIndex device_of_address(const void* address) {
  return static_cast<c10::DeviceIndex>((reinterpret_cast<uint64_t>(address) >> kDeviceShift) - 1);
}

}  // namespace torch_tpu::aten
