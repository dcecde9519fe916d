#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_tpu::aten {

// The shape and dtype of one result of a called function.
using ResultType = std::pair<std::vector<int64_t>, c10::ScalarType>;

// torch.tpu.pallas.jax_op's kernel: `functions` (private func.func definitions in generic
// form, e.g. a JAX export's, their symbols unique to them) run on tpu tensors as one
// program whose main calls `callee` with `inputs` and returns its results, which must have
// `results`' types. The program key holds the functions' fingerprint.
std::vector<at::Tensor> call_stablehlo(const std::string& functions, const std::string& callee,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<ResultType>& results);

}  // namespace torch_tpu::aten
