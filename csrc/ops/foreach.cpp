// _foreach_* ops: one program applies the op to every tensor of the lists, so an optimizer
// step costs one launch per op instead of one per parameter. Each tensor is computed in
// its own result dtype (lists may mix dtypes), bf16/f16 in f32 as PyTorch's kernels do.
#include <cmath>
#include <optional>
#include <string>

#include "ops/common.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

// Argument `a` for the i-th tensor: element i of a tensor or scalar list, else the single
// tensor or scalar itself.
const Value& element(Node& n, size_t a, size_t i) {
  const auto& list = n.list(a);
  if (!list.empty()) return list.at(i).value();
  return n.in(a);
}

using Body = std::function<Value(hlo::Builder&, const V&)>;

// `body` over the arguments at `args`, each converted to the math dtype of the i-th result
// and broadcast to its shape.
LowerFn each(std::vector<size_t> args, Body body) {
  return [args = std::move(args), body = std::move(body)](Node& n) {
    V results;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const TensorType& out = n.out(i);
      const DType m = math_dtype(out.dtype);
      V xs;
      for (size_t a : args) xs.push_back(cast_to(n.b, element(n, a, i), m, out.shape));
      results.push_back(body(n.b, xs));
    }
    return results;
  };
}

Body binary(Binary op) {
  return [op](hlo::Builder& b, const V& x) { return b.binary(op, x[0], x[1]); };
}

// x[0] op alpha * x[1], the alpha=1 overloads passing only two operands.
Body with_alpha(Binary op) {
  return [op](hlo::Builder& b, const V& x) {
    Value y = x.size() > 2 ? b.binary(Binary::Multiply, x[2], x[1]) : x[1];
    return b.binary(op, x[0], y);
  };
}

Body unary(Unary op) {
  return [op](hlo::Builder& b, const V& x) { return b.unary(op, x[0]); };
}

Value flat(hlo::Builder& b, const Value& x) { return b.reshape(x, {x.type.numel()}); }

Value identity(hlo::Builder&, const V& x) { return x[0]; }

Value trunc(hlo::Builder& b, const Value& x) {
  if (!hlo::is_float(x.type.dtype)) return x;
  Value negative = b.compare(Compare::LT, x, b.full(0, x.type));
  return b.select(negative, b.unary(Unary::Ceil, x), b.unary(Unary::Floor, x));
}

// self + value * t1 * t2 and self + value * t1 / t2, in PyTorch's evaluation order.
Value addcmul(hlo::Builder& b, const V& x) {
  return b.binary(Binary::Add, x[0],
                  b.binary(Binary::Multiply, b.binary(Binary::Multiply, x[3], x[1]), x[2]));
}
Value addcdiv(hlo::Builder& b, const V& x) {
  return b.binary(Binary::Add, x[0],
                  b.binary(Binary::Divide, b.binary(Binary::Multiply, x[3], x[1]), x[2]));
}

// PyTorch's two-sided lerp: exact at both ends.
Value lerp(hlo::Builder& b, const V& x) {
  const Value &start = x[0], &end = x[1], &w = x[2];
  Value diff = b.binary(Binary::Subtract, end, start);
  Value small = b.compare(Compare::LT, b.unary(Unary::Abs, w), b.full(0.5, w.type));
  Value low = b.binary(Binary::Add, start, b.binary(Binary::Multiply, w, diff));
  Value high =
      b.binary(Binary::Subtract, end,
               b.binary(Binary::Multiply, diff, b.binary(Binary::Subtract, b.full(1, w.type), w)));
  return b.select(small, low, high);
}

