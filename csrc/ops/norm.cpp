// Batch, layer and group normalization and their gradients. Statistics are computed in
// f32 for bf16/f16 inputs (and f64 for f64), as PyTorch's CPU kernels do; the variance is
// the two-pass mean of squared deviations, the biased one for normalizing.
#include <numeric>

#include "ops/common.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

// `v` (shaped like x with reduced dims of size 1) stretched back to `shape`.
Value expand(hlo::Builder& b, const Value& v, const Ints& shape) {
  Ints dims(shape.size());
  std::iota(dims.begin(), dims.end(), 0);
  return b.broadcast_in_dim(v, shape, dims);
}

Value mul(hlo::Builder& b, const Value& x, const Value& y) {
  return b.binary(Binary::Multiply, x, expand(b, y, x.type.shape));
}

Value sub(hlo::Builder& b, const Value& x, const Value& y) {
  return b.binary(Binary::Subtract, x, expand(b, y, x.type.shape));
}

Value mean_keep(hlo::Builder& b, const Value& x, const Ints& dims) {
  return lower_mean(b, x, dims, true, x.type.dtype);
}

// 1 / sqrt(var + eps).
Value inv_std(hlo::Builder& b, const Value& var, double eps) {
  return b.unary(Unary::Rsqrt, b.binary(Binary::Add, var, b.full(eps, var.type)));
}

struct Normalized {
  Value y;           // (x - mean) * rstd
  Value mean, rstd;  // with the reduced dims kept as size 1
  Value var;         // biased
};

Normalized normalize(hlo::Builder& b, const Value& x, const Ints& dims, double eps) {
  Value mean = mean_keep(b, x, dims);
  Value centered = sub(b, x, mean);
  Value var = mean_keep(b, b.binary(Binary::Multiply, centered, centered), dims);
  Value rstd = inv_std(b, var, eps);
  return {mul(b, centered, rstd), mean, rstd, var};
}

// The input gradient of xhat = (x - mean) * rstd with batch statistics, given the
// gradient `g` with respect to xhat: rstd * (g - mean(g) - xhat * mean(g * xhat)).
Value normalize_grad(hlo::Builder& b, const Value& g, const Value& xhat, const Value& rstd,
                     const Ints& dims) {
  Value g_mean = mean_keep(b, g, dims);
  Value proj = mean_keep(b, b.binary(Binary::Multiply, g, xhat), dims);
  Value d = b.binary(Binary::Subtract, sub(b, g, g_mean), mul(b, xhat, proj));
  return mul(b, d, rstd);
}

Ints all_but(int64_t rank, int64_t keep) {
  Ints dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != keep) dims.push_back(d);
  return dims;
}

// A per-channel vector [C] as a [1, C, 1, ...] value of `rank`.
Value channel(hlo::Builder& b, const Value& v, int64_t rank, hlo::DType dtype) {
  Ints shape(rank, 1);
  shape[1] = v.type.shape[0];
  return b.reshape(b.convert(v, dtype), shape);
}

Value affine(Node& n, Value y, size_t weight, size_t bias,
             const std::function<Value(const Value&)>& shape_like) {
  hlo::Builder& b = n.b;
  if (n.has(weight)) y = mul(b, y, shape_like(n.in(weight)));
  if (n.has(bias)) y = b.binary(Binary::Add, y, expand(b, shape_like(n.in(bias)), y.type.shape));
  return y;
}

// The result for an output PyTorch leaves empty (eval-mode saved statistics).
Value or_empty(hlo::Builder& b, const Value& v, const hlo::TensorType& want) {
  return want.numel() == v.type.numel() ? b.reshape(v, want.shape) : b.full(0, want);
}

// ---- batch norm ----

struct BatchNorm {
  size_t weight = 1, bias = 2, running_mean = 3, running_var = 4;
  bool training;
  double momentum, eps;
};

