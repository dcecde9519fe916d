// The precision of f32 matrix products in the programs being built: PyTorch's
// torch.get_float32_matmul_precision() ("highest" -> HIGHEST, "high" -> HIGH, "medium" ->
// DEFAULT), unless torch.tpu.precision(...) overrides it on this thread.
#pragma once

#include "hlo/types.h"

namespace torch_tpu::aten {

hlo::Precision matmul_precision();
// torch.tpu.precision's stack (per thread, like the context managers that use it).
void push_precision(hlo::Precision p);
void pop_precision();

}  // namespace torch_tpu::aten
