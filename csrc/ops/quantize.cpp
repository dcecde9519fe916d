// Fake quantization (quantization-aware training): values rounded to an affine integer
// grid and back, with the mask of those that were in range (for the backward), computed
// as CPU's kernels do in f32: q = nearbyint(x * (1 / scale)) + zero_point.
#include "ops/common.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// (output, mask) of x on the grid of `scale` and `zero_point` (f32 values broadcast to x).
V fake_quantize(hlo::Builder& b, const Value& x_in, const Value& scale, const Value& zero_point,
                double quant_min, double quant_max, DType out) {
  Math m{b};
  Value x = b.convert(x_in, DType::F32);
  Value inv = m.div(m.k(1, scale), scale);
  Value q = m.add(b.unary(Unary::RoundNearestEven, m.mul(x, inv)), zero_point);
  Value lo = m.k(quant_min, q), hi = m.k(quant_max, q);
  Value mask = b.binary(Binary::And, b.compare(hlo::Compare::GE, q, lo),
                        b.compare(hlo::Compare::LE, q, hi));
  Value clamped = m.min(m.max(q, lo), hi);
  return {b.convert(m.mul(m.sub(clamped, zero_point), scale), out), mask};
}

// fake_quantize_per_tensor_affine_cachemask(self, scale, zero_point, quant_min, quant_max)
V per_tensor(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const hlo::TensorType f32{DType::F32, x.type.shape};
  return fake_quantize(b, x, b.full(n.f64(1), f32), b.full(static_cast<double>(n.i64(2)), f32),
                       static_cast<double>(n.i64(3)), static_cast<double>(n.i64(4)),
                       n.out(0).dtype);
}

// _fake_quantize_per_tensor_affine_cachemask_tensor_qparams(self, scale, zero_point,
// fake_quant_enabled, quant_min, quant_max): the same with 1-element tensors; where
// fake_quant_enabled[0] is 0 the values pass unchanged and the mask is all true.
V per_tensor_qparams(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const std::vector<int64_t>& shape = x.type.shape;
  auto element = [&](size_t i, DType dtype) {
    Value v = b.reshape(b.convert(n.in(i), dtype), {});
    return b.broadcast_in_dim(v, shape, {});
  };
  V r = fake_quantize(b, x, element(1, DType::F32), element(2, DType::F32),
                      static_cast<double>(n.i64(4)), static_cast<double>(n.i64(5)),
                      n.out(0).dtype);
  Value enabled = b.compare(hlo::Compare::NE, element(3, DType::F32),
                            b.full(0, {DType::F32, shape}));
  return {b.select(enabled, r[0], b.convert(x, n.out(0).dtype)),
          b.select(enabled, r[1], b.full(1, {DType::Pred, shape}))};
}

// fake_quantize_per_channel_affine_cachemask(self, scale [C], zero_point [C], axis,
// quant_min, quant_max)
V per_channel(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  int64_t axis = wrap_dim(n.i64(3), x.type.rank());
  auto along = [&](size_t i) {
    return b.broadcast_in_dim(b.convert(n.in(i), DType::F32), x.type.shape, {axis});
  };
  return fake_quantize(b, x, along(1), along(2), static_cast<double>(n.i64(4)),
                       static_cast<double>(n.i64(5)), n.out(0).dtype);
}

}  // namespace

TORCH_TPU_LOWERING(fake_quantize_per_tensor, {"fake_quantize_per_tensor_affine_cachemask"},
                   per_tensor);
TORCH_TPU_LOWERING(fake_quantize_per_tensor_qparams,
                   {"_fake_quantize_per_tensor_affine_cachemask_tensor_qparams"},
                   per_tensor_qparams);
TORCH_TPU_LOWERING(fake_quantize_per_channel, {"fake_quantize_per_channel_affine_cachemask"},
                   per_channel);

}  // namespace torch_tpu::ops