// The vector norm of every tensor for a runtime `ord`: the finite, zero and infinite
// cases are all computed and selected, so a new ord never recompiles.
V lower_norm(Node& n) {  // _foreach_norm.Scalar(self[], ord, dtype?)
  hlo::Builder& b = n.b;
  V results;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const TensorType& out = n.out(i);
    const DType m = math_dtype(out.dtype);
    const Value& xi = n.list(0).at(i).value();
    Value a = b.unary(Unary::Abs, b.convert(xi, m));
    Value p = b.convert(n.in(1), m);
    Value pa = b.broadcast_in_dim(p, a.type.shape, {});
    Value is2 = b.compare(Compare::EQ, pa, b.full(2, a.type));
    Value is0 = b.compare(Compare::EQ, pa, b.full(0, a.type));
    Value nonzero = b.convert(b.compare(Compare::NE, a, b.full(0, a.type)), m);
    Value term =
        b.select(is0, nonzero,
                 b.select(is2, b.binary(Binary::Multiply, a, a), b.binary(Binary::Power, a, pa)));
    Value sum = b.reduce(flat(b, term), b.constant(0, m), {0}, hlo::Binary::Add);
    Value root = b.select(
        b.compare(Compare::EQ, p, b.constant(0, m)), sum,
        b.select(b.compare(Compare::EQ, p, b.constant(2, m)), b.unary(Unary::Sqrt, sum),
                 b.binary(Binary::Power, sum, b.binary(Binary::Divide, b.constant(1, m), p))));
    // max |x| for +inf, -max(-|x|) = min |x| for -inf: one reduction serves both.
    Value negative = b.compare(Compare::LT, p, b.constant(0, m));
    Value signed_a =
        b.select(b.broadcast_in_dim(negative, a.type.shape, {}), b.unary(Unary::Negate, a), a);
    Value mx = b.reduce(flat(b, signed_a), b.constant(-INFINITY, m), {0}, hlo::Binary::Maximum);
    Value inf_norm = b.select(negative, b.unary(Unary::Negate, mx), mx);
    Value is_inf = b.compare(Compare::EQ, b.unary(Unary::Abs, p), b.constant(INFINITY, m));
    results.push_back(b.select(is_inf, inf_norm, root));
  }
  return results;
}

V lower_max(Node& n) {  // _foreach_max(self[])
  V results;
  for (const auto& x : n.list(0)) results.push_back(reduce_extreme(n.b, flat(n.b, *x), {0}, true));
  return results;
}

// The learning rate of a fused optimizer step as a 0-d f64: the float argument `i`, or
// the tensor of the .tensor_lr overloads.
Value learning_rate(Node& n, size_t i) {
  if (n.args.at(i).value) return n.b.convert(n.b.reshape(n.in(i), {}), DType::F64);
  return n.b.constant(n.f64(i), DType::F64);
}

// found_inf (argument `i`) != 0: GradScaler found an inf, and the step changes nothing.
std::optional<Value> skip_step(Node& n, size_t i) {
  if (!n.has(i)) return std::nullopt;
  hlo::Builder& b = n.b;
  return b.compare(Compare::NE, b.convert(b.reshape(n.in(i), {}), DType::F32),
                   b.constant(0, DType::F32));
}

// The new values of a fused step's mutated lists (in schema order, as lists 0, 1, ...),
// in each tensor's dtype; where `skip` holds, the old values instead.
V unless_skipped(Node& n, const std::optional<Value>& skip, std::initializer_list<V> lists) {
  hlo::Builder& b = n.b;
  V results;
  size_t a = 0;
  for (const V& list : lists) {
    for (size_t i = 0; i < list.size(); ++i) {
      const Value& old = n.list(a)[i].value();
      Value fresh = b.convert(list[i], old.type.dtype);
      results.push_back(skip ? b.select(b.broadcast_in_dim(*skip, fresh.type.shape, {}), old, fresh)
                             : fresh);
    }
    ++a;
  }
  return results;
}

