// Loss functions and their backward ops. `reduction` is PyTorch's enum: 0 none, 1 mean,
// 2 sum. bf16/f16 compute in f32; elementwise inputs broadcast to the meta kernel's
// shape, as PyTorch's TensorIterator kernels broadcast them.
#include <algorithm>
#include <cmath>
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

enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };

Value reduce_loss(hlo::Builder& b, const Value& loss, int64_t reduction, DType dtype) {
  if (reduction == Mean) return lower_mean(b, loss, {}, false, dtype);
  if (reduction == Sum) return lower_sum(b, loss, {}, false, dtype);
  return loss;
}

Value scalar_like(hlo::Builder& b, double v, const Value& like) { return b.full(v, like.type); }

// ---- elementwise losses ---------------------------------------------------------------

// loss(self, target, ...) for losses that are elementwise before the reduction. `fn`
// receives self and target in the math dtype, broadcast to a common shape.
using PointLoss = std::function<Value(Node&, const Value&, const Value&)>;

LowerFn pointwise_loss(size_t reduction_arg, PointLoss fn) {
  return [reduction_arg, fn](Node& n) {
    hlo::Builder& b = n.b;
    DType acc = math_dtype(n.out().dtype);
    std::vector<int64_t> shape = broadcast_shapes(n.in(0).type.shape, n.in(1).type.shape);
    Value x = cast_to(b, n.in(0), acc, shape);
    Value t = cast_to(b, n.in(1), acc, shape);
    return V{reduce_loss(b, fn(n, x, t), n.i64(reduction_arg), acc)};
  };
}

// d loss / d self for (grad_output, self, target, ...): `fn` gets self and
// target broadcast to the result's shape and returns the local derivative; the result
// is that times grad_output (divided by the element count for a mean).
LowerFn pointwise_backward(size_t reduction_arg, PointLoss fn) {
  return [reduction_arg, fn](Node& n) {
    hlo::Builder& b = n.b;
    DType acc = math_dtype(n.out().dtype);
    const std::vector<int64_t>& shape = n.out().shape;
    Value x = cast_to(b, n.in(1), acc, shape);
    Value t = cast_to(b, n.in(2), acc, shape);
    Value g = cast_to(b, n.in(0), acc, shape);
    if (n.i64(reduction_arg) == Mean)
      g = b.binary(Binary::Divide, g,
                   b.full(static_cast<double>(TensorType{acc, shape}.numel()), g.type));
    return V{b.binary(Binary::Multiply, fn(n, x, t), g)};
  };
}

Value mse(Node& n, const Value& x, const Value& t) {
  Value d = n.b.binary(Binary::Subtract, x, t);
  return n.b.binary(Binary::Multiply, d, d);
}

Value mse_grad(Node& n, const Value& x, const Value& t) {
  return n.b.binary(Binary::Multiply, scalar_like(n.b, 2, x), n.b.binary(Binary::Subtract, x, t));
}

// Weights (an optional tensor argument) broadcast to `like`, or nothing.
std::optional<Value> weight_arg(Node& n, size_t i, const Value& like) {
  if (!n.has(i)) return std::nullopt;
  return cast_to(n.b, n.in(i), like.type.dtype, like.type.shape);
}

Value times_weight(hlo::Builder& b, const Value& v, const std::optional<Value>& w) {
  return w ? b.binary(Binary::Multiply, v, *w) : v;
}

// binary_cross_entropy(self, target, weight?, reduction): PyTorch clamps each log at
// -100 so that probabilities of exactly 0 or 1 give finite losses.
Value bce(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  Value floor = scalar_like(b, -100, x);
  Value log_x = b.binary(Binary::Maximum, b.unary(Unary::Log, x), floor);
  Value log_1mx =
      b.binary(Binary::Maximum, b.unary(Unary::LogPlusOne, b.unary(Unary::Negate, x)), floor);
  Value one = scalar_like(b, 1, x);
  Value loss = b.binary(Binary::Subtract,
                        b.binary(Binary::Multiply, b.binary(Binary::Subtract, t, one), log_1mx),
                        b.binary(Binary::Multiply, t, log_x));
  return times_weight(b, loss, weight_arg(n, 2, x));
}

// (x - t) / max(x (1 - x), 1e-12), the clamp matching PyTorch's.
Value bce_grad(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  Value denom = b.binary(Binary::Multiply, b.binary(Binary::Subtract, scalar_like(b, 1, x), x), x);
  denom = b.binary(Binary::Maximum, denom, scalar_like(b, 1e-12, x));
  Value grad = b.binary(Binary::Divide, b.binary(Binary::Subtract, x, t), denom);
  return times_weight(b, grad, weight_arg(n, 3, x));
}

// binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction):
// (1 - t) x - lw log_sigmoid(x), lw = 1 + (pos_weight - 1) t.
Value bce_logits(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  Value zero = scalar_like(b, 0, x), one = scalar_like(b, 1, x);
  Value softplus_neg_abs =
      b.unary(Unary::LogPlusOne,
              b.unary(Unary::Exponential, b.unary(Unary::Negate, b.unary(Unary::Abs, x))));
  Value log_sigmoid =
      b.binary(Binary::Subtract, b.binary(Binary::Minimum, x, zero), softplus_neg_abs);
  if (std::optional<Value> pw = weight_arg(n, 3, x))
    log_sigmoid =
        b.binary(Binary::Multiply,
                 b.binary(Binary::Add, one,
                          b.binary(Binary::Multiply, b.binary(Binary::Subtract, *pw, one), t)),
                 log_sigmoid);
  Value loss =
      b.binary(Binary::Subtract, b.binary(Binary::Multiply, b.binary(Binary::Subtract, one, t), x),
               log_sigmoid);
  return times_weight(b, loss, weight_arg(n, 2, x));
}

// smooth_l1_loss(self, target, reduction, beta): 0.5 d^2 / beta below beta, else
// |d| - 0.5 beta; beta 0 is the l1 loss.
Value smooth_l1(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  double beta = n.f64(3);
  Value d = b.unary(Unary::Abs, b.binary(Binary::Subtract, x, t));
  if (beta == 0) return d;
  Value quad =
      b.binary(Binary::Divide,
               b.binary(Binary::Multiply, scalar_like(b, 0.5, d), b.binary(Binary::Multiply, d, d)),
               scalar_like(b, beta, d));
  Value lin = b.binary(Binary::Subtract, d, scalar_like(b, 0.5 * beta, d));
  return b.select(b.compare(Compare::LT, d, scalar_like(b, beta, d)), quad, lin);
}

// huber_loss(self, target, reduction, delta): 0.5 d^2 below delta, else
// delta (|d| - 0.5 delta).
Value huber(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  double delta = n.f64(3);
  Value d = b.unary(Unary::Abs, b.binary(Binary::Subtract, x, t));
  Value quad = b.binary(Binary::Multiply, scalar_like(b, 0.5, d), b.binary(Binary::Multiply, d, d));
  Value lin = b.binary(Binary::Multiply, scalar_like(b, delta, d),
                       b.binary(Binary::Subtract, d, scalar_like(b, 0.5 * delta, d)));
  return b.select(b.compare(Compare::LT, d, scalar_like(b, delta, d)), quad, lin);
}

// The derivative of both: -scale at or below -limit, +scale at or above limit, else
// `inner` (the comparisons include the edges, as PyTorch's kernels do).
Value clipped_grad(hlo::Builder& b, const Value& d, double limit, double scale,
                   const Value& inner) {
  Value low = b.compare(Compare::LE, d, scalar_like(b, -limit, d));
  Value high = b.compare(Compare::GE, d, scalar_like(b, limit, d));
  return b.select(low, scalar_like(b, -scale, d), b.select(high, scalar_like(b, scale, d), inner));
}

Value smooth_l1_grad(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  double beta = n.f64(4);
  Value d = b.binary(Binary::Subtract, x, t);
  return clipped_grad(b, d, beta, 1, b.binary(Binary::Divide, d, scalar_like(b, beta, d)));
}

Value huber_grad(Node& n, const Value& x, const Value& t) {
  double delta = n.f64(4);
  Value d = n.b.binary(Binary::Subtract, x, t);
  return clipped_grad(n.b, d, delta, delta, d);
}

// ---- negative log likelihood ----------------------------------------------------------

// What both nll directions share for (self, target, weight?, reduction, ignore_index)
// starting at argument `first`: the class dim, a one-hot mask of each target's class
// over self's shape, and each target's weight (0 where it is ignore_index).
struct Nll {
  int64_t class_dim;
  Value onehot;
  Value weight;  // target-shaped
};

