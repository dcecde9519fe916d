// Activation functions and their backward ops, with the formulas of PyTorch's CPU
// kernels (bf16/f16 computed in f32). Scalar parameters (beta, slope, alpha, ...) stay
// in f32 as the CPU kernels keep them, and are runtime operands.
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/common.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// A scalar parameter of the op in float math, broadcast to the output's shape.
Value param(Node& n, size_t i) { return arg_as(n, i, float_math(n)); }

// Checks the input's own dtype: a float scalar parameter promotes n.compute.
void require_float(Node& n, const char* name) {
  DType dtype = n.in(0).type.dtype;
  if (!hlo::is_float(dtype)) not_implemented(name, dtype);
}

const double kSqrt1_2 = 0.70710678118654752440;
const double kInvSqrt2Pi = 0.39894228040143267794;   // 1 / sqrt(2 pi)
const double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
const double kKappa = 0.044715;

bool tanh_gelu(Node& n, size_t i) {
  const std::string& mode = n.str(i);
  if (mode != "none" && mode != "tanh")
    throw std::invalid_argument("approximate argument must be either none or tanh.");
  return mode == "tanh";
}

V lower_gelu(Node& n) {
  require_float(n, "GeluKernelImpl");
  Math m{n.b};
  Value x = arg_math(n, 0);
  Value half_x = m.mul(m.k(0.5, x), x);
  if (tanh_gelu(n, 1)) {
    Value inner =
        m.mul(m.k(kSqrt2OverPi, x), m.add(x, m.mul(m.k(kKappa, x), m.mul(x, m.mul(x, x)))));
    return {m.mul(half_x, m.add(m.k(1, x), m.tanh(inner)))};
  }
  return {m.mul(half_x, m.add(m.k(1, x), m.erf(m.mul(x, m.k(kSqrt1_2, x)))))};
}

V lower_gelu_backward(Node& n) {
  require_float(n, "GeluBackwardKernelImpl");
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value one = m.k(1, x), half = m.k(0.5, x);
  if (tanh_gelu(n, 2)) {
    Value x_sq = m.mul(x, x);
    Value inner = m.mul(m.k(kSqrt2OverPi, x), m.add(x, m.mul(m.k(kKappa, x), m.mul(x_sq, x))));
    Value t = m.tanh(inner);
    Value left = m.mul(half, x), right = m.add(one, t);
    Value right_d = m.sub(one, m.mul(t, t));
    Value inner_d = m.mul(m.k(kSqrt2OverPi, x), m.add(one, m.mul(m.k(3 * kKappa, x), x_sq)));
    return {m.mul(g, m.add(m.mul(half, right), m.mul(m.mul(left, right_d), inner_d)))};
  }
  Value cdf = m.mul(half, m.add(one, m.erf(m.mul(x, m.k(kSqrt1_2, x)))));
  Value pdf = m.mul(m.exp(m.mul(m.k(-0.5, x), m.mul(x, x))), m.k(kInvSqrt2Pi, x));
  return {m.mul(g, m.add(cdf, m.mul(x, pdf)))};
}

V lower_silu(Node& n) {
  require_float(n, "silu");
  Math m{n.b};
  Value x = arg_math(n, 0);
  return {m.div(x, m.add(m.k(1, x), m.exp(m.neg(x))))};
}

V lower_silu_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value one = m.k(1, x);
  Value s = m.div(one, m.add(one, m.exp(m.neg(x))));
  return {m.mul(m.mul(g, s), m.add(one, m.mul(x, m.sub(one, s))))};
}

V lower_mish(Node& n) {
  require_float(n, "mish");
  Math m{n.b};
  Value x = arg_math(n, 0);
  return {m.mul(x, m.tanh(m.log1p(m.exp(x))))};
}

V lower_mish_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value one = m.k(1, x);
  Value s = m.div(one, m.add(one, m.exp(m.neg(x))));
  Value t = m.tanh(m.log1p(m.exp(x)));
  return {m.mul(g, m.add(t, m.mul(m.mul(x, s), m.sub(one, m.mul(t, t)))))};
}

V lower_softplus(Node& n) {
  require_float(n, "softplus_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0), beta = param(n, 1), threshold = param(n, 2);
  Value bx = m.mul(x, beta);
  return {m.sel(m.gt(bx, threshold), x, m.div(m.log1p(m.exp(bx)), beta))};
}

V lower_softplus_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1), beta = param(n, 2), threshold = param(n, 3);
  Value bx = m.mul(x, beta);
  Value z = m.exp(bx);
  return {m.sel(m.gt(bx, threshold), g, m.div(m.mul(g, z), m.add(z, m.k(1, z))))};
}

