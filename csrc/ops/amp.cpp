// The two kernels behind torch.amp.GradScaler, with CUDA's semantics.
#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// _amp_foreach_non_finite_check_and_unscale_(self[], found_inf, inv_scale): every tensor
// times inv_scale; found_inf becomes 1 if any element of any tensor is inf or NaN.
V lower_unscale(Node& n) {
  hlo::Builder& b = n.b;
  const auto& grads = n.list(0);
  const Value& inv_scale = n.in(2);
  V results;
  Value bad = b.constant(0, DType::Pred);
  for (const auto& g : grads) {
    const DType m = math_dtype(g->type.dtype);
    Value x = b.convert(*g, m);
    Value finite = b.emit("stablehlo.is_finite", {x}, "", {DType::Pred, x.type.shape});
    Value all = b.reduce(b.reshape(finite, {finite.type.numel()}), b.constant(1, DType::Pred), {0},
                         hlo::Binary::And);
    bad = b.binary(Binary::Or, bad, b.unary(Unary::Not, all));
    Value inv = b.broadcast_in_dim(b.convert(inv_scale, m), x.type.shape, {});
    results.push_back(b.binary(Binary::Multiply, x, inv));
  }
  const Value& found = n.in(1);
  results.push_back(
      b.select(b.broadcast_in_dim(bad, found.type.shape, {}), b.full(1, found.type), found));
  return results;
}

// _amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
// growth_interval): back off after an overflow; grow after growth_interval clean steps
// unless the grown scale would overflow.
V lower_update_scale(Node& n) {
  hlo::Builder& b = n.b;
  const Value& scale = n.in(0);
  const Value& tracker = n.in(1);
  const hlo::TensorType& st = scale.type;
  const hlo::TensorType& tt = tracker.type;
  Value found = b.compare(Compare::NE, b.convert(n.in(2), DType::F32),
                          b.full(0, {DType::F32, n.in(2).type.shape}));
  found = b.reshape(found, st.shape);
  // In f64, as CUDA multiplies the f32 scale by the double factors before rounding.
  Value wide = b.convert(scale, DType::F64);
  Value grown = b.convert(b.binary(Binary::Multiply, wide, b.full(n.f64(3), wide.type)), st.dtype);
  Value backed = b.convert(b.binary(Binary::Multiply, wide, b.full(n.f64(4), wide.type)), st.dtype);
  Value successful = b.binary(Binary::Add, tracker, b.full(1, tt));
  Value grow = b.compare(Compare::EQ, successful, b.full(static_cast<double>(n.i64(5)), tt));
  Value grown_finite = b.emit("stablehlo.is_finite", {grown}, "", {DType::Pred, st.shape});
  Value kept =
      b.select(b.binary(Binary::And, b.reshape(grow, st.shape), grown_finite), grown, scale);
  Value new_scale = b.select(found, backed, kept);
  Value zero = b.full(0, tt);
  Value new_tracker = b.select(b.reshape(found, tt.shape), zero, b.select(grow, zero, successful));
  return {new_scale, new_tracker};
}

}  // namespace

TORCH_TPU_LOWERING(amp_unscale, {"_amp_foreach_non_finite_check_and_unscale_"}, lower_unscale);
TORCH_TPU_LOWERING(amp_update_scale, {"_amp_update_scale_"}, lower_update_scale);

}  // namespace torch_tpu::ops
