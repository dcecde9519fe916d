// The tpu allocator: a storage's DataPtr owns a runtime::DeviceBuffer and carries a
// unique synthetic address that host code never dereferences.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>

#include "runtime/device_buffer.h"

namespace torch_tpu::aten {

c10::DeviceAllocator* allocator();
// Allocates on a given device (allocator()->allocate uses the current one).
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
runtime::DeviceBuffer& device_buffer(const c10::Storage& storage);
inline runtime::DeviceBuffer& device_buffer(const at::Tensor& t) {
  return device_buffer(t.storage());
}
// The device a synthetic address belongs to.
c10::DeviceIndex device_of_address(const void* address);

}  // namespace torch_tpu::aten