V lower_leaky_relu(Node& n) {
  require_float(n, "leaky_relu_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0);
  return {m.sel(m.gt(x, m.k(0, x)), x, m.mul(x, param(n, 1)))};
}

V lower_leaky_relu_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  return {m.sel(m.gt(x, m.k(0, x)), g, m.mul(g, param(n, 2)))};
}

V lower_elu(Node& n) {
  require_float(n, "elu_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0), alpha = param(n, 1), scale = param(n, 2), input_scale = param(n, 3);
  Value negative = m.mul(m.expm1(m.mul(x, input_scale)), m.mul(alpha, scale));
  return {m.sel(m.le(x, m.k(0, x)), negative, m.mul(x, scale))};
}

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result).
V lower_elu_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), alpha = param(n, 1), scale = param(n, 2), input_scale = param(n, 3);
  Value y = arg_math(n, 5);
  Value neg_coef = m.mul(alpha, scale);
  Value negative =
      n.flag(4) ? m.mul(m.mul(g, input_scale), m.add(y, neg_coef))
                : m.mul(m.mul(m.mul(g, input_scale), neg_coef), m.exp(m.mul(y, input_scale)));
  return {m.sel(m.le(y, m.k(0, y)), negative, m.mul(g, scale))};
}

V lower_hardtanh(Node& n) {
  if (n.compute == DType::Pred) not_implemented("clamp_scalar_cpu", n.compute);
  Value x = arg_as(n, 0, n.compute);
  return {nan_min(n.b, nan_max(n.b, x, arg_as(n, 1, n.compute)), arg_as(n, 2, n.compute))};
}

V lower_hardtanh_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value outside = m.or_(m.le(x, param(n, 2)), m.ge(x, param(n, 3)));
  return {m.sel(outside, m.k(0, g), g)};
}

// Threshold and value are cast to the input's dtype, as on CPU.
V lower_threshold(Node& n) {
  Math m{n.b};
  DType dtype = n.in(0).type.dtype;
  Value x = arg_as(n, 0, dtype);
  return {m.sel(m.le(x, arg_as(n, 1, dtype)), arg_as(n, 2, dtype), x)};
}

V lower_sigmoid_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), y = arg_math(n, 1);
  return {m.mul(m.mul(g, m.sub(m.k(1, y), y)), y)};
}

V lower_tanh_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), y = arg_math(n, 1);
  return {m.mul(g, m.sub(m.k(1, y), m.mul(y, y)))};
}

Value relu6_of_x_plus_3(const Math& m, const Value& x) {
  return m.min(m.max(m.add(x, m.k(3, x)), m.k(0, x)), m.k(6, x));
}

V lower_hardsigmoid(Node& n) {
  require_float(n, "hardsigmoid_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0);
  return {m.div(relu6_of_x_plus_3(m, x), m.k(6, x))};
}

V lower_hardsigmoid_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value inside = m.and_(m.gt(x, m.k(-3, x)), m.lt(x, m.k(3, x)));
  return {m.sel(inside, m.div(g, m.k(6, g)), m.k(0, g))};
}

V lower_hardswish(Node& n) {
  require_float(n, "hardswish_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0);
  return {m.div(m.mul(x, relu6_of_x_plus_3(m, x)), m.k(6, x))};
}

V lower_hardswish_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value middle = m.mul(g, m.add(m.div(x, m.k(3, x)), m.k(0.5, x)));
  return {m.sel(m.lt(x, m.k(-3, x)), m.k(0, g), m.sel(m.le(x, m.k(3, x)), middle, g))};
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); the buffer PyTorch's CPU kernel
// returns holds exp(-|x|).
V lower_log_sigmoid_forward(Node& n) {
  require_float(n, "log_sigmoid_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0);
  Value z = m.exp(m.neg(m.abs(x)));
  Value out = m.sub(m.min(x, m.k(0, x)), m.log1p(z));
  if (n.out(1).shape != x.type.shape) return {out, n.b.full(0, n.out(1))};
  return {out, z};
}

V lower_log_sigmoid_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1);
  Value negative = m.lt(x, m.k(0, x));
  Value z = m.exp(m.neg(m.abs(x)));
  Value ratio = m.div(z, m.add(m.k(1, z), z));
  Value d = m.sel(negative, m.sub(m.k(1, x), ratio), ratio);
  return {m.mul(d, g)};
}

int64_t wrap_dim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

// The two halves of `x` along `dim`, in float math.
std::pair<Value, Value> halves(Node& n, const Value& x, int64_t dim) {
  std::vector<int64_t> start(x.type.rank(), 0), limit = x.type.shape, strides(x.type.rank(), 1);
  int64_t half = x.type.shape[dim] / 2;
  limit[dim] = half;
  Value a = n.b.slice(x, start, limit, strides);
  start[dim] = half;
  limit[dim] = x.type.shape[dim];
  return {a, n.b.slice(x, start, limit, strides)};
}