// The normalized output, saved mean and saved invstd, then the new running statistics
// when `bn` has them.
V batch_norm(Node& n, const BatchNorm& bn) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.in(0).type.dtype);
  Value x = b.convert(n.in(0), acc);
  int64_t rank = x.type.rank(), c = x.type.shape[1];
  Ints dims = all_but(rank, 1);
  auto per_channel = [&](const Value& v) { return channel(b, v, rank, acc); };
  bool stats = bn.running_mean != SIZE_MAX && n.has(bn.running_mean);
  Value mean, rstd, var;
  if (bn.training) {
    Normalized nz = normalize(b, x, dims, bn.eps);
    mean = nz.mean, rstd = nz.rstd, var = nz.var;
  } else {
    mean = per_channel(n.in(bn.running_mean));
    rstd = inv_std(b, per_channel(n.in(bn.running_var)), bn.eps);
  }
  Value y = affine(n, mul(b, sub(b, x, mean), rstd), bn.weight, bn.bias, per_channel);
  V out{y, or_empty(b, mean, n.out(1)), or_empty(b, rstd, n.out(2))};
  if (!stats) return out;
  Value rm = n.in(bn.running_mean), rv = n.in(bn.running_var);
  if (!bn.training) {
    out.push_back(rm);
    out.push_back(rv);
    return out;
  }
  int64_t count = x.type.numel() / std::max<int64_t>(c, 1);
  auto update = [&](const Value& running, const Value& batch, double scale) {
    hlo::DType t = math_dtype(running.type.dtype);
    Value r = b.convert(running, t);
    Value s = b.convert(b.reshape(batch, {c}), t);
    Value kept = b.binary(Binary::Multiply, r, b.full(1 - bn.momentum, r.type));
    return b.binary(Binary::Add, kept,
                    b.binary(Binary::Multiply, s, b.full(bn.momentum * scale, s.type)));
  };
  out.push_back(update(rm, mean, 1.0));
  out.push_back(update(rv, var, count > 1 ? double(count) / double(count - 1) : 1.0));
  return out;
}

V lower_batch_norm_legit(Node& n) {
  return batch_norm(n, {1, 2, 3, 4, n.flag(5), n.f64(6), n.f64(7)});
}
V lower_batch_norm_no_stats(Node& n) {
  return batch_norm(n, {1, 2, SIZE_MAX, SIZE_MAX, n.flag(3), n.f64(4), n.f64(5)});
}
V lower_batch_norm_no_training(Node& n) {
  V out = batch_norm(n, {1, 2, 3, 4, false, n.f64(5), n.f64(6)});
  out.resize(3);
  return out;
}
V lower_batch_norm_functional(Node& n) {
  return batch_norm(n, {1, 2, 3, 4, n.flag(5), n.f64(6), n.f64(7)});
}

V lower_batch_norm_backward(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.in(1).type.dtype);
  Value x = b.convert(n.in(1), acc), dy = b.convert(n.in(0), acc);
  int64_t rank = x.type.rank();
  Ints dims = all_but(rank, 1);
  auto per_channel = [&](const Value& v) { return channel(b, v, rank, acc); };
  bool train = n.flag(7);
  Value mean = per_channel(n.in(train ? 5 : 3));
  Value rstd = train ? per_channel(n.in(6)) : inv_std(b, per_channel(n.in(4)), n.f64(8));
  Value xhat = mul(b, sub(b, x, mean), rstd);
  Value g = n.has(2) ? mul(b, dy, per_channel(n.in(2))) : dy;
  const Ints& mask = n.ints(9);
  V grads;
  grads.push_back(mask[0] ? (train ? normalize_grad(b, g, xhat, rstd, dims) : mul(b, g, rstd))
                          : b.full(0, n.out(0)));
  grads.push_back(mask[1] ? lower_sum(b, b.binary(Binary::Multiply, dy, xhat), dims, false, acc)
                          : b.full(0, n.out(1)));
  grads.push_back(mask[2] ? lower_sum(b, dy, dims, false, acc) : b.full(0, n.out(2)));
  return grads;
}

// ---- layer norm ----

Ints trailing(int64_t rank, size_t count) {
  Ints dims;
  for (int64_t d = rank - static_cast<int64_t>(count); d < rank; ++d) dims.push_back(d);
  return dims;
}

// A weight or bias of the normalized shape, as a value broadcastable over x.
Value trailing_param(hlo::Builder& b, const Value& v, int64_t rank, hlo::DType dtype) {
  Ints shape(rank - v.type.rank(), 1);
  shape.insert(shape.end(), v.type.shape.begin(), v.type.shape.end());
  return b.reshape(b.convert(v, dtype), shape);
}

