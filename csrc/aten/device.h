// The current tpu device of this thread and the device count.
#pragma once

#include <c10/core/Device.h>

namespace torch_tpu::aten {

c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
// 0 when no plugin can be loaded; never throws.
c10::DeviceIndex device_count();
// Throws a clear error if the runtime cannot start or `index` is not a device.
void check_device(c10::DeviceIndex index);
void synchronize(c10::DeviceIndex index);

}  // namespace torch_tpu::aten
