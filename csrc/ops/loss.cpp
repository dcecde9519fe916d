// Loss functions and their backward ops. `reduction` is PyTorch's enum: 0 none, 1 mean,
// 2 sum. bf16/f16 compute in f32; elementwise inputs broadcast to the meta kernel's
// shape, as PyTorch's TensorIterator kernels broadcast them.
#include "ops/elementwise.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::Reducer;
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
      g = b.binary("divide", g, b.full(static_cast<double>(TensorType{acc, shape}.numel()), g.type));
    return V{b.binary("multiply", fn(n, x, t), g)};
  };
}

Value mse(Node& n, const Value& x, const Value& t) {
  Value d = n.b.binary("subtract", x, t);
  return n.b.binary("multiply", d, d);
}

Value mse_grad(Node& n, const Value& x, const Value& t) {
  return n.b.binary("multiply", scalar_like(n.b, 2, x), n.b.binary("subtract", x, t));
}

// Weights (an optional tensor argument) broadcast to `like`, or nothing.
std::optional<Value> weight_arg(Node& n, size_t i, const Value& like) {
  if (!n.has(i)) return std::nullopt;
  return cast_to(n.b, n.in(i), like.type.dtype, like.type.shape);
}

Value times_weight(hlo::Builder& b, const Value& v, const std::optional<Value>& w) {
  return w ? b.binary("multiply", v, *w) : v;
}

// binary_cross_entropy(self, target, weight?, reduction): PyTorch clamps each log at
// -100 so that probabilities of exactly 0 or 1 give finite losses.
Value bce(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  Value floor = scalar_like(b, -100, x);
  Value log_x = b.binary("maximum", b.unary("log", x), floor);
  Value log_1mx = b.binary("maximum", b.unary("log_plus_one", b.unary("negate", x)), floor);
  Value one = scalar_like(b, 1, x);
  Value loss = b.binary("subtract", b.binary("multiply", b.binary("subtract", t, one), log_1mx),
                        b.binary("multiply", t, log_x));
  return times_weight(b, loss, weight_arg(n, 2, x));
}

// (x - t) / max(x (1 - x), 1e-12), the clamp matching PyTorch's.
Value bce_grad(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  Value denom = b.binary("multiply", b.binary("subtract", scalar_like(b, 1, x), x), x);
  denom = b.binary("maximum", denom, scalar_like(b, 1e-12, x));
  Value grad = b.binary("divide", b.binary("subtract", x, t), denom);
  return times_weight(b, grad, weight_arg(n, 3, x));
}

// binary_cross_entropy_with_logits(self, target, weight?, pos_weight?, reduction):
// (1 - t) x - lw log_sigmoid(x), lw = 1 + (pos_weight - 1) t.
Value bce_logits(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  Value zero = scalar_like(b, 0, x), one = scalar_like(b, 1, x);
  Value softplus_neg_abs = b.unary("log_plus_one", b.unary("exponential", b.unary("negate", b.unary("abs", x))));
  Value log_sigmoid = b.binary("subtract", b.binary("minimum", x, zero), softplus_neg_abs);
  if (std::optional<Value> pw = weight_arg(n, 3, x))
    log_sigmoid = b.binary("multiply", b.binary("add", one, b.binary("multiply", b.binary("subtract", *pw, one), t)),
                           log_sigmoid);
  Value loss = b.binary("subtract", b.binary("multiply", b.binary("subtract", one, t), x), log_sigmoid);
  return times_weight(b, loss, weight_arg(n, 2, x));
}

// smooth_l1_loss(self, target, reduction, beta): 0.5 d^2 / beta below beta, else
// |d| - 0.5 beta; beta 0 is the l1 loss.
Value smooth_l1(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  double beta = n.f64(3);
  Value d = b.unary("abs", b.binary("subtract", x, t));
  if (beta == 0) return d;
  Value quad = b.binary("divide", b.binary("multiply", scalar_like(b, 0.5, d), b.binary("multiply", d, d)),
                        scalar_like(b, beta, d));
  Value lin = b.binary("subtract", d, scalar_like(b, 0.5 * beta, d));
  return b.select(b.compare(Compare::LT, d, scalar_like(b, beta, d)), quad, lin);
}

