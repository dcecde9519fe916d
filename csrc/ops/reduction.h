// Reductions over dims, accumulating low-precision floats in f32 as PyTorch does.
#pragma once

#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

// `dims` are non-negative and unique; an empty list reduces over every dim.
hlo::Value lower_sum(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& dims,
                     bool keepdim, hlo::DType dtype);
hlo::Value lower_mean(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& dims,
                      bool keepdim, hlo::DType dtype);

}  // namespace torch_tpu::ops
