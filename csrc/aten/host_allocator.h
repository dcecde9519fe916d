// Host memory for tpu: the one allocator behind pin_memory() (the PrivateUse1 hooks'
// pinned-memory allocator) and torch.accelerator's host-memory calls (empty_host_cache,
// host_memory_stats, ...).
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace torch_tpu::aten {

at::HostAllocator& host_allocator();

// Whether `ptr` is the start of a live block of host_allocator() (tensor.is_pinned()).
bool is_pinned(const void* ptr);

}  // namespace torch_tpu::aten
