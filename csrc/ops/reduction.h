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

// `dim` in [-rank, rank) as a dim in [0, rank); a 0-d tensor has the one dim 0.
int64_t wrap_dim(int64_t dim, int64_t rank);
// Every dim but `dim`: the shape's indices kept when reducing over `dim`.
std::vector<int64_t> other_dims(int64_t rank, int64_t dim);

// The lowest / highest value of `dtype` (-inf / inf for floats), as a 0-d constant.
hlo::Value lowest(hlo::Builder& b, hlo::DType dtype);
hlo::Value highest(hlo::Builder& b, hlo::DType dtype);

// x != x: true at NaNs (always false for integers).
hlo::Value is_nan(hlo::Builder& b, const hlo::Value& x);

// max / min over `dims` (not kept), NaN winning as in PyTorch; any / all for bools.
hlo::Value reduce_extreme(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& dims,
                          bool max);

}  // namespace torch_tpu::ops