// _fused_adam_ / _fused_adamw_(self[], grads[], exp_avgs[], exp_avg_sqs[], max_exp_avg_sqs[],
// state_steps[], *, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale?,
// found_inf?): a whole Adam step in one program, with PyTorch's fused kernel's formulas.
// A nonzero found_inf leaves everything as it was (the step GradScaler skips).
LowerFn fused_adam(bool decoupled) {
  return [decoupled](Node& n) {
    hlo::Builder& b = n.b;
    const size_t k = n.list(0).size();
    const bool amsgrad = n.flag(11), maximize = n.flag(12);
    const double beta1 = n.f64(7), beta2 = n.f64(8), weight_decay = n.f64(9), eps = n.f64(10);
    Value lr = learning_rate(n, 6);
    std::optional<Value> skip = skip_step(n, 14);
    V params, grads, avgs, sqs, maxes;
    for (size_t i = 0; i < k; ++i) {
      const Value& p0 = n.list(0)[i].value();
      const DType m = math_dtype(p0.type.dtype);
      const std::vector<int64_t>& shape = p0.type.shape;
      auto scalar = [&](const Value& x) { return b.broadcast_in_dim(b.convert(x, m), shape, {}); };
      auto constant = [&](double x) { return b.full(x, {m, shape}); };
      // Bias corrections from the step count, in f64 as PyTorch computes them.
      Value step = b.convert(n.list(5)[i].value(), DType::F64);
      Value bc1 = b.binary(Binary::Subtract, b.constant(1, DType::F64),
                           b.binary(Binary::Power, b.constant(beta1, DType::F64), step));
      Value bc2 = b.binary(Binary::Subtract, b.constant(1, DType::F64),
                           b.binary(Binary::Power, b.constant(beta2, DType::F64), step));
      Value step_size = scalar(b.binary(Binary::Divide, lr, bc1));
      Value bc2_sqrt = scalar(b.unary(Unary::Sqrt, bc2));
      Value param = b.convert(p0, m);
      Value grad = b.convert(n.list(1)[i].value(), m);
      if (n.has(13)) grad = b.binary(Binary::Divide, grad, scalar(n.in(13)));
      Value g = maximize ? b.unary(Unary::Negate, grad) : grad;
      if (weight_decay != 0) {
        if (decoupled)
          param = b.binary(
              Binary::Subtract, param,
              b.binary(Binary::Multiply,
                       b.binary(Binary::Multiply, scalar(lr), constant(weight_decay)), param));
        else
          g = b.binary(Binary::Add, g, b.binary(Binary::Multiply, param, constant(weight_decay)));
      }
      Value avg = lerp(b, {b.convert(n.list(2)[i].value(), m), g, constant(1 - beta1)});
      Value sq = b.binary(
          Binary::Add,
          b.binary(Binary::Multiply, b.convert(n.list(3)[i].value(), m), constant(beta2)),
          b.binary(Binary::Multiply, b.binary(Binary::Multiply, constant(1 - beta2), g), g));
      Value second = sq;
      if (amsgrad) {
        second = nan_max(b, b.convert(n.list(4)[i].value(), m), sq);
        maxes.push_back(second);
      }
      Value denom =
          b.binary(Binary::Add, b.binary(Binary::Divide, b.unary(Unary::Sqrt, second), bc2_sqrt),
                   constant(eps));
      params.push_back(
          b.binary(Binary::Subtract, param,
                   b.binary(Binary::Divide, b.binary(Binary::Multiply, step_size, avg), denom)));
      grads.push_back(grad);
      avgs.push_back(avg);
      sqs.push_back(sq);
    }
    return unless_skipped(n, skip, {params, grads, avgs, sqs, maxes});
  };
}

