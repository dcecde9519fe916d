// Helpers the lowerings share: the dtype math runs in, broadcasting, arguments read for
// elementwise math, and the HLO vocabulary lowerings are written in (Math, and the
// opcodes of Builder::unary / binary / reduce).
#pragma once

#include <cstdint>
#include <vector>

#include "hlo/builder.h"
#include "hlo/math.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

using hlo::Binary;
using hlo::Math;
using hlo::Unary;

// The float dtype math on `dtype` runs in: f32 for bf16/f16 (as PyTorch's CPU kernels
// compute them), else `dtype` itself.
hlo::DType math_dtype(hlo::DType dtype);
// `x` converted to `dtype` and broadcast to `shape` (NumPy rules).
hlo::Value cast_to(hlo::Builder& b, const hlo::Value& x, hlo::DType dtype,
                   const std::vector<int64_t>& shape);
// A 0-d constant broadcast to `like`'s type.
hlo::Value splat(hlo::Builder& b, double value, const hlo::TensorType& like);

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// `x` broadcast to `shape` with NumPy's trailing-dimension rule.
hlo::Value broadcast_to(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& shape);

// Argument i converted to `dtype` and broadcast to the shape of output 0.
hlo::Value arg_as(Node& n, size_t i, hlo::DType dtype);
// The dtype float math on `n` runs in: the promoted dtype, integers promoted to f32 (or
// to a float output dtype), and bf16/f16 widened to f32 as PyTorch's CPU kernels do.
hlo::DType float_math(const Node& n);
// Argument i for float math: first rounded to the promoted dtype (as PyTorch casts a
// wrapped scalar to the common dtype), then widened to float_math(n).
hlo::Value arg_math(Node& n, size_t i);
// True where the sign bit of float or signed `x` is set (-0.0 and negative NaNs too).
hlo::Value sign_bit(hlo::Builder& b, const hlo::Value& x);
// Maximum / minimum that return NaN when either operand is NaN (torch.maximum, clamp).
hlo::Value nan_max(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);
hlo::Value nan_min(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);
// Raised for dtypes PyTorch's CPU kernels reject but the meta kernels accept.
[[noreturn]] void not_implemented(const char* op, hlo::DType dtype);

}  // namespace torch_tpu::ops
