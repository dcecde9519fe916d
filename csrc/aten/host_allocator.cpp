// torch.accelerator's host-memory calls (empty_host_cache, host_memory_stats, ...) use
// the current accelerator's HostAllocator without checking that one exists: without
// one they crash the process (vLLM calls empty_host_cache at shutdown). PJRT copies
// from any host buffer, so tpu needs no pinned memory: this allocator hands out
// ordinary CPU memory and caches nothing.
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>

namespace torch_tpu::aten {

namespace {

struct TpuHostAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t bytes) override { return c10::GetCPUAllocator()->allocate(bytes); }
  at::DeleterFnPtr raw_deleter() const override {
    return c10::GetCPUAllocator()->raw_deleter();
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

TpuHostAllocator host_allocator;

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &host_allocator)

}  // namespace torch_tpu::aten