V lower_layer_norm(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.in(0).type.dtype);
  Value x = b.convert(n.in(0), acc);
  int64_t rank = x.type.rank();
  Normalized nz = normalize(b, x, trailing(rank, n.ints(1).size()), n.f64(4));
  auto param = [&](const Value& v) { return trailing_param(b, v, rank, acc); };
  Value y = affine(n, nz.y, 2, 3, param);
  return {y, b.reshape(nz.mean, n.out(1).shape), b.reshape(nz.rstd, n.out(2).shape)};
}

V lower_layer_norm_backward(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.in(1).type.dtype);
  Value x = b.convert(n.in(1), acc), dy = b.convert(n.in(0), acc);
  int64_t rank = x.type.rank();
  size_t k = n.ints(2).size();
  Ints dims = trailing(rank, k), outer(rank - k);
  std::iota(outer.begin(), outer.end(), 0);
  Ints kept = x.type.shape;
  for (int64_t d : dims) kept[d] = 1;
  Value mean = b.reshape(b.convert(n.in(3), acc), kept),
        rstd = b.reshape(b.convert(n.in(4), acc), kept);
  Value xhat = mul(b, sub(b, x, mean), rstd);
  Value g = n.has(5) ? mul(b, dy, trailing_param(b, n.in(5), rank, acc)) : dy;
  const Ints& mask = n.ints(7);
  V grads;
  grads.push_back(mask[0] ? normalize_grad(b, g, xhat, rstd, dims) : b.full(0, n.out(0)));
  auto reduce_outer = [&](const Value& v, const hlo::TensorType& want) {
    // An empty `outer` would mean "every dim" to lower_sum.
    Value s = outer.empty() ? v : lower_sum(b, v, outer, false, acc);
    return b.reshape(s, want.shape);
  };
  grads.push_back(mask[1] ? reduce_outer(b.binary(Binary::Multiply, dy, xhat), n.out(1))
                          : b.full(0, n.out(1)));
  grads.push_back(mask[2] ? reduce_outer(dy, n.out(2)) : b.full(0, n.out(2)));
  return grads;
}

// ---- group norm ----

struct Groups {
  int64_t n, c, hw, g;
  Ints grouped() const { return {n, g, c / g * hw}; }
  Ints channels() const { return {n, c, hw}; }
};

Value channel3(hlo::Builder& b, const Value& v, hlo::DType dtype) {
  return b.reshape(b.convert(v, dtype), {1, v.type.shape[0], 1});
}

V lower_group_norm(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.in(0).type.dtype);
  Groups gr{n.i64(3), n.i64(4), n.i64(5), n.i64(6)};
  Value x = b.reshape(b.convert(n.in(0), acc), gr.grouped());
  Normalized nz = normalize(b, x, {2}, n.f64(7));
  Value y = b.reshape(nz.y, gr.channels());
  y = affine(n, y, 1, 2, [&](const Value& v) { return channel3(b, v, acc); });
  return {b.reshape(y, n.out(0).shape), b.reshape(nz.mean, n.out(1).shape),
          b.reshape(nz.rstd, n.out(2).shape)};
}

V lower_group_norm_backward(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.in(1).type.dtype);
  Groups gr{n.i64(5), n.i64(6), n.i64(7), n.i64(8)};
  Ints stats{gr.n, gr.g, 1};
  Value x = b.reshape(b.convert(n.in(1), acc), gr.grouped());
  Value dy = b.reshape(b.convert(n.in(0), acc), gr.channels());
  Value mean = b.reshape(b.convert(n.in(2), acc), stats),
        rstd = b.reshape(b.convert(n.in(3), acc), stats);
  Value xhat = mul(b, sub(b, x, mean), rstd);
  Value g = n.has(4) ? mul(b, dy, channel3(b, n.in(4), acc)) : dy;
  const Ints& mask = n.ints(9);
  V grads;
  grads.push_back(mask[0]
                      ? b.reshape(normalize_grad(b, b.reshape(g, gr.grouped()), xhat, rstd, {2}),
                                  n.out(0).shape)
                      : b.full(0, n.out(0)));
  Value xhat_c = b.reshape(xhat, gr.channels());
  grads.push_back(mask[1] ? lower_sum(b, b.binary(Binary::Multiply, dy, xhat_c), {0, 2}, false, acc)
                          : b.full(0, n.out(1)));
  grads.push_back(mask[2] ? lower_sum(b, dy, {0, 2}, false, acc) : b.full(0, n.out(2)));
  return grads;
}