Nll nll_common(Node& n, size_t first, DType acc) {
  hlo::Builder& b = n.b;
  const Value& self = n.in(first);
  const Value target = b.convert(n.in(first + 1), DType::S64);
  const int64_t rank = self.type.rank();
  const int64_t class_dim = rank == 1 ? 0 : 1;
  std::vector<int64_t> kept = other_dims(rank, class_dim);
  Value classes = b.iota(TensorType{DType::S64, self.type.shape}, class_dim);
  Value onehot = b.compare(Compare::EQ, classes, b.broadcast_in_dim(target, self.type.shape, kept));
  TensorType wt{acc, target.type.shape};
  Value w = b.full(1, wt);
  if (n.has(first + 2)) {
    Value per_class =
        b.broadcast_in_dim(b.convert(n.in(first + 2), acc), self.type.shape, {class_dim});
    w = b.reduce(b.select(onehot, per_class, b.full(0, per_class.type)), b.constant(0, acc),
                 {class_dim}, Binary::Add);
  }
  Value ignore =
      b.full(static_cast<double>(n.i64(first + 4)), TensorType{DType::S64, target.type.shape});
  w = b.select(b.compare(Compare::NE, target, ignore), w, b.full(0, wt));
  return {class_dim, onehot, w};
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction, ignore_index)
// -> (output, total_weight).
V lower_nll_forward(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out(0).dtype);
  Nll c = nll_common(n, 0, acc);
  Value x = b.convert(n.in(0), acc);
  Value picked = b.reduce(b.select(c.onehot, x, b.full(0, x.type)), b.constant(0, acc),
                          {c.class_dim}, Binary::Add);
  Value zero = b.full(0, picked.type);
  // Ignored targets contribute exactly 0, even when their logit is infinite.
  Value loss = b.select(b.compare(Compare::NE, c.weight, zero),
                        b.unary(Unary::Negate, b.binary(Binary::Multiply, picked, c.weight)), zero);
  int64_t reduction = n.i64(3);
  Value total = lower_sum(b, c.weight, {}, false, acc);
  if (reduction == None) return V{loss, b.full(0, TensorType{acc, {}})};
  Value sum = lower_sum(b, loss, {}, false, acc);
  if (reduction == Sum) return V{sum, total};
  return V{b.binary(Binary::Divide, sum, total), total};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?, reduction,
// ignore_index, total_weight): -weight[target] * grad at each target's class, else 0.
V lower_nll_backward(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out().dtype);
  Nll c = nll_common(n, 1, acc);
  Value g = b.convert(n.in(0), acc);
  if (n.i64(4) == Mean) g = b.binary(Binary::Divide, g, b.convert(n.in(6), acc));
  const std::vector<int64_t>& shape = n.out().shape;
  std::vector<int64_t> kept = other_dims(static_cast<int64_t>(shape.size()), c.class_dim);
  Value coeff = b.binary(Binary::Multiply, c.weight, broadcast_to(b, g, c.weight.type.shape));
  Value per_elem = b.broadcast_in_dim(b.unary(Unary::Negate, coeff), shape, kept);
  return V{b.select(c.onehot, per_elem, b.full(0, per_elem.type))};
}

// ---- margin losses over classes ----------------------------------------------------------

// self as [N, C] (a 1-d input is one row, a 0-d one a single class) and a [N, C] one-hot
// of `index` ([N] or [N, K] -> [N, K, C]) over the classes.
Value rows(hlo::Builder& b, const Value& self, DType acc) {
  Value x = b.convert(self, acc);
  if (self.type.rank() == 0) return b.reshape(x, {1, 1});
  return self.type.rank() == 1 ? b.reshape(x, {1, self.type.shape[0]}) : x;
}

Value class_onehot(hlo::Builder& b, const Value& index, int64_t classes) {
  std::vector<int64_t> shape = index.type.shape;
  shape.push_back(classes);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < index.type.rank(); ++d) dims.push_back(d);
  TensorType it{DType::S64, shape};
  return b.compare(Compare::EQ, b.broadcast_in_dim(b.convert(index, DType::S64), shape, dims),
                   b.iota(it, index.type.rank()));
}

// Per-row losses [N] -> the op's output (0-d per row for a 1-d input with no reduction).
Value finish_rows(hlo::Builder& b, const Value& per_row, int64_t reduction, const TensorType& out,
                  DType acc) {
  Value r = reduce_loss(b, per_row, reduction, acc);
  return b.convert(b.reshape(r, out.shape), out.dtype);
}

