#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch_tpu::aten {

// The tensors' values through one stablehlo.optimization_barrier, as new contiguous
// tensors in the same order.
std::vector<at::Tensor> optimization_barrier(const std::vector<at::Tensor>& inputs);

}  // namespace torch_tpu::aten
