// Index helpers shared by pooling and upsampling: both pick input elements along one dim
// at positions known when the program is built.
#pragma once

#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

// A 1-d i64 constant.
hlo::Value index_constant(hlo::Builder& b, const std::vector<int64_t>& values);
// x with dim `dim` replaced by x[..., index[j], ...] for each j.
hlo::Value take_along(hlo::Builder& b, const hlo::Value& x, int64_t dim,
                      const std::vector<int64_t>& index);
// The transpose of take_along: g (dim `dim` of size index.size()) summed into a zero
// tensor whose dim `dim` has `size` elements.
hlo::Value scatter_add_along(hlo::Builder& b, const hlo::Value& g, int64_t dim,
                             const std::vector<int64_t>& index, int64_t size);

}  // namespace torch_tpu::ops