V lower_glu(Node& n) {
  require_float(n, "glu");
  Math m{n.b};
  Value x = n.b.convert(n.in(0), float_math(n));
  auto [a, b] = halves(n, x, wrap_dim(n.i64(1), x.type.rank()));
  return {m.mul(a, m.sigmoid(b))};
}

V lower_glu_backward(Node& n) {
  Math m{n.b};
  Value x = n.b.convert(n.in(1), float_math(n));
  int64_t dim = wrap_dim(n.i64(2), x.type.rank());
  auto [a, b] = halves(n, x, dim);
  Value g = cast_to(n.b, n.in(0), float_math(n), a.type.shape);
  Value s = m.sigmoid(b);
  Value grad_b = m.mul(m.mul(m.mul(g, a), s), m.sub(m.k(1, s), s));
  return {n.b.concatenate({m.mul(g, s), grad_b}, dim)};
}

// glu_jvp(glu, x, dx, dim): glu's forward derivative along dx = (da, db):
// da * s + a * s * (1 - s) * db, with s = sigmoid(b) (forward-mode AD calls it).
V lower_glu_jvp(Node& n) {
  Math m{n.b};
  DType dt = float_math(n);
  Value x = n.b.convert(n.in(1), dt), dx = n.b.convert(n.in(2), dt);
  int64_t dim = wrap_dim(n.i64(3), x.type.rank());
  auto [a, b] = halves(n, x, dim);
  auto [da, db] = halves(n, dx, dim);
  Value s = m.sigmoid(b);
  return {m.mul(s, m.add(da, m.mul(m.mul(a, m.sub(m.k(1, s), s)), db)))};
}

// glu_backward_jvp(grad_x, grad_glu, x, dgrad_glu, dx, dim): glu_backward's forward
// derivative along (dgrad_glu, dx), with g = grad_glu, s = sigmoid(b), t = s * (1 - s):
//   first half:  dg * s + g * t * db
//   second half: dg * a * t + g * t * da + g * a * t * (1 - 2 s) * db
V lower_glu_backward_jvp(Node& n) {
  Math m{n.b};
  DType dt = float_math(n);
  Value x = n.b.convert(n.in(2), dt), dx = n.b.convert(n.in(4), dt);
  int64_t dim = wrap_dim(n.i64(5), x.type.rank());
  auto [a, b] = halves(n, x, dim);
  auto [da, db] = halves(n, dx, dim);
  Value g = cast_to(n.b, n.in(1), dt, a.type.shape);
  Value dg = cast_to(n.b, n.in(3), dt, a.type.shape);
  Value s = m.sigmoid(b);
  Value t = m.mul(s, m.sub(m.k(1, s), s));
  Value gt = m.mul(g, t);
  Value first = m.add(m.mul(dg, s), m.mul(gt, db));
  Value second = m.add(m.add(m.mul(m.mul(dg, a), t), m.mul(gt, da)),
                       m.mul(m.mul(m.mul(gt, a), m.sub(m.k(1, s), m.mul(m.k(2, s), s))), db));
  return {n.b.concatenate({first, second}, dim)};
}

V lower_softshrink(Node& n) {
  require_float(n, "softshrink_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0), l = param(n, 1);
  // x * 0 keeps NaN inputs NaN.
  return {
      m.sel(m.gt(x, l), m.sub(x, l), m.sel(m.lt(x, m.neg(l)), m.add(x, l), m.mul(x, m.k(0, x))))};
}

V lower_hardshrink(Node& n) {
  require_float(n, "hardshrink_cpu");
  Math m{n.b};
  Value x = arg_math(n, 0), l = param(n, 1);
  Value inside = m.and_(m.ge(x, m.neg(l)), m.le(x, l));
  return {m.sel(inside, m.k(0, x), x)};
}

// The backward of both shrinks: grad outside [-lambd, lambd], else 0.
V lower_shrink_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1), l = param(n, 2);
  Value inside = m.and_(m.ge(x, m.neg(l)), m.le(x, l));
  return {m.sel(inside, m.k(0, g), g)};
}

V lower_prelu(Node& n) {
  Math m{n.b};
  Value x = arg_math(n, 0), w = arg_math(n, 1);
  return {m.sel(m.gt(x, m.k(0, x)), x, m.mul(w, x))};
}

// (grad_input, grad_weight), both of the broadcast shape; prelu's composite reduces
// grad_weight to the weight's shape.
V lower_prelu_backward(Node& n) {
  Math m{n.b};
  Value g = arg_math(n, 0), x = arg_math(n, 1), w = arg_math(n, 2);
  Value positive = m.gt(x, m.k(0, x));
  return {m.sel(positive, g, m.mul(w, g)), m.sel(positive, m.k(0, g), m.mul(x, g))};
}

}  // namespace

