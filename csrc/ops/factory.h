// Factory lowerings whose scalars need more precision than the generic kernel's scalar
// operands give (the kernels in csrc/aten/indexing_kernels.cpp pass them as f64).
#pragma once

#include <cstdint>

#include "hlo/builder.h"

namespace torch_tpu::ops {

// The dtype arange's start and step enter in for an output of `dtype`: f64 for float
// outputs (f32 for bf16/f16), s64 for integers, as CPU's accumulate type does, so the
// values are the correctly rounded start + i * step.
hlo::DType arange_math(hlo::DType dtype);
// start + step * i for i in [0, n), computed in start's dtype, then converted to `dtype`.
hlo::Value lower_arange(hlo::Builder& b, const hlo::Value& start, const hlo::Value& step, int64_t n,
                        hlo::DType dtype);
// `steps` points from start to end, the first half counted from start and the second
// from end, as PyTorch's CPU kernel does. `base` given: base ** those points (logspace).
hlo::Value lower_linspace(hlo::Builder& b, const hlo::Value& start, const hlo::Value& end,
                          int64_t steps, hlo::DType dtype, const hlo::Value* base = nullptr);

}  // namespace torch_tpu::ops