// A multi-margin loss's terms over [N, C]: z = margin - x[y] + x[j], the terms that count
// (z > 0, j != y), whether p is 1, and weight[y] per row (1 without weights). Arguments
// at positions `target`, `p`, `margin` and `weight` of the op.
struct MultiMarginTerms {
  Value onehot, zero, z, linear, active, weight;
};

MultiMarginTerms multi_margin_terms(Node& n, const Value& x, size_t target, size_t p,
                                    size_t margin, size_t weight) {
  hlo::Builder& b = n.b;
  Math m{b};
  const DType acc = x.type.dtype;
  const int64_t batch = x.type.shape[0], classes = x.type.shape[1];
  MultiMarginTerms t;
  t.onehot = class_onehot(b, b.reshape(n.in(target), {batch}), classes);
  t.zero = b.full(0, x.type);
  Value picked = b.reduce(m.sel(t.onehot, x, t.zero), b.constant(0, acc), {1}, Binary::Add);
  Value margin_v = b.broadcast_in_dim(b.convert(n.in(margin), acc), x.type.shape, {});
  t.z = m.add(m.sub(margin_v, b.broadcast_in_dim(picked, x.type.shape, {0})), x);
  Value p_v = b.broadcast_in_dim(b.convert(n.in(p), acc), x.type.shape, {});
  t.linear = m.eq(p_v, b.full(1, x.type));
  t.active = m.and_(m.gt(t.z, t.zero), m.not_(t.onehot));
  t.weight = b.full(1, x.type);
  if (n.has(weight)) {
    Value w = b.broadcast_in_dim(b.convert(n.in(weight), acc), x.type.shape, {1});
    Value wy = b.reduce(m.sel(t.onehot, w, t.zero), b.constant(0, acc), {1}, Binary::Add);
    t.weight = b.broadcast_in_dim(wy, x.type.shape, {0});
  }
  return t;
}

// multi_margin_loss(self, target, p, margin, weight?, reduction): per row, the sum over
// classes j != y of max(0, margin - x[y] + x[j])^p (times weight[y]), over C.
V lower_multi_margin(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const DType acc = math_dtype(n.out().dtype);
  Value x = rows(b, n.in(0), acc);
  const int64_t classes = x.type.shape[1];
  MultiMarginTerms t = multi_margin_terms(n, x, 1, 2, 3, 4);
  Value h = m.sel(t.linear, t.z, m.mul(t.z, t.z));
  h = m.sel(t.active, m.mul(h, t.weight), t.zero);
  Value per_row = b.reduce(h, b.constant(0, acc), {1}, Binary::Add);
  per_row = m.div(per_row, b.full(static_cast<double>(classes), per_row.type));
  return V{finish_rows(b, per_row, n.i64(5), n.out(), acc)};
}

// A multilabel margin loss's terms over [N, K (label slot), C (class j)]: the labels of a
// row are its target entries before the first negative one; z = 1 - x[label] + x[j].
struct MultilabelTerms {
  Value label;   // [N, K]: slot k holds a label
  Value onehot;  // [N, K, C]: target[k] == c
  Value z;       // [N, K, C]
  Value zero;    // [N, K, C] zeros
  std::vector<int64_t> cube;
};

MultilabelTerms multilabel_terms(hlo::Builder& b, const Value& x, const Value& target_in) {
  Math m{b};
  const int64_t batch = x.type.shape[0], classes = x.type.shape[1];
  const DType acc = x.type.dtype;
  MultilabelTerms t;
  Value target = b.reshape(b.convert(target_in, DType::S64), {batch, classes});
  TensorType it{DType::S64, {batch, classes}};
  Value k = b.iota(it, 1);
  Value negative_at =
      m.sel(m.lt(target, b.full(0, it)), k, b.full(static_cast<double>(classes), it));
  Value first_negative =
      b.reduce(negative_at, b.constant_int(classes, DType::S64), {1}, Binary::Minimum);
  t.label = m.lt(k, b.broadcast_in_dim(first_negative, it.shape, {0}));
  t.onehot = class_onehot(b, target, classes);
  t.cube = {batch, classes, classes};
  Value xs = b.broadcast_in_dim(x, t.cube, {0, 2});
  t.zero = b.full(0, {acc, t.cube});
  Value picked = b.reduce(m.sel(t.onehot, xs, t.zero), b.constant(0, acc), {2}, Binary::Add);
  t.z = m.add(m.sub(b.full(1, {acc, t.cube}), b.broadcast_in_dim(picked, t.cube, {0, 1})), xs);
  return t;
}

