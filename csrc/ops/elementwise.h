// Elementwise lowerings: arithmetic with PyTorch's broadcasting, activations.
#pragma once

#include <vector>

#include "hlo/builder.h"
#include "ops/registry.h"

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

// Helpers for table lowerings of elementwise ops (unary, binary, activation).

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

// Terse arithmetic for writing formulas; operands must have the same type.
struct Math {
  hlo::Builder& b;
  hlo::Value k(double v, const hlo::Value& like) const { return b.full(v, like.type); }
  hlo::Value add(const hlo::Value& x, const hlo::Value& y) const { return b.binary("add", x, y); }
  hlo::Value sub(const hlo::Value& x, const hlo::Value& y) const { return b.binary("subtract", x, y); }
  hlo::Value mul(const hlo::Value& x, const hlo::Value& y) const { return b.binary("multiply", x, y); }
  hlo::Value div(const hlo::Value& x, const hlo::Value& y) const { return b.binary("divide", x, y); }
  hlo::Value max(const hlo::Value& x, const hlo::Value& y) const { return b.binary("maximum", x, y); }
  hlo::Value min(const hlo::Value& x, const hlo::Value& y) const { return b.binary("minimum", x, y); }
  hlo::Value pow(const hlo::Value& x, const hlo::Value& y) const { return b.binary("power", x, y); }
  hlo::Value and_(const hlo::Value& x, const hlo::Value& y) const { return b.binary("and", x, y); }
  hlo::Value or_(const hlo::Value& x, const hlo::Value& y) const { return b.binary("or", x, y); }
  hlo::Value not_(const hlo::Value& x) const { return b.unary("not", x); }
  hlo::Value neg(const hlo::Value& x) const { return b.unary("negate", x); }
  hlo::Value abs(const hlo::Value& x) const { return b.unary("abs", x); }
  hlo::Value exp(const hlo::Value& x) const { return b.unary("exponential", x); }
  hlo::Value expm1(const hlo::Value& x) const { return b.unary("exponential_minus_one", x); }
  hlo::Value log(const hlo::Value& x) const { return b.unary("log", x); }
  hlo::Value log1p(const hlo::Value& x) const { return b.unary("log_plus_one", x); }
  hlo::Value tanh(const hlo::Value& x) const { return b.unary("tanh", x); }
  hlo::Value sigmoid(const hlo::Value& x) const { return b.unary("logistic", x); }
  hlo::Value sqrt(const hlo::Value& x) const { return b.unary("sqrt", x); }
  hlo::Value floor(const hlo::Value& x) const { return b.unary("floor", x); }
  hlo::Value ceil(const hlo::Value& x) const { return b.unary("ceil", x); }
  hlo::Value erf(const hlo::Value& x) const { return b.emit("chlo.erf", {x}, "", x.type); }
  hlo::Value trunc(const hlo::Value& x) const { return sel(lt(x, k(0, x)), ceil(x), floor(x)); }
  hlo::Value sel(const hlo::Value& p, const hlo::Value& x, const hlo::Value& y) const {
    return b.select(p, x, y);
  }
  hlo::Value eq(const hlo::Value& x, const hlo::Value& y) const { return b.compare(hlo::Compare::EQ, x, y); }
  hlo::Value ne(const hlo::Value& x, const hlo::Value& y) const { return b.compare(hlo::Compare::NE, x, y); }
  hlo::Value lt(const hlo::Value& x, const hlo::Value& y) const { return b.compare(hlo::Compare::LT, x, y); }
  hlo::Value le(const hlo::Value& x, const hlo::Value& y) const { return b.compare(hlo::Compare::LE, x, y); }
  hlo::Value gt(const hlo::Value& x, const hlo::Value& y) const { return b.compare(hlo::Compare::GT, x, y); }
  hlo::Value ge(const hlo::Value& x, const hlo::Value& y) const { return b.compare(hlo::Compare::GE, x, y); }
  hlo::Value is_nan(const hlo::Value& x) const { return ne(x, x); }
};

// digamma(x) on floats, with PyTorch's signed infinities at +-0 (ops/unary.cpp).
hlo::Value digamma(const Math& m, const hlo::Value& x);

}  // namespace torch_tpu::ops
