// CPU's own argument checks for table ops whose PyTorch meta kernel (a Python one) words
// them differently from CPU or lets through what CPU refuses: the matrix products, whose
// structured meta functions (at::meta::*) are the checks CPU's kernels run. The generic
// kernel (aten/lowered_kernel.cpp) runs them before the meta kernel, on meta tensors.
#pragma once

#include <ATen/core/ivalue.h>

#include <string_view>
#include <vector>

namespace torch_tpu::aten {

using CpuCheck = void (*)(const std::vector<c10::IValue>& args);

// The check for a schema name ("mm", "addmm_", ...), or null where the meta kernel's own
// checks are CPU's.
CpuCheck cpu_check(std::string_view schema_name);

}  // namespace torch_tpu::aten
