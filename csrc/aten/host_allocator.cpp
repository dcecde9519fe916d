// A PJRT plugin copies from any host memory (XLA:CPU's device memory is host memory), so
// tpu needs no page-locked memory: "pinned" memory is ordinary CPU memory, remembered so
// that is_pinned() holds for it (DDP's reducer asserts that its pinned staging tensors
// are) and counted for host_memory_stats(). Nothing is cached, so empty_cache has nothing
// to free. torch.accelerator's host-memory calls use the current accelerator's
// HostAllocator without checking that one exists: without this registration they crash
// the process (vLLM calls empty_host_cache at shutdown).
#include "aten/host_allocator.h"

#include <c10/core/CPUAllocator.h>

#include <cstring>
#include <mutex>
#include <unordered_map>

namespace torch_tpu::aten {

namespace {

struct TpuHostAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t bytes) override {
    at::DataPtr data = c10::GetCPUAllocator()->allocate(bytes);
    void* ptr = data.get();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (ptr != nullptr) live.emplace(ptr, bytes);  // empty blocks share nullptr
      count(bytes, +1);
    }
    // Keep the CPU allocator's deleter and context; forget the block when it runs.
    auto* inner = new at::DataPtr(std::move(data));
    return {ptr, inner, &release, at::Device(at::kCPU)};
  }
  // The context owns the CPU allocation: there is no raw deleter.
  at::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  // Blocks are freed as soon as their tensor is: no stream use to wait for.
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex);
    return stats;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto* s :
         {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes})
      s->reset_accumulated();
    stats.num_host_alloc = stats.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto* s :
         {&stats.active_requests, &stats.active_bytes, &stats.allocations, &stats.allocated_bytes})
      s->reset_peak();
  }

  // Called with `mutex` held. Every block is in use until freed, so active and
  // allocated move together.
  void count(size_t bytes, int sign) {
    for (auto* s : {&stats.active_requests, &stats.allocations})
      sign > 0 ? s->increase(1) : s->decrease(1);
    for (auto* s : {&stats.active_bytes, &stats.allocated_bytes})
      sign > 0 ? s->increase(bytes) : s->decrease(bytes);
    ++(sign > 0 ? stats.num_host_alloc : stats.num_host_free);
  }
  bool owns(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex);
    return ptr != nullptr && live.count(const_cast<void*>(ptr)) > 0;
  }
  static void release(void* ctx);

  std::mutex mutex;
  std::unordered_map<void*, size_t> live;  // block -> bytes
  at::HostStats stats;
};

TpuHostAllocator& the_allocator() {
  static auto* a = new TpuHostAllocator();  // never destroyed: blocks may outlive exit
  return *a;
}

void TpuHostAllocator::release(void* ctx) {
  auto* inner = static_cast<at::DataPtr*>(ctx);
  auto& a = the_allocator();
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    size_t bytes = 0;
    if (auto it = a.live.find(inner->get()); it != a.live.end()) {
      bytes = it->second;
      a.live.erase(it);
    }
    a.count(bytes, -1);
  }
  delete inner;
}

}  // namespace

at::HostAllocator& host_allocator() { return the_allocator(); }

bool is_pinned(const void* ptr) { return the_allocator().owns(ptr); }

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &the_allocator())

}  // namespace torch_tpu::aten