// _weight_norm_interface(v, g, dim): w = v * g / ||v||, the norm over every dim but `dim`
// (over all of v for dim -1), and the norms (shaped as g, computed in f32 for bf16/f16).
Ints norm_dims(int64_t rank, int64_t dim) {
  if (dim == -1) {
    Ints all(rank);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  return all_but(rank, wrap_dim(dim, rank));
}

// v's shape with the reduced dims of size 1: where g, the norms and grad_g are computed.
Ints kept_shape(const Value& v, const Ints& dims) {
  Ints shape = v.type.shape;
  for (int64_t d : dims) shape[d] = 1;
  return shape;
}

Value v_norms(hlo::Builder& b, const Value& v, const Ints& dims) {
  Value sq = b.reduce(b.binary(Binary::Multiply, v, v), b.constant(0, v.type.dtype), dims,
                      Binary::Add);
  return b.reshape(b.unary(Unary::Sqrt, sq), kept_shape(v, dims));
}

V lower_weight_norm(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.out(0).dtype);
  Value v = b.convert(n.in(0), acc);
  Ints dims = norm_dims(v.type.rank(), n.i64(2));
  Value g = b.reshape(b.convert(n.in(1), acc), kept_shape(v, dims));
  Value norms = v_norms(b, v, dims);
  Value w = mul(b, v, b.binary(Binary::Divide, g, norms));
  return {b.convert(w, n.out(0).dtype), b.convert(b.reshape(norms, n.out(1).shape), n.out(1).dtype)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
//   grad_g = sum(grad_w * v) / norms,  grad_v = g / norms * (grad_w - v * grad_g / norms)
V lower_weight_norm_backward(Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.out(0).dtype);
  Value gw = b.convert(n.in(0), acc), v = b.convert(n.in(1), acc);
  Ints dims = norm_dims(v.type.rank(), n.i64(4));
  Ints kept = kept_shape(v, dims);
  Value g = b.reshape(b.convert(n.in(2), acc), kept);
  Value norms = b.reshape(b.convert(n.in(3), acc), kept);
  Value dot = b.reshape(b.reduce(b.binary(Binary::Multiply, gw, v), b.constant(0, acc), dims,
                                 Binary::Add),
                        kept);
  Value grad_g = b.binary(Binary::Divide, dot, norms);
  Value inner = sub(b, gw, mul(b, v, b.binary(Binary::Divide, grad_g, norms)));
  Value grad_v = mul(b, inner, b.binary(Binary::Divide, g, norms));
  return {b.convert(grad_v, n.out(0).dtype),
          b.convert(b.reshape(grad_g, n.out(1).shape), n.out(1).dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(batch_norm_legit, {"_native_batch_norm_legit"}, lower_batch_norm_legit);
TORCH_TPU_LOWERING(batch_norm_no_stats,
                   {"_native_batch_norm_legit.no_stats", "_native_batch_norm_legit.no_stats_out"},
                   lower_batch_norm_no_stats);
TORCH_TPU_LOWERING(batch_norm_no_training,
                   {"_native_batch_norm_legit_no_training",
                    "_native_batch_norm_legit_no_training.out"},
                   lower_batch_norm_no_training);
TORCH_TPU_LOWERING(batch_norm_functional, {"_native_batch_norm_legit_functional"},
                   lower_batch_norm_functional);
TORCH_TPU_LOWERING(batch_norm_backward,
                   {"native_batch_norm_backward", "native_batch_norm_backward.out"},
                   lower_batch_norm_backward);
TORCH_TPU_LOWERING(layer_norm, {"native_layer_norm", "native_layer_norm.out"}, lower_layer_norm);
TORCH_TPU_LOWERING(weight_norm, {"_weight_norm_interface"}, lower_weight_norm);
TORCH_TPU_LOWERING(weight_norm_backward, {"_weight_norm_interface_backward"},
                   lower_weight_norm_backward);
TORCH_TPU_LOWERING(layer_norm_backward,
                   {"native_layer_norm_backward", "native_layer_norm_backward.out"},
                   lower_layer_norm_backward);
TORCH_TPU_LOWERING(group_norm, {"native_group_norm", "native_group_norm.out"}, lower_group_norm);
TORCH_TPU_LOWERING(group_norm_backward,
                   {"native_group_norm_backward", "native_group_norm_backward.out"},
                   lower_group_norm_backward);

}  // namespace torch_tpu::ops