// huber_loss(self, target, reduction, delta): 0.5 d^2 below delta, else
// delta (|d| - 0.5 delta).
Value huber(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  double delta = n.f64(3);
  Value d = b.unary("abs", b.binary("subtract", x, t));
  Value quad = b.binary("multiply", scalar_like(b, 0.5, d), b.binary("multiply", d, d));
  Value lin = b.binary("multiply", scalar_like(b, delta, d), b.binary("subtract", d, scalar_like(b, 0.5 * delta, d)));
  return b.select(b.compare(Compare::LT, d, scalar_like(b, delta, d)), quad, lin);
}

// The derivative of both: -scale at or below -limit, +scale at or above limit, else
// `inner` (the comparisons include the edges, as PyTorch's kernels do).
Value clipped_grad(hlo::Builder& b, const Value& d, double limit, double scale, const Value& inner) {
  Value low = b.compare(Compare::LE, d, scalar_like(b, -limit, d));
  Value high = b.compare(Compare::GE, d, scalar_like(b, limit, d));
  return b.select(low, scalar_like(b, -scale, d), b.select(high, scalar_like(b, scale, d), inner));
}

Value smooth_l1_grad(Node& n, const Value& x, const Value& t) {
  hlo::Builder& b = n.b;
  double beta = n.f64(4);
  Value d = b.binary("subtract", x, t);
  return clipped_grad(b, d, beta, 1, b.binary("divide", d, scalar_like(b, beta, d)));
}

Value huber_grad(Node& n, const Value& x, const Value& t) {
  double delta = n.f64(4);
  Value d = n.b.binary("subtract", x, t);
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
    Value per_class = b.broadcast_in_dim(b.convert(n.in(first + 2), acc), self.type.shape, {class_dim});
    w = b.reduce(b.select(onehot, per_class, b.full(0, per_class.type)), b.constant(0, acc), {class_dim},
                 Reducer::Add);
  }
  Value ignore = b.full(static_cast<double>(n.i64(first + 4)), TensorType{DType::S64, target.type.shape});
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
  Value picked = b.reduce(b.select(c.onehot, x, b.full(0, x.type)), b.constant(0, acc), {c.class_dim},
                          Reducer::Add);
  Value zero = b.full(0, picked.type);
  // Ignored targets contribute exactly 0, even when their logit is infinite.
  Value loss = b.select(b.compare(Compare::NE, c.weight, zero),
                        b.unary("negate", b.binary("multiply", picked, c.weight)), zero);
  int64_t reduction = n.i64(3);
  Value total = lower_sum(b, c.weight, {}, false, acc);
  if (reduction == None) return V{loss, b.full(0, TensorType{acc, {}})};
  Value sum = lower_sum(b, loss, {}, false, acc);
  if (reduction == Sum) return V{sum, total};
  return V{b.binary("divide", sum, total), total};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?, reduction,
// ignore_index, total_weight): -weight[target] * grad at each target's class, else 0.
V lower_nll_backward(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out().dtype);
  Nll c = nll_common(n, 1, acc);
  Value g = b.convert(n.in(0), acc);
  if (n.i64(4) == Mean) g = b.binary("divide", g, b.convert(n.in(6), acc));
  const std::vector<int64_t>& shape = n.out().shape;
  std::vector<int64_t> kept = other_dims(static_cast<int64_t>(shape.size()), c.class_dim);
  Value coeff = b.binary("multiply", c.weight, broadcast_to(b, g, c.weight.type.shape));
  Value per_elem = b.broadcast_in_dim(b.unary("negate", coeff), shape, kept);
  return V{b.select(c.onehot, per_elem, b.full(0, per_elem.type))};
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
TORCH_TPU_LOWERING(nll_loss_forward,
                   {"nll_loss_forward", "nll_loss_forward.output", "nll_loss2d_forward",
                    "nll_loss2d_forward.output"},
                   lower_nll_forward);
TORCH_TPU_LOWERING(nll_loss_backward,
                   {"nll_loss_backward", "nll_loss_backward.grad_input", "nll_loss2d_backward",
                    "nll_loss2d_backward.grad_input"},
                   lower_nll_backward);

}  // namespace torch_tpu::ops
