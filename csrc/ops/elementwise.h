// Elementwise arithmetic with PyTorch's broadcasting and type promotion: add, sub, mul, div,
// relu (their table lines are in ops/elementwise.cpp), for the other lowerings built on them.
#pragma once

#include <vector>

#include "hlo/builder.h"
#include "ops/common.h"

namespace torch_tpu::ops {

enum class DivMode { True, Trunc, Floor };

// Each converts its operands to `dtype` and broadcasts them to a common shape.
hlo::Value lower_add(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y,
                     const hlo::Value& alpha, hlo::DType dtype);  // x + alpha * y
hlo::Value lower_sub(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y,
                     const hlo::Value& alpha, hlo::DType dtype);  // x - alpha * y
hlo::Value lower_mul(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y, hlo::DType dtype);
hlo::Value lower_div(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y, hlo::DType dtype,
                     DivMode mode);
hlo::Value lower_relu(hlo::Builder& b, const hlo::Value& x);
// grad where x > threshold, else 0 (the backward of relu and threshold).
hlo::Value lower_threshold_backward(hlo::Builder& b, const hlo::Value& grad, const hlo::Value& x,
                                    const hlo::Value& threshold, hlo::DType dtype);

// digamma(x) on floats, with PyTorch's signed infinities at +-0 (ops/unary.cpp).
hlo::Value digamma(const Math& m, const hlo::Value& x);

}  // namespace torch_tpu::ops