// _fused_sgd_(self[], grads[], momentum_buffer_list[], *, weight_decay, momentum, lr,
// dampening, nesterov, maximize, is_first_step, grad_scale?, found_inf?): torch.optim.SGD's
// step (momentum buffers only when momentum != 0); the first step seeds the buffers with
// the gradient.
V lower_fused_sgd(Node& n) {
  hlo::Builder& b = n.b;
  const double weight_decay = n.f64(3), momentum = n.f64(4), dampening = n.f64(6);
  const bool nesterov = n.flag(7), maximize = n.flag(8), first = n.flag(9);
  Value lr = learning_rate(n, 5);
  std::optional<Value> skip = skip_step(n, 11);
  V params, grads, bufs;
  for (size_t i = 0; i < n.list(0).size(); ++i) {
    const Value& p0 = n.list(0)[i].value();
    const DType m = math_dtype(p0.type.dtype);
    auto constant = [&](double x) { return b.full(x, {m, p0.type.shape}); };
    Value param = b.convert(p0, m);
    Value grad = b.convert(n.list(1)[i].value(), m);
    if (n.has(10))
      grad = b.binary(Binary::Divide, grad,
                      b.broadcast_in_dim(b.convert(n.in(10), m), p0.type.shape, {}));
    grads.push_back(grad);
    Value g = maximize ? b.unary(Unary::Negate, grad) : grad;
    if (weight_decay != 0)
      g = b.binary(Binary::Add, g, b.binary(Binary::Multiply, param, constant(weight_decay)));
    if (momentum != 0) {
      Value buf = first ? g
                        : b.binary(Binary::Add,
                                   b.binary(Binary::Multiply, b.convert(n.list(2)[i].value(), m),
                                            constant(momentum)),
                                   b.binary(Binary::Multiply, g, constant(1 - dampening)));
      bufs.push_back(buf);
      g = nesterov ? b.binary(Binary::Add, g, b.binary(Binary::Multiply, buf, constant(momentum)))
                   : buf;
    } else if (i < n.list(2).size()) {
      bufs.push_back(n.list(2)[i].value());
    }
    Value step =
        b.binary(Binary::Multiply, b.broadcast_in_dim(b.convert(lr, m), p0.type.shape, {}), g);
    params.push_back(b.binary(Binary::Subtract, param, step));
  }
  return unless_skipped(n, skip, {params, grads, bufs});
}

// _fused_adagrad_(self[], grads[], state_sums[], state_steps[], *, lr, lr_decay,
// weight_decay, eps, maximize, grad_scale?, found_inf?): torch.optim.Adagrad's step; the
// optimizer has already counted this step in state_steps, which come back unchanged.
V lower_fused_adagrad(Node& n) {
  hlo::Builder& b = n.b;
  const double lr_decay = n.f64(5), weight_decay = n.f64(6), eps = n.f64(7);
  const bool maximize = n.flag(8);
  Value lr = learning_rate(n, 4);
  std::optional<Value> skip = skip_step(n, 10);
  V params, grads, sums, steps;
  for (size_t i = 0; i < n.list(0).size(); ++i) {
    const Value& p0 = n.list(0)[i].value();
    const DType m = math_dtype(p0.type.dtype);
    const std::vector<int64_t>& shape = p0.type.shape;
    auto constant = [&](double x) { return b.full(x, {m, shape}); };
    Value param = b.convert(p0, m);
    Value grad = b.convert(n.list(1)[i].value(), m);
    if (n.has(9))
      grad = b.binary(Binary::Divide, grad, b.broadcast_in_dim(b.convert(n.in(9), m), shape, {}));
    grads.push_back(grad);
    Value g = maximize ? b.unary(Unary::Negate, grad) : grad;
    if (weight_decay != 0)
      g = b.binary(Binary::Add, g, b.binary(Binary::Multiply, param, constant(weight_decay)));
    // lr / (1 + (step - 1) lr_decay), in f64 as PyTorch computes it.
    Value step = b.convert(n.list(3)[i].value(), DType::F64);
    Value decay = b.binary(
        Binary::Add, b.constant(1, DType::F64),
        b.binary(Binary::Multiply, b.binary(Binary::Subtract, step, b.constant(1, DType::F64)),
                 b.constant(lr_decay, DType::F64)));
    Value clr = b.broadcast_in_dim(b.convert(b.binary(Binary::Divide, lr, decay), m), shape, {});
    Value sum =
        b.binary(Binary::Add, b.convert(n.list(2)[i].value(), m), b.binary(Binary::Multiply, g, g));
    Value std = b.binary(Binary::Add, b.unary(Unary::Sqrt, sum), constant(eps));
    params.push_back(b.binary(Binary::Subtract, param,
                              b.binary(Binary::Divide, b.binary(Binary::Multiply, clr, g), std)));
    sums.push_back(sum);
    steps.push_back(n.list(3)[i].value());
  }
  // Only the mutable form writes state_steps back (unchanged); .tensor_lr reads them.
  if (!n.args.at(4).value) return unless_skipped(n, skip, {params, grads, sums, steps});
  return unless_skipped(n, skip, {params, grads, sums});
}