TORCH_TPU_LOWERING(gelu, {"gelu", "gelu_", "gelu.out"}, lower_gelu);
TORCH_TPU_LOWERING(gelu_backward, {"gelu_backward", "gelu_backward.grad_input"},
                   lower_gelu_backward);
TORCH_TPU_LOWERING(silu, {"silu", "silu_", "silu.out"}, lower_silu);
TORCH_TPU_LOWERING(silu_backward, {"silu_backward.grad_input"}, lower_silu_backward);
TORCH_TPU_LOWERING(mish, {"mish", "mish_", "mish.out"}, lower_mish);
TORCH_TPU_LOWERING(mish_backward, {"mish_backward"}, lower_mish_backward);
TORCH_TPU_LOWERING(softplus, {"softplus", "softplus.out"}, lower_softplus);
TORCH_TPU_LOWERING(softplus_backward, {"softplus_backward", "softplus_backward.grad_input"},
                   lower_softplus_backward);
TORCH_TPU_LOWERING(leaky_relu, {"leaky_relu", "leaky_relu_", "leaky_relu.out"}, lower_leaky_relu);
TORCH_TPU_LOWERING(leaky_relu_backward, {"leaky_relu_backward", "leaky_relu_backward.grad_input"},
                   lower_leaky_relu_backward);
TORCH_TPU_LOWERING(elu, {"elu", "elu_", "elu.out"}, lower_elu);
TORCH_TPU_LOWERING(elu_backward, {"elu_backward", "elu_backward.grad_input"}, lower_elu_backward);
TORCH_TPU_LOWERING(hardtanh, {"hardtanh", "hardtanh_", "hardtanh.out"}, lower_hardtanh);
TORCH_TPU_LOWERING(hardtanh_backward, {"hardtanh_backward", "hardtanh_backward.grad_input"},
                   lower_hardtanh_backward);
TORCH_TPU_LOWERING(threshold, {"threshold", "threshold_", "threshold.out"}, lower_threshold);
TORCH_TPU_LOWERING(sigmoid_backward, {"sigmoid_backward", "sigmoid_backward.grad_input"},
                   lower_sigmoid_backward);
TORCH_TPU_LOWERING(tanh_backward, {"tanh_backward", "tanh_backward.grad_input"},
                   lower_tanh_backward);
TORCH_TPU_LOWERING(hardsigmoid, {"hardsigmoid", "hardsigmoid_", "hardsigmoid.out"},
                   lower_hardsigmoid);
TORCH_TPU_LOWERING(hardsigmoid_backward,
                   {"hardsigmoid_backward", "hardsigmoid_backward.grad_input"},
                   lower_hardsigmoid_backward);
TORCH_TPU_LOWERING(hardswish, {"hardswish", "hardswish_", "hardswish.out"}, lower_hardswish);
TORCH_TPU_LOWERING(hardswish_backward, {"hardswish_backward"}, lower_hardswish_backward);
TORCH_TPU_LOWERING(log_sigmoid_forward, {"log_sigmoid_forward", "log_sigmoid_forward.output"},
                   lower_log_sigmoid_forward);
TORCH_TPU_LOWERING(log_sigmoid_backward,
                   {"log_sigmoid_backward", "log_sigmoid_backward.grad_input"},
                   lower_log_sigmoid_backward);
TORCH_TPU_LOWERING(glu, {"glu", "glu.out"}, lower_glu);
TORCH_TPU_LOWERING(glu_backward, {"glu_backward", "glu_backward.grad_input"}, lower_glu_backward);
TORCH_TPU_LOWERING(glu_jvp, {"glu_jvp"}, lower_glu_jvp);
TORCH_TPU_LOWERING(glu_backward_jvp, {"glu_backward_jvp"}, lower_glu_backward_jvp);
TORCH_TPU_LOWERING(softshrink, {"softshrink", "softshrink.out"}, lower_softshrink);
TORCH_TPU_LOWERING(hardshrink, {"hardshrink", "hardshrink.out"}, lower_hardshrink);
TORCH_TPU_LOWERING(shrink_backward,
                   {"softshrink_backward", "softshrink_backward.grad_input", "hardshrink_backward",
                    "hardshrink_backward.grad_input"},
                   lower_shrink_backward);
TORCH_TPU_LOWERING(prelu, {"_prelu_kernel"}, lower_prelu);
TORCH_TPU_LOWERING(prelu_backward, {"_prelu_kernel_backward"}, lower_prelu_backward);

}  // namespace torch_tpu::ops
