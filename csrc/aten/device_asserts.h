// Device-side asserts: aten::_assert_async (what torch._assert_async, compiled graphs'
// runtime asserts and torchtitan's RoPE position check call) checks its condition on the
// device, as CUDA does, and a failure raises on the next synchronizing call (a host read,
// synchronize()) with CPU's message: no host round trip per assert.
#pragma once

namespace torch_tpu::aten {

// Raises the message of a failed assert recorded since the last check, if any, and
// forgets it (the process goes on). Cheap when no assert ran since the last check.
void check_device_asserts();

}  // namespace torch_tpu::aten
