// softmax and log_softmax along one dim, forward and backward, computed in f32 for
// bf16/f16 (the meta kernel says whether half_to_float keeps the f32 result); the masked
// softmax of nn.MultiheadAttention's inference fast path.
#include "ops/common.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// The reduction of `x` over `dim`, broadcast back to x's shape.
Value reduce_back(hlo::Builder& b, const Value& x, int64_t dim, Binary r, const Value& init) {
  Value red = b.reduce(x, init, {dim}, r);
  return b.broadcast_in_dim(red, x.type.shape, other_dims(x.type.rank(), dim));
}

// Softmax needs at least one dim; a 0-d tensor is handled as a one-element vector.
Value as_vector(hlo::Builder& b, const Value& x) {
  return x.type.rank() == 0 ? b.reshape(x, {1}) : x;
}

// x - max(x) over dim: the shifted logits both forms exponentiate.
Value shifted(hlo::Builder& b, const Value& x, int64_t dim) {
  return b.binary(Binary::Subtract, x,
                  reduce_back(b, x, dim, Binary::Maximum, lowest(b, x.type.dtype)));
}

LowerFn softmax(bool log) {
  return [log](Node& n) {
    hlo::Builder& b = n.b;
    const Value& self = n.in(0);
    DType acc = math_dtype(n.out().dtype);
    Value x = as_vector(b, b.convert(self, acc));
    int64_t dim = wrap_dim(n.i64(1), self.type.rank());
    Value z = shifted(b, x, dim);
    Value e = b.unary(Unary::Exponential, z);
    Value s = reduce_back(b, e, dim, Binary::Add, b.constant(0, acc));
    Value r = log ? b.binary(Binary::Subtract, z, b.unary(Unary::Log, s))
                  : b.binary(Binary::Divide, e, s);
    return V{b.reshape(r, n.out().shape)};
  };
}

// (grad_output, output, dim, input_dtype):
//   softmax:     y * (g - sum(g * y))
//   log_softmax: g - exp(y) * sum(g)
LowerFn softmax_backward(bool log) {
  return [log](Node& n) {
    hlo::Builder& b = n.b;
    DType acc = math_dtype(n.out().dtype);
    Value g = as_vector(b, b.convert(n.in(0), acc));
    Value y = as_vector(b, b.convert(n.in(1), acc));
    int64_t dim = wrap_dim(n.i64(2), n.in(0).type.rank());
    Value zero = b.constant(0, acc);
    Value r;
    if (log) {
      Value s = reduce_back(b, g, dim, Binary::Add, zero);
      r = b.binary(Binary::Subtract, g,
                   b.binary(Binary::Multiply, b.unary(Unary::Exponential, y), s));
    } else {
      Value s = reduce_back(b, b.binary(Binary::Multiply, g, y), dim, Binary::Add, zero);
      r = b.binary(Binary::Multiply, y, b.binary(Binary::Subtract, g, s));
    }
    return V{b.reshape(r, n.out().shape)};
  };
}

// _masked_softmax's mask (true: left out) as a bool of x's shape. A 2-d mask of a 4-d
// [B, H, L, S] input is, by mask_type, an attention mask [L, S] (0) or a key padding
// mask [B, S] (1); any other mask has x's shape (2). The meta kernel checked which.
Value mask_like(hlo::Builder& b, const Value& mask, const Value& x, std::optional<int64_t> type) {
  if (mask.type.rank() == 2 && x.type.rank() == 4 && type && *type != 2)
    return b.broadcast_in_dim(mask, x.type.shape, *type == 0 ? std::vector<int64_t>{2, 3}
                                                             : std::vector<int64_t>{0, 3});
  return mask;
}

// _masked_softmax(self, mask, dim=None, mask_type=None): softmax over dim (default the
// last) of self with masked entries at -inf; a row masked whole is NaN, as on CPU.
V masked_softmax(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out().dtype);
  Value x = b.convert(n.in(0), acc);
  int64_t rank = x.type.rank();
  int64_t dim = wrap_dim(n.opt_i64(2).value_or(rank - 1), rank);
  Value mask = mask_like(b, n.in(1), x, n.opt_i64(3));
  x = b.select(mask, b.broadcast_in_dim(lowest(b, acc), x.type.shape, {}), x);
  Value e = b.unary(Unary::Exponential, shifted(b, x, dim));
  Value s = reduce_back(b, e, dim, Binary::Add, b.constant(0, acc));
  return V{b.convert(b.binary(Binary::Divide, e, s), n.out().dtype)};
}

// _masked_softmax_backward(grad_output, output, mask, dim=None): softmax's gradient with
// masked entries 0 (the mask has the gradient's shape).
V masked_softmax_backward(Node& n) {
  hlo::Builder& b = n.b;
  DType acc = math_dtype(n.out().dtype);
  Value g = b.convert(n.in(0), acc);
  Value y = b.convert(n.in(1), acc);
  int64_t rank = g.type.rank();
  int64_t dim = wrap_dim(n.opt_i64(3).value_or(rank - 1), rank);
  Value zeros = b.broadcast_in_dim(b.constant(0, acc), g.type.shape, {});
  y = b.select(n.in(2), zeros, y);
  Value s = reduce_back(b, b.binary(Binary::Multiply, g, y), dim, Binary::Add, b.constant(0, acc));
  Value r = b.binary(Binary::Multiply, y, b.binary(Binary::Subtract, g, s));
  return V{b.convert(b.select(n.in(2), zeros, r), n.out().dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(masked_softmax, {"_masked_softmax"}, masked_softmax);
TORCH_TPU_LOWERING(masked_softmax_backward, {"_masked_softmax_backward"}, masked_softmax_backward);
TORCH_TPU_LOWERING(softmax, {"_softmax", "_softmax.out"}, softmax(false));
TORCH_TPU_LOWERING(log_softmax, {"_log_softmax", "_log_softmax.out"}, softmax(true));
TORCH_TPU_LOWERING(softmax_backward, {"_softmax_backward_data", "_softmax_backward_data.out"},
                   softmax_backward(false));
TORCH_TPU_LOWERING(log_softmax_backward,
                   {"_log_softmax_backward_data", "_log_softmax_backward_data.out"},
                   softmax_backward(true));

}  // namespace torch_tpu::ops