V lower_zero(Node& n) {
  V results;
  for (const TensorType& out : n.outputs) results.push_back(n.b.full(0, out));
  return results;
}

}  // namespace

// Binary ops: List, Scalar, ScalarList and Tensor overloads all read operands 0 and 1.
TORCH_TPU_LOWERING(foreach_add,
                   {"_foreach_add.List", "_foreach_add_.List", "_foreach_add.Tensor",
                    "_foreach_add_.Tensor"},
                   each({0, 1, 2}, with_alpha(Binary::Add)));
TORCH_TPU_LOWERING(foreach_add_scalar,
                   {"_foreach_add.Scalar", "_foreach_add_.Scalar", "_foreach_add.ScalarList",
                    "_foreach_add_.ScalarList"},
                   each({0, 1}, with_alpha(Binary::Add)));
TORCH_TPU_LOWERING(foreach_sub, {"_foreach_sub.List", "_foreach_sub_.List"},
                   each({0, 1, 2}, with_alpha(Binary::Subtract)));
TORCH_TPU_LOWERING(foreach_sub_scalar,
                   {"_foreach_sub.Scalar", "_foreach_sub_.Scalar", "_foreach_sub.ScalarList",
                    "_foreach_sub_.ScalarList"},
                   each({0, 1}, with_alpha(Binary::Subtract)));
TORCH_TPU_LOWERING(foreach_mul,
                   {"_foreach_mul.List", "_foreach_mul_.List", "_foreach_mul.Scalar",
                    "_foreach_mul_.Scalar", "_foreach_mul.ScalarList", "_foreach_mul_.ScalarList",
                    "_foreach_mul.Tensor", "_foreach_mul_.Tensor"},
                   each({0, 1}, binary(Binary::Multiply)));
TORCH_TPU_LOWERING(foreach_div,
                   {"_foreach_div.List", "_foreach_div_.List", "_foreach_div.Scalar",
                    "_foreach_div_.Scalar", "_foreach_div.ScalarList", "_foreach_div_.ScalarList",
                    "_foreach_div.Tensor", "_foreach_div_.Tensor"},
                   each({0, 1}, binary(Binary::Divide)));
TORCH_TPU_LOWERING(foreach_maximum,
                   {"_foreach_maximum.List", "_foreach_maximum_.List", "_foreach_maximum.Scalar",
                    "_foreach_maximum_.Scalar", "_foreach_maximum.ScalarList",
                    "_foreach_maximum_.ScalarList", "_foreach_clamp_min.List",
                    "_foreach_clamp_min_.List", "_foreach_clamp_min.Scalar",
                    "_foreach_clamp_min_.Scalar", "_foreach_clamp_min.ScalarList",
                    "_foreach_clamp_min_.ScalarList"},
                   each({0, 1},
                        [](hlo::Builder& b, const V& x) { return nan_max(b, x[0], x[1]); }));
TORCH_TPU_LOWERING(foreach_minimum,
                   {"_foreach_minimum.List", "_foreach_minimum_.List", "_foreach_minimum.Scalar",
                    "_foreach_minimum_.Scalar", "_foreach_minimum.ScalarList",
                    "_foreach_minimum_.ScalarList", "_foreach_clamp_max.List",
                    "_foreach_clamp_max_.List", "_foreach_clamp_max.Scalar",
                    "_foreach_clamp_max_.Scalar", "_foreach_clamp_max.ScalarList",
                    "_foreach_clamp_max_.ScalarList"},
                   each({0, 1},
                        [](hlo::Builder& b, const V& x) { return nan_min(b, x[0], x[1]); }));
TORCH_TPU_LOWERING(foreach_pow,
                   {"_foreach_pow.List", "_foreach_pow_.List", "_foreach_pow.Scalar",
                    "_foreach_pow_.Scalar", "_foreach_pow.ScalarList", "_foreach_pow_.ScalarList",
                    "_foreach_pow.ScalarAndTensor"},
                   each({0, 1}, binary(Binary::Power)));

