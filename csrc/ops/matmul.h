// Matrix products as dot_general, accumulating low-precision floats in f32.
#pragma once

#include "hlo/builder.h"

namespace torch_tpu::ops {

hlo::Value lower_mm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);   // [n,k]@[k,m]
hlo::Value lower_bmm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);  // [b,n,k]@[b,k,m]
// beta * bias + alpha * (x @ y); beta and alpha are 0-d operands; beta == 0 ignores bias
// (NaN in it does not propagate).
hlo::Value lower_addmm(hlo::Builder& b, const hlo::Value& bias, const hlo::Value& x,
                       const hlo::Value& y, const hlo::Value& beta, const hlo::Value& alpha);

}  // namespace torch_tpu::ops
