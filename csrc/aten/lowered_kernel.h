// Registers the generic dispatcher kernel for every op in the lowering table.
#pragma once

namespace torch_tpu::aten {

// Called once when torch_tpu._C is imported, after every lowering has registered.
void register_lowered_ops();

}  // namespace torch_tpu::aten