TORCH_TPU_LOWERING(foreach_addcmul,
                   {"_foreach_addcmul.Scalar", "_foreach_addcmul_.Scalar",
                    "_foreach_addcmul.ScalarList", "_foreach_addcmul_.ScalarList"},
                   each({0, 1, 2, 3}, addcmul));
TORCH_TPU_LOWERING(foreach_addcdiv,
                   {"_foreach_addcdiv.Scalar", "_foreach_addcdiv_.Scalar",
                    "_foreach_addcdiv.ScalarList", "_foreach_addcdiv_.ScalarList"},
                   each({0, 1, 2, 3}, addcdiv));
TORCH_TPU_LOWERING(foreach_lerp,
                   {"_foreach_lerp.List", "_foreach_lerp_.List", "_foreach_lerp.Scalar",
                    "_foreach_lerp_.Scalar", "_foreach_lerp.ScalarList",
                    "_foreach_lerp_.ScalarList"},
                   each({0, 1, 2}, lerp));

// torch_tpu/_meta.py gives the .tensor_lr overloads, SGD and Adagrad their meta kernels.
TORCH_TPU_LOWERING(fused_adam, {"_fused_adam_", "_fused_adam_.tensor_lr"}, fused_adam(false));
TORCH_TPU_LOWERING(fused_adamw, {"_fused_adamw_", "_fused_adamw_.tensor_lr"}, fused_adam(true));
TORCH_TPU_LOWERING(fused_sgd, {"_fused_sgd_", "_fused_sgd_.tensor_lr"}, lower_fused_sgd);
TORCH_TPU_LOWERING(fused_adagrad, {"_fused_adagrad_", "_fused_adagrad_.tensor_lr"},
                   lower_fused_adagrad);
TORCH_TPU_LOWERING(foreach_norm, {"_foreach_norm.Scalar"}, lower_norm);
TORCH_TPU_LOWERING(foreach_max, {"_foreach_max"}, lower_max);
TORCH_TPU_LOWERING(foreach_zero, {"_foreach_zero", "_foreach_zero_"}, lower_zero);
TORCH_TPU_LOWERING(foreach_copy, {"_foreach_copy", "_foreach_copy_"}, each({1}, identity));
TORCH_TPU_LOWERING(foreach_clone, {"_foreach_clone"}, each({0}, identity));

// Unary ops.
TORCH_TPU_LOWERING(foreach_abs, {"_foreach_abs", "_foreach_abs_"}, each({0}, unary(Unary::Abs)));
TORCH_TPU_LOWERING(foreach_neg, {"_foreach_neg", "_foreach_neg_"}, each({0}, unary(Unary::Negate)));
TORCH_TPU_LOWERING(foreach_sign, {"_foreach_sign", "_foreach_sign_"},
                   each({0}, unary(Unary::Sign)));
TORCH_TPU_LOWERING(foreach_sqrt, {"_foreach_sqrt", "_foreach_sqrt_"},
                   each({0}, unary(Unary::Sqrt)));
TORCH_TPU_LOWERING(foreach_rsqrt, {"_foreach_rsqrt", "_foreach_rsqrt_"},
                   each({0}, unary(Unary::Rsqrt)));
TORCH_TPU_LOWERING(foreach_exp, {"_foreach_exp", "_foreach_exp_"},
                   each({0}, unary(Unary::Exponential)));
TORCH_TPU_LOWERING(foreach_expm1, {"_foreach_expm1", "_foreach_expm1_"},
                   each({0}, unary(Unary::ExponentialMinusOne)));
TORCH_TPU_LOWERING(foreach_log, {"_foreach_log", "_foreach_log_"}, each({0}, unary(Unary::Log)));
TORCH_TPU_LOWERING(foreach_log1p, {"_foreach_log1p", "_foreach_log1p_"},
                   each({0}, unary(Unary::LogPlusOne)));
