// softmax and log_softmax along one dim, forward and backward, computed in f32 for
// bf16/f16 (the meta kernel says whether half_to_float keeps the f32 result).
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

}  // namespace

TORCH_TPU_LOWERING(softmax, {"_softmax", "_softmax.out"}, softmax(false));
TORCH_TPU_LOWERING(log_softmax, {"_log_softmax", "_log_softmax.out"}, softmax(true));
TORCH_TPU_LOWERING(softmax_backward, {"_softmax_backward_data", "_softmax_backward_data.out"},
                   softmax_backward(false));
TORCH_TPU_LOWERING(log_softmax_backward,
                   {"_log_softmax_backward_data", "_log_softmax_backward_data.out"},
                   softmax_backward(true));

}  // namespace torch_tpu::ops
