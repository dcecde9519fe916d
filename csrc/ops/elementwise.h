// Elementwise lowerings: arithmetic with PyTorch's broadcasting, activations.
#pragma once

#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// `x` broadcast to `shape` with NumPy's trailing-dimension rule.
hlo::Value broadcast_to(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& shape);

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

}  // namespace torch_tpu::ops
