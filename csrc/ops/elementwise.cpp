#include "ops/elementwise.h"

#include <stdexcept>
#include <utility>

namespace torch_tpu::ops {

namespace {

std::pair<hlo::Value, hlo::Value> promote(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y,
                                          hlo::DType dtype) {
  std::vector<int64_t> shape = broadcast_shapes(x.type.shape, y.type.shape);
  return {broadcast_to(b, b.convert(x, dtype), shape), broadcast_to(b, b.convert(y, dtype), shape)};
}

// alpha * y. alpha is a runtime operand, so the multiply is always emitted; XLA fuses it.
hlo::Value scaled(hlo::Builder& b, const hlo::Value& y, const hlo::Value& alpha) {
  if (y.type.dtype == hlo::DType::Pred)
    return b.binary(Binary::And, y, broadcast_to(b, alpha, y.type.shape));
  return b.binary(Binary::Multiply, y,
                  broadcast_to(b, b.convert(alpha, y.type.dtype), y.type.shape));
}

// PyTorch's floor division of floats: derived from the remainder so that inexact
// quotients (1 / 0.1) round like Python's //, and plain a / b when b == 0.
hlo::Value floor_divide_float(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y,
                              const hlo::Value& quotient) {
  hlo::Value zero = b.full(0, x.type);
  hlo::Value mod = b.binary(Binary::Remainder, x, y);
  hlo::Value div = b.binary(Binary::Divide, b.binary(Binary::Subtract, x, mod), y);
  hlo::Value adjust = b.binary(Binary::And, b.compare(hlo::Compare::NE, mod, zero),
                               b.compare(hlo::Compare::NE, b.compare(hlo::Compare::LT, y, zero),
                                         b.compare(hlo::Compare::LT, mod, zero)));
  div = b.select(adjust, b.binary(Binary::Subtract, div, b.full(1, x.type)), div);
  hlo::Value floored = b.unary(Unary::Floor, div);
  hlo::Value round_up =
      b.compare(hlo::Compare::GT, b.binary(Binary::Subtract, div, floored), b.full(0.5, x.type));
  floored = b.select(round_up, b.binary(Binary::Add, floored, b.full(1, x.type)), floored);
  return b.select(b.compare(hlo::Compare::EQ, y, zero), quotient, floored);
}

}  // namespace

hlo::Value lower_add(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y,
                     const hlo::Value& alpha, hlo::DType dtype) {
  auto [l, r] = promote(b, x, y, dtype);
  const Binary op = dtype == hlo::DType::Pred ? Binary::Or : Binary::Add;
  return b.binary(op, l, scaled(b, r, alpha));
}

hlo::Value lower_sub(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y,
                     const hlo::Value& alpha, hlo::DType dtype) {
  auto [l, r] = promote(b, x, y, dtype);
  return b.binary(Binary::Subtract, l, scaled(b, r, alpha));
}

hlo::Value lower_mul(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y, hlo::DType dtype) {
  auto [l, r] = promote(b, x, y, dtype);
  return b.binary(dtype == hlo::DType::Pred ? Binary::And : Binary::Multiply, l, r);
}

hlo::Value lower_div(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y, hlo::DType dtype,
                     DivMode mode) {
  auto [l, r] = promote(b, x, y, dtype);
  hlo::Value q = b.binary(Binary::Divide, l, r);
  if (mode == DivMode::True) return q;
  if (hlo::is_float(dtype)) {
    if (mode == DivMode::Floor) return floor_divide_float(b, l, r, q);
    hlo::Value negative = b.compare(hlo::Compare::LT, q, b.full(0, q.type));
    return b.select(negative, b.unary(Unary::Ceil, q), b.unary(Unary::Floor, q));
  }
  if (mode == DivMode::Trunc || hlo::is_unsigned_int(dtype)) return q;  // integer divide truncates
  // Floor division: step down when the remainder is non-zero and the signs differ.
  hlo::Value zero = b.full(0, q.type);
  hlo::Value rem = b.binary(Binary::Remainder, l, r);
  hlo::Value inexact = b.compare(hlo::Compare::NE, rem, zero);
  hlo::Value signs_differ = b.compare(hlo::Compare::NE, b.compare(hlo::Compare::LT, l, zero),
                                      b.compare(hlo::Compare::LT, r, zero));
  hlo::Value adjust = b.binary(Binary::And, inexact, signs_differ);
  return b.select(adjust, b.binary(Binary::Subtract, q, b.full(1, q.type)), q);
}

hlo::Value lower_relu(hlo::Builder& b, const hlo::Value& x) {
  return b.binary(Binary::Maximum, x, b.full(0, x.type));
}

hlo::Value lower_threshold_backward(hlo::Builder& b, const hlo::Value& grad, const hlo::Value& x,
                                    const hlo::Value& threshold, hlo::DType dtype) {
  auto [g, v] = promote(b, grad, x, dtype);
  hlo::Value t = broadcast_to(b, b.convert(threshold, dtype), v.type.shape);
  return b.select(b.compare(hlo::Compare::LE, v, t), b.full(0, g.type), g);
}

// The table lines of the arithmetic every eager op, fused group and compiled graph runs.
// Promote (ops/registry.h) gives their CPU checks and error texts; the two checks of
// CPU's kernels that no promotion rule covers are in the lowerings.
namespace {

using V = std::vector<hlo::Value>;

V add(Node& n) { return {lower_add(n.b, n.in(0), n.in(1), n.in(2), n.compute)}; }
V sub(Node& n) { return {lower_sub(n.b, n.in(0), n.in(1), n.in(2), n.compute)}; }
V rsub(Node& n) { return {lower_sub(n.b, n.in(1), n.in(0), n.in(2), n.compute)}; }
V mul(Node& n) { return {lower_mul(n.b, n.in(0), n.in(1), n.compute)}; }
V div(Node& n) {
  DivMode mode = DivMode::True;
  if (n.args.size() > 2 && !n.is_none(2))
    mode = n.str(2) == "trunc" ? DivMode::Trunc : DivMode::Floor;
  return {lower_div(n.b, n.in(0), n.in(1), n.compute, mode)};
}
V relu(Node& n) {
  const hlo::Value& x = n.in(0);
  if (x.type.dtype == hlo::DType::Pred) throw Refused("Boolean inputs not supported for relu");
  if (hlo::is_complex(x.type.dtype))
    throw NotImplemented("clamp is not supported for complex types");
  return {lower_relu(n.b, x)};
}
// _add_relu: relu(self + alpha * other), the fused add + relu of quantization-aware models.
V add_relu(Node& n) {
  return {lower_relu(n.b, lower_add(n.b, n.in(0), n.in(1), n.in(2), n.compute))};
}
V threshold_backward(Node& n) {
  return {lower_threshold_backward(n.b, n.in(0), n.in(1), n.in(2), n.compute)};
}

}  // namespace

TORCH_TPU_LOWERING(add, {"add.Tensor", "add_.Tensor", "add.out", "add.Scalar"}, add,
                   Promote::Binary);
TORCH_TPU_LOWERING(sub, {"sub.Tensor", "sub_.Tensor", "sub.out", "sub.Scalar"}, sub,
                   Promote::Subtract);
TORCH_TPU_LOWERING(rsub, {"rsub.Scalar"}, rsub, Promote::Subtract);
TORCH_TPU_LOWERING(mul, {"mul.Tensor", "mul_.Tensor", "mul.out", "mul.Scalar"}, mul,
                   Promote::Binary);
TORCH_TPU_LOWERING(div,
                   {"div.Tensor", "div_.Tensor", "div.out", "div.Scalar", "div.Tensor_mode",
                    "div_.Tensor_mode", "div.out_mode", "div.Scalar_mode"},
                   div, Promote::TrueDivide);
TORCH_TPU_LOWERING(relu, {"relu", "relu_"}, relu);
TORCH_TPU_LOWERING(add_relu,
                   {"_add_relu.Tensor", "_add_relu_.Tensor", "_add_relu.out", "_add_relu.Scalar",
                    "_add_relu_.Scalar"},
                   add_relu, Promote::Binary);
TORCH_TPU_LOWERING(threshold_backward, {"threshold_backward", "threshold_backward.grad_input"},
                   threshold_backward);

}  // namespace torch_tpu::ops