// The terms that count: a label slot, a class that is no target, z > 0.
Value multilabel_active(hlo::Builder& b, const MultilabelTerms& t, const Value& is_target) {
  Math m{b};
  return m.and_(m.and_(b.broadcast_in_dim(t.label, t.cube, {0, 1}),
                       m.not_(b.broadcast_in_dim(is_target, t.cube, {0, 2}))),
                m.gt(t.z, t.zero));
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target): per row,
// the sum over labels y and non-label classes j of max(0, 1 - x[y] + x[j]), over C.
V lower_multilabel_margin(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const DType acc = math_dtype(n.out(0).dtype);
  Value x = rows(b, n.in(0), acc);
  const int64_t classes = x.type.shape[1];
  MultilabelTerms t = multilabel_terms(b, x, n.in(1));
  Value hit = m.and_(t.onehot, b.broadcast_in_dim(t.label, t.cube, {0, 1}));
  Value is_target = b.reduce(hit, b.constant(0, DType::Pred), {1}, Binary::Or);  // [N, C]
  Value use = multilabel_active(b, t, is_target);
  Value per_row = b.reduce(m.sel(use, t.z, t.zero), b.constant(0, acc), {1, 2}, Binary::Add);
  per_row = m.div(per_row, b.full(static_cast<double>(classes), per_row.type));
  const TensorType& marks = n.out(1);
  return V{finish_rows(b, per_row, n.i64(2), n.out(0), acc),
           b.reshape(b.convert(is_target, marks.dtype), marks.shape)};
}

// The per-row scale of a margin loss's gradient: grad_output (per row for reduction
// none, else one value, divided by the rows for mean) over the classes, as [N, C].
Value margin_grad_scale(hlo::Builder& b, const Value& grad_output, int64_t reduction,
                        const TensorType& x, DType acc) {
  const int64_t batch = x.shape[0], classes = x.shape[1];
  Value g = b.convert(grad_output, acc);
  Value per_row = reduction == 0 && g.type.numel() == batch
                      ? b.reshape(g, {batch})
                      : b.broadcast_in_dim(b.reshape(g, {}), {batch}, {});
  double scale = static_cast<double>(classes) * (reduction == 1 ? static_cast<double>(batch) : 1.0);
  per_row = b.binary(Binary::Divide, per_row, b.full(scale, per_row.type));
  return b.broadcast_in_dim(per_row, x.shape, {0});
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction):
// for each active j (j != y, z = margin - x[y] + x[j] > 0), d/dx[j] = w[y] h'(z) and
// d/dx[y] = -sum_j w[y] h'(z), h' = 1 (p = 1) or 2z (p = 2); times grad_output / C.
V lower_multi_margin_backward(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const DType acc = math_dtype(n.out().dtype);
  Value x = rows(b, n.in(1), acc);
  MultiMarginTerms t = multi_margin_terms(n, x, 2, 3, 4, 5);
  Value d = m.sel(t.linear, b.full(1, x.type), m.mul(b.full(2, x.type), t.z));
  d = m.sel(t.active, m.mul(d, t.weight), t.zero);
  Value total = b.reduce(d, b.constant(0, acc), {1}, Binary::Add);
  Value grad = m.sub(d, m.sel(t.onehot, b.broadcast_in_dim(total, x.type.shape, {0}), t.zero));
  grad = m.mul(grad, margin_grad_scale(b, n.in(0), n.i64(6), x.type, acc));
  return V{b.convert(b.reshape(grad, n.out().shape), n.out().dtype)};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target): for
// each label y and non-target j with z = 1 - x[y] + x[j] > 0, +1 to x[j] and -1 to x[y];
// times grad_output / C.
V lower_multilabel_margin_backward(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const DType acc = math_dtype(n.out().dtype);
  Value x = rows(b, n.in(1), acc);
  MultilabelTerms t = multilabel_terms(b, x, n.in(2));
  Value is_target = b.reshape(b.compare(hlo::Compare::NE, b.convert(n.in(4), acc),
                                        b.full(0, {acc, n.in(4).type.shape})),
                              x.type.shape);
  Value use = multilabel_active(b, t, is_target);
  Value ones = m.sel(use, b.full(1, {acc, t.cube}), t.zero);  // [N, K (label), C (j)]
  Value plus = b.reduce(ones, b.constant(0, acc), {1}, Binary::Add);       // per j
  Value per_label = b.reduce(ones, b.constant(0, acc), {2}, Binary::Add);  // [N, K]
  // -count of label k, moved to its class target[k]
  Value minus = b.reduce(m.sel(t.onehot, b.broadcast_in_dim(per_label, t.cube, {0, 1}), t.zero),
                         b.constant(0, acc), {1}, Binary::Add);
  Value grad = m.mul(m.sub(plus, minus), margin_grad_scale(b, n.in(0), n.i64(3), x.type, acc));
  return V{b.convert(b.reshape(grad, n.out().shape), n.out().dtype)};
}

