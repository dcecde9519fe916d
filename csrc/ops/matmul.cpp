// Matrix products as dot_general, accumulating bf16/f16 in f32. mm, bmm and addmm have
// hand-written kernels (aten/matmul_kernels.cpp); the rest of the family is in the
// lowering table. linear, matmul and einsum decompose into these before they reach
// the backend.
#include "ops/matmul.h"

#include "ops/elementwise.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;

// dot_general in `dtype`, accumulating bf16/f16 in f32.
Value contract(hlo::Builder& b, const Value& x, const Value& y, const std::vector<int64_t>& batch,
               const std::vector<int64_t>& lhs_contract, const std::vector<int64_t>& rhs_contract,
               hlo::DType dtype) {
  Value l = b.convert(x, dtype), r = b.convert(y, dtype);
  return b.convert(b.dot_general(l, r, batch, batch, lhs_contract, rhs_contract, math_dtype(dtype)),
                   dtype);
}

// beta * self + alpha * product for the (self, a, b, *, beta, alpha) schemas. beta == 0
// ignores self, so NaN and inf in it do not propagate (as on CPU).
Value add_scaled(Node& n, const Value& product) {
  hlo::Builder& b = n.b;
  const hlo::TensorType& t = product.type;
  Value beta = cast_to(b, n.in(3), t.dtype, t.shape);
  Value alpha = cast_to(b, n.in(4), t.dtype, t.shape);
  Value self = cast_to(b, n.in(0), t.dtype, t.shape);
  Value zero = b.full(0, t);
  Value base = b.select(b.compare(hlo::Compare::EQ, beta, zero), zero,
                        b.binary("multiply", beta, self));
  return b.binary("add", base, b.binary("multiply", alpha, product));
}

V lower_baddbmm(Node& n) {
  return {add_scaled(n, contract(n.b, n.in(1), n.in(2), {0}, {2}, {1}, n.out().dtype))};
}
V lower_addbmm(Node& n) {
  return {add_scaled(n, contract(n.b, n.in(1), n.in(2), {}, {0, 2}, {0, 1}, n.out().dtype))};
}
V lower_addmv(Node& n) {
  return {add_scaled(n, contract(n.b, n.in(1), n.in(2), {}, {1}, {0}, n.out().dtype))};
}
V lower_mv(Node& n) { return {contract(n.b, n.in(0), n.in(1), {}, {1}, {0}, n.out().dtype)}; }
V lower_dot(Node& n) { return {contract(n.b, n.in(0), n.in(1), {}, {0}, {0}, n.out().dtype)}; }

}  // namespace

hlo::Value lower_mm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return contract(b, x, y, {}, {1}, {0}, x.type.dtype);
}

hlo::Value lower_bmm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return contract(b, x, y, {0}, {2}, {1}, x.type.dtype);
}

hlo::Value lower_addmm(hlo::Builder& b, const hlo::Value& bias, const hlo::Value& x,
                       const hlo::Value& y, const hlo::Value& beta, const hlo::Value& alpha) {
  hlo::Value product = lower_mm(b, x, y);
  hlo::DType dtype = product.type.dtype;
  hlo::Value scaled = b.binary("multiply", product,
                               broadcast_to(b, b.convert(alpha, dtype), product.type.shape));
  hlo::Value base = broadcast_to(b, b.convert(bias, dtype), product.type.shape);
  base = b.binary("multiply", base, broadcast_to(b, b.convert(beta, dtype), product.type.shape));
  return b.binary("add", base, scaled);
}

TORCH_TPU_LOWERING(baddbmm, {"baddbmm", "baddbmm_", "baddbmm.out"}, lower_baddbmm);
TORCH_TPU_LOWERING(addbmm, {"addbmm", "addbmm_", "addbmm.out"}, lower_addbmm);
TORCH_TPU_LOWERING(addmv, {"addmv", "addmv_", "addmv.out"}, lower_addmv);
TORCH_TPU_LOWERING(mv, {"mv", "mv.out"}, lower_mv);
// vdot conjugates its first argument: the same as dot for the real dtypes a tpu holds.
TORCH_TPU_LOWERING(dot, {"dot", "dot.out", "vdot", "vdot.out"}, lower_dot);

// Compiled graphs: eager mode runs these through csrc/aten/matmul_kernels.cpp.
TORCH_TPU_GRAPH_LOWERING(mm, {"mm"}, [](Node& n) {
  return std::vector<hlo::Value>{n.b.convert(lower_mm(n.b, n.in(0), n.in(1)), n.out().dtype)};
});
TORCH_TPU_GRAPH_LOWERING(bmm, {"bmm"}, [](Node& n) {
  return std::vector<hlo::Value>{n.b.convert(lower_bmm(n.b, n.in(0), n.in(1)), n.out().dtype)};
});
TORCH_TPU_GRAPH_LOWERING(addmm, {"addmm"}, [](Node& n) {
  // beta == 0 ignores the bias entirely (NaN in it must not propagate).
  if (n.f64(3) == 0.0) {
    const hlo::Value& x = n.in(1);
    hlo::Value zero = n.b.full(0, {x.type.dtype, n.out().shape});
    return std::vector<hlo::Value>{n.b.convert(
        lower_addmm(n.b, zero, x, n.in(2), n.b.constant(0, x.type.dtype), n.in(4)), n.out().dtype)};
  }
  return std::vector<hlo::Value>{n.b.convert(
      lower_addmm(n.b, n.in(0), n.in(1), n.in(2), n.in(3), n.in(4)), n.out().dtype)};
});

}  // namespace torch_tpu::ops