TORCH_TPU_LOWERING(foreach_sin, {"_foreach_sin", "_foreach_sin_"}, each({0}, unary(Unary::Sine)));
TORCH_TPU_LOWERING(foreach_cos, {"_foreach_cos", "_foreach_cos_"}, each({0}, unary(Unary::Cosine)));
TORCH_TPU_LOWERING(foreach_tan, {"_foreach_tan", "_foreach_tan_"}, each({0}, unary(Unary::Tan)));
TORCH_TPU_LOWERING(foreach_tanh, {"_foreach_tanh", "_foreach_tanh_"},
                   each({0}, unary(Unary::Tanh)));
TORCH_TPU_LOWERING(foreach_sigmoid, {"_foreach_sigmoid", "_foreach_sigmoid_"},
                   each({0}, unary(Unary::Logistic)));
TORCH_TPU_LOWERING(foreach_erf, {"_foreach_erf", "_foreach_erf_"}, each({0}, unary(Unary::Erf)));
TORCH_TPU_LOWERING(foreach_erfc, {"_foreach_erfc", "_foreach_erfc_"},
                   each({0}, unary(Unary::Erfc)));
TORCH_TPU_LOWERING(foreach_lgamma, {"_foreach_lgamma", "_foreach_lgamma_"},
                   each({0}, unary(Unary::Lgamma)));
TORCH_TPU_LOWERING(foreach_asin, {"_foreach_asin", "_foreach_asin_"},
                   each({0}, unary(Unary::Asin)));
TORCH_TPU_LOWERING(foreach_acos, {"_foreach_acos", "_foreach_acos_"},
                   each({0}, unary(Unary::Acos)));
TORCH_TPU_LOWERING(foreach_atan, {"_foreach_atan", "_foreach_atan_"},
                   each({0}, unary(Unary::Atan)));
TORCH_TPU_LOWERING(foreach_sinh, {"_foreach_sinh", "_foreach_sinh_"},
                   each({0}, unary(Unary::Sinh)));
TORCH_TPU_LOWERING(foreach_cosh, {"_foreach_cosh", "_foreach_cosh_"},
                   each({0}, unary(Unary::Cosh)));
TORCH_TPU_LOWERING(foreach_floor, {"_foreach_floor", "_foreach_floor_"},
                   each({0}, unary(Unary::Floor)));
TORCH_TPU_LOWERING(foreach_ceil, {"_foreach_ceil", "_foreach_ceil_"},
                   each({0}, unary(Unary::Ceil)));
TORCH_TPU_LOWERING(foreach_round, {"_foreach_round", "_foreach_round_"},
                   each({0}, unary(Unary::RoundNearestEven)));
TORCH_TPU_LOWERING(foreach_trunc, {"_foreach_trunc", "_foreach_trunc_"},
                   each({0}, [](hlo::Builder& b, const V& x) { return trunc(b, x[0]); }));
TORCH_TPU_LOWERING(foreach_frac, {"_foreach_frac", "_foreach_frac_"},
                   each({0}, [](hlo::Builder& b, const V& x) {
                     return b.binary(Binary::Subtract, x[0], trunc(b, x[0]));
                   }));
TORCH_TPU_LOWERING(foreach_reciprocal, {"_foreach_reciprocal", "_foreach_reciprocal_"},
                   each({0}, [](hlo::Builder& b, const V& x) {
                     return b.binary(Binary::Divide, b.full(1, x[0].type), x[0]);
                   }));
TORCH_TPU_LOWERING(foreach_log2, {"_foreach_log2", "_foreach_log2_"},
                   each({0}, [](hlo::Builder& b, const V& x) {
                     return b.binary(Binary::Divide, b.unary(Unary::Log, x[0]),
                                     b.full(M_LN2, x[0].type));
                   }));
TORCH_TPU_LOWERING(foreach_log10, {"_foreach_log10", "_foreach_log10_"},
                   each({0}, [](hlo::Builder& b, const V& x) {
                     return b.binary(Binary::Divide, b.unary(Unary::Log, x[0]),
                                     b.full(M_LN10, x[0].type));
                   }));

}  // namespace torch_tpu::ops
