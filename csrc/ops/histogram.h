// Histograms whose length the caller knows (bincount reads it from the data first).
#pragma once

#include "hlo/builder.h"

namespace torch_tpu::ops {

// bincount of the 1-d non-negative integer `x` into `length` bins of `dtype`: counts, or
// the sums of `weights` (same length as x) when given.
hlo::Value lower_bincount(hlo::Builder& b, const hlo::Value& x, const hlo::Value* weights,
                          int64_t length, hlo::DType dtype);

}  // namespace torch_tpu::ops