// ---- connectionist temporal classification ---------------------------------------------

// A length argument as s64 [N]: a tensor (_ctc_loss.Tensor) or a list of ints.
Value lengths_arg(Node& n, size_t i, int64_t batch) {
  hlo::Builder& b = n.b;
  if (n.has(i)) return b.reshape(b.convert(n.in(i), DType::S64), {batch});
  const std::vector<int64_t>& v = n.ints(i);
  Value r = b.full(0, {DType::S64, {batch}});
  for (int64_t k = 0; k < batch && k < static_cast<int64_t>(v.size()); ++k) {
    Value at = b.compare(Compare::EQ, b.iota({DType::S64, {batch}}, 0),
                         b.full(static_cast<double>(k), r.type));
    r = b.select(at, b.full(static_cast<double>(v[k]), r.type), r);
  }
  return r;
}

// _ctc_loss(log_probs [T, N, C], targets, input_lengths, target_lengths, blank,
// zero_infinity) -> (neg_log_likelihood [N], log_alpha [N, T, 2 S + 1]), CPU's forward
// recursion over the blank-extended targets l': alpha_t(s) = logsumexp(alpha_{t-1}(s),
// alpha_{t-1}(s - 1), alpha_{t-1}(s - 2) where l'(s) != l'(s - 2)) + log_probs_t(l'(s)),
// in a stablehlo.while over t; each sequence stops at its input length. Targets are
// [N, S] or concatenated (1-d, read at the running sum of target_lengths).
V lower_ctc(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const DType acc = math_dtype(n.out(0).dtype);
  Value lp = b.convert(n.in(0), acc);
  if (lp.type.rank() != 3) throw Unsupported("_ctc_loss: log_probs must be 3-d");
  const int64_t steps = lp.type.shape[0], batch = lp.type.shape[1], classes = lp.type.shape[2];
  const TensorType& alpha_out = n.out(1);
  const int64_t ext = alpha_out.shape.at(2), width = (ext - 1) / 2;
  const double blank = static_cast<double>(n.i64(4));
  const double neg = -INFINITY;
  Value il = lengths_arg(n, 2, batch), tl = lengths_arg(n, 3, batch);
  if (steps == 0 || batch == 0) return V{b.full(0, n.out(0)), b.full(neg, alpha_out)};

  // l'(n, s): blank at even s, target (s - 1) / 2 at odd s.
  TensorType et{DType::S64, {batch, ext}};
  Value s_idx = b.iota(et, 1), n_idx = b.iota(et, 0);
  Value odd = m.eq(b.binary(Binary::Remainder, s_idx, b.full(2, et)), b.full(1, et));
  Value j = b.binary(Binary::Divide, m.sub(s_idx, b.full(1, et)), b.full(2, et));
  j = m.max(m.min(j, b.full(static_cast<double>(std::max<int64_t>(width - 1, 0)), et)),
            b.full(0, et));
  Value labels = b.full(blank, et);
  const Value& targets = n.in(1);
  if (width > 0 && targets.type.numel() > 0) {
    Value flat = b.reshape(b.convert(targets, DType::S64), {targets.type.numel()});
    Value pos;
    if (targets.type.rank() == 2) {
      pos = m.add(m.mul(n_idx, b.full(static_cast<double>(targets.type.shape[1]), et)), j);
    } else {
      // Exclusive running sum of the target lengths: sum of tl[k] for k < n.
      TensorType sq{DType::S64, {batch, batch}};
      Value before = m.lt(b.iota(sq, 1), b.iota(sq, 0));
      Value start = b.reduce(m.sel(before, b.broadcast_in_dim(tl, sq.shape, {1}), b.full(0, sq)),
                             b.constant_int(0, DType::S64), {1}, hlo::Binary::Add);
      pos = m.add(b.broadcast_in_dim(start, et.shape, {0}), j);
    }
    pos =
        m.max(m.min(pos, b.full(static_cast<double>(targets.type.numel() - 1), et)), b.full(0, et));
    labels = m.sel(odd, b.gather_flat(flat, pos), labels);
  }
  // Where the s - 2 transition is allowed.
  Value skip = b.full(0, {DType::Pred, et.shape});
  if (ext > 2) {
    Value shifted = b.slice(b.pad(labels, b.constant_int(-1, DType::S64), {0, 2}, {0, 0}, {0, 0}),
                            {0, 0}, {batch, ext}, {1, 1});
    skip = m.and_(m.ge(s_idx, b.full(2, et)), m.ne(labels, shifted));
  }
  // log_probs at l', for every step: [T, N, L].
  TensorType tt{DType::S64, {steps, batch, ext}};
  Value index = m.add(m.add(m.mul(b.iota(tt, 0), b.full(static_cast<double>(batch * classes), tt)),
                            m.mul(b.broadcast_in_dim(n_idx, tt.shape, {1, 2}),
                                  b.full(static_cast<double>(classes), tt))),
                      b.broadcast_in_dim(labels, tt.shape, {1, 2}));
  Value lp_ext = b.gather_flat(b.reshape(lp, {steps * batch * classes}), index);

  TensorType at{acc, {batch, ext}};
  Value il_b = b.broadcast_in_dim(il, et.shape, {0});
  Value tl_b = b.broadcast_in_dim(tl, et.shape, {0});
  Value inside = m.lt(s_idx, m.add(m.mul(tl_b, b.full(2, et)), b.full(1, et)));
  Value first = b.reshape(b.slice(lp_ext, {0, 0, 0}, {1, batch, ext}, {1, 1, 1}), at.shape);
  Value start_ok = m.or_(m.eq(s_idx, b.full(0, et)),
                         m.and_(m.eq(s_idx, b.full(1, et)), m.gt(tl_b, b.full(0, et))));
  Value alpha0 = m.sel(start_ok, first, b.full(neg, at));
  TensorType ht{acc, {batch, steps, ext}};
  Value history =
      b.dynamic_update_slice(b.full(neg, ht), b.reshape(alpha0, {batch, 1, ext}),
                             {b.constant_int(0, DType::S64), b.constant_int(0, DType::S64),
                              b.constant_int(0, DType::S64)});

  const TensorType s0{DType::S64, {}};
  const TensorType pt{DType::Pred, et.shape};
  std::vector<TensorType> types{s0, at, ht, lp_ext.type, et, pt, pt};
  std::string cond = b.region(types, [steps](hlo::Builder& r, const V& a) {
    return V{r.compare(Compare::LT, a[0], r.constant_int(steps, DType::S64))};
  });
  std::string body = b.region(types, [batch, ext, neg](hlo::Builder& r, const V& a) {
    Math rm{r};
    const Value &t = a[0], &prev = a[1], &lps = a[3], &ilb = a[4], &skp = a[5], &ins = a[6];
    Value zero = r.constant_int(0, DType::S64);
    Value row = r.reshape(r.dynamic_slice(lps, {t, zero, zero}, {1, batch, ext}), prev.type.shape);
    Value ninf = r.full(neg, prev.type);
    Value a1 = prev;
    Value a2 = r.slice(r.pad(prev, r.constant(neg, prev.type.dtype), {0, 1}, {0, 0}, {0, 0}),
                       {0, 0}, {batch, ext}, {1, 1});
    Value a3 = r.slice(r.pad(prev, r.constant(neg, prev.type.dtype), {0, 2}, {0, 0}, {0, 0}),
                       {0, 0}, {batch, ext}, {1, 1});
    a3 = rm.sel(skp, a3, ninf);
    Value mx = rm.max(a1, rm.max(a2, a3));
    mx = rm.sel(rm.eq(mx, ninf), r.full(0, prev.type), mx);
    Value sum =
        rm.add(rm.add(rm.exp(rm.sub(a1, mx)), rm.exp(rm.sub(a2, mx))), rm.exp(rm.sub(a3, mx)));
    Value next = rm.add(rm.add(rm.log(sum), mx), row);
    next = rm.sel(ins, next, ninf);
    Value live = rm.lt(r.broadcast_in_dim(t, ilb.type.shape, {}), ilb);
    Value hist = r.dynamic_update_slice(a[2], r.reshape(rm.sel(live, next, ninf), {batch, 1, ext}),
                                        {zero, t, zero});
    Value t1 = r.binary(Binary::Add, t, r.constant_int(1, DType::S64));
    return V{t1, rm.sel(live, next, prev), hist, lps, ilb, skp, ins};
  });
  V done =
      b.emit_multi("stablehlo.while",
                   {b.constant_int(1, DType::S64), alpha0, history, lp_ext, il_b, skip, inside}, "",
                   types, {cond, body});
  Value alpha = done[1];
  // -logsumexp(alpha(2 tl), alpha(2 tl - 1)) at each sequence's last step.
  Value end = m.mul(tl_b, b.full(2, et));
  Value zero_a = b.full(0, at), ninf_a = b.full(neg, at);
  Value l1 = b.reduce(m.sel(m.eq(s_idx, end), alpha, zero_a), b.constant(0, acc), {1}, Binary::Add);
  Value l2 =
      b.reduce(m.sel(m.and_(m.eq(s_idx, m.sub(end, b.full(1, et))), m.gt(tl_b, b.full(0, et))),
                     alpha, ninf_a),
               b.constant(neg, acc), {1}, Binary::Maximum);
  TensorType rt{acc, {batch}};
  Value mx = m.max(l1, l2);
  mx = m.sel(m.eq(mx, b.full(neg, rt)), b.full(0, rt), mx);
  Value ll = m.add(m.log(m.add(m.exp(m.sub(l1, mx)), m.exp(m.sub(l2, mx)))), mx);
  return V{b.convert(m.neg(ll), n.out(0).dtype), b.convert(done[2], alpha_out.dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(mse_loss, {"mse_loss", "mse_loss.out"}, pointwise_loss(2, mse));
TORCH_TPU_LOWERING(mse_loss_backward, {"mse_loss_backward", "mse_loss_backward.grad_input"},
                   pointwise_backward(3, mse_grad));
TORCH_TPU_LOWERING(binary_cross_entropy, {"binary_cross_entropy", "binary_cross_entropy.out"},
                   pointwise_loss(3, bce));
TORCH_TPU_LOWERING(binary_cross_entropy_backward,
                   {"binary_cross_entropy_backward", "binary_cross_entropy_backward.grad_input"},
                   pointwise_backward(4, bce_grad));
TORCH_TPU_LOWERING(binary_cross_entropy_with_logits,
                   {"binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits.out"},
                   pointwise_loss(4, bce_logits));
TORCH_TPU_LOWERING(smooth_l1_loss, {"smooth_l1_loss", "smooth_l1_loss.out"},
                   pointwise_loss(2, smooth_l1));
TORCH_TPU_LOWERING(smooth_l1_loss_backward,
                   {"smooth_l1_loss_backward", "smooth_l1_loss_backward.grad_input"},
                   pointwise_backward(3, smooth_l1_grad));
TORCH_TPU_LOWERING(huber_loss, {"huber_loss", "huber_loss.out"}, pointwise_loss(2, huber));
TORCH_TPU_LOWERING(huber_loss_backward, {"huber_loss_backward", "huber_loss_backward.out"},
                   pointwise_backward(3, huber_grad));
TORCH_TPU_LOWERING(multi_margin_loss_backward,
                   {"multi_margin_loss_backward", "multi_margin_loss_backward.grad_input"},
                   lower_multi_margin_backward);
TORCH_TPU_LOWERING(multilabel_margin_loss_backward,
                   {"multilabel_margin_loss_backward", "multilabel_margin_loss_backward.grad_input"},
                   lower_multilabel_margin_backward);
TORCH_TPU_LOWERING(multi_margin_loss, {"multi_margin_loss", "multi_margin_loss.out"},
                   lower_multi_margin);
TORCH_TPU_LOWERING(multilabel_margin_loss_forward,
                   {"multilabel_margin_loss_forward", "multilabel_margin_loss_forward.output"},
                   lower_multilabel_margin);
TORCH_TPU_LOWERING(ctc_loss,
                   {"_ctc_loss", "_ctc_loss.out", "_ctc_loss.Tensor", "_ctc_loss.Tensor_out"},
                   lower_ctc);
TORCH_TPU_LOWERING(nll_loss_forward,
                   {"nll_loss_forward", "nll_loss_forward.output", "nll_loss2d_forward",
                    "nll_loss2d_forward.output"},
                   lower_nll_forward);
TORCH_TPU_LOWERING(nll_loss_backward,
                   {"nll_loss_backward", "nll_loss_backward.grad_input", "nll_loss2d_backward",
                    "nll_loss2d_backward.grad_input"},
                   lower_nll_backward);

}  // namespace torch_tpu::ops
