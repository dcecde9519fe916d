// One-time setup of the tpu backend, called when torch_tpu._C is imported.
#pragma once

namespace torch_tpu::aten {

void register_hooks();
// The opt-in CPU fallback for ops without a lowering.
void set_cpu_fallback(bool enabled);
bool cpu_fallback_enabled();

}  // namespace torch_tpu::aten
