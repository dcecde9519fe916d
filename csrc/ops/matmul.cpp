// Matrix products as dot_general, accumulating bf16/f16 in f32. linear, matmul and einsum
// decompose into these before they reach the backend. mm and bmm are bucket-safe
// (ops/bounded.cpp): a product of inputs stored padded runs at their bound.
#include "ops/matmul.h"

#include <stdexcept>

#include "ops/common.h"
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

// beta * self + alpha * product. beta == 0 ignores self, so NaN and inf in it do not
// propagate (as on CPU).
Value scaled_sum(hlo::Builder& b, const Value& self, const Value& product, const Value& beta_in,
                 const Value& alpha_in) {
  const hlo::TensorType& t = product.type;
  Value beta = cast_to(b, beta_in, t.dtype, t.shape);
  Value alpha = cast_to(b, alpha_in, t.dtype, t.shape);
  Value zero = b.full(0, t);
  Value base = b.select(b.compare(hlo::Compare::EQ, beta, zero), zero,
                        b.binary(Binary::Multiply, beta, cast_to(b, self, t.dtype, t.shape)));
  return b.binary(Binary::Add, base, b.binary(Binary::Multiply, alpha, product));
}

// scaled_sum for the (self, a, b, *, beta, alpha) schemas.
Value add_scaled(Node& n, const Value& product) {
  return scaled_sum(n.b, n.in(0), product, n.in(3), n.in(4));
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

// Which of `groups` groups each of `n` positions along a grouped dimension falls in, as
// a [groups, n] mask: offs holds each group's end (cumulative), the first starts at 0.
// Positions past the last end belong to no group.
Value group_mask(hlo::Builder& b, const Value& offs, int64_t n) {
  int64_t groups = offs.type.shape.at(0);
  hlo::TensorType grid{hlo::DType::S64, {groups, n}};
  Value end = b.broadcast_in_dim(b.convert(offs, hlo::DType::S64), grid.shape, {0});
  Value start = b.reshape(b.constant_int(0, hlo::DType::S64), {1});
  if (groups > 1)
    start = b.concatenate(
        {start, b.slice(b.convert(offs, hlo::DType::S64), {0}, {groups - 1}, {1})}, 0);
  Value pos = b.iota(grid, 1);
  return b.binary(Binary::And,
                  b.compare(hlo::Compare::GE, pos, b.broadcast_in_dim(start, grid.shape, {0})),
                  b.compare(hlo::Compare::LT, pos, end));
}

// _grouped_mm(a, b, offs, bias, out_dtype): matrix products over groups of rows or of the
// contracted dimension (Hugging Face's MoE experts). Each group is a masked product over
// all of them: exact, and fine for the small group counts of MoE layers.
//   a [m, k] x b [k, n], groups along k -> [groups, m, n]
//   a [m, k] x b [groups, k, n], groups of a's rows -> [m, n]
//   a [groups, m, k] x b [k, n], groups of b's columns -> [m, n]
//   a [g, m, k] x b [g, k, n] -> bmm
V lower_grouped_mm(Node& n) {
  hlo::Builder& b = n.b;
  if (n.has(3)) throw std::invalid_argument("_grouped_mm: bias is not supported");
  const hlo::TensorType& out = n.out();
  hlo::DType acc = math_dtype(out.dtype);
  Value x = b.convert(n.in(0), acc), y = b.convert(n.in(1), acc);
  size_t xd = x.type.shape.size(), yd = y.type.shape.size();
  if (xd == 3 && yd == 3)
    return {b.convert(b.dot_general(x, y, {0}, {0}, {2}, {1}, acc), out.dtype)};
  Value offs = n.in(2);
  auto masked = [&](const Value& mask, const std::vector<int64_t>& shape,
                    const std::vector<int64_t>& dims) {
    return b.convert(b.broadcast_in_dim(mask, shape, dims), acc);
  };
  if (xd == 2 && yd == 2) {
    int64_t m = x.type.shape[0], k = x.type.shape[1], groups = offs.type.shape[0];
    Value xs = b.binary(Binary::Multiply, b.broadcast_in_dim(x, {groups, m, k}, {1, 2}),
                        masked(group_mask(b, offs, k), {groups, m, k}, {0, 2}));
    return {b.convert(b.dot_general(xs, y, {}, {}, {2}, {0}, acc), out.dtype)};
  }
  // One product per group ([groups, m, n]), kept where the row or column is in the group.
  Value all = xd == 2 ? b.dot_general(x, y, {}, {}, {1}, {1}, acc)   // [m, groups, n]
                      : b.dot_general(x, y, {}, {}, {2}, {0}, acc);  // [groups, m, n]
  if (xd == 2) all = b.transpose(all, {1, 0, 2});
  const std::vector<int64_t>& s = all.type.shape;
  Value keep = xd == 2 ? masked(group_mask(b, offs, s[1]), s, {0, 1})
                       : masked(group_mask(b, offs, s[2]), s, {0, 2});
  Value sum =
      b.reduce(b.binary(Binary::Multiply, all, keep), b.constant(0, acc), {0}, hlo::Binary::Add);
  return {b.convert(sum, out.dtype)};
}

}  // namespace

hlo::Value lower_mm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return contract(b, x, y, {}, {1}, {0}, x.type.dtype);
}

hlo::Value lower_bmm(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y) {
  return contract(b, x, y, {0}, {2}, {1}, x.type.dtype);
}

hlo::Value lower_addmm(hlo::Builder& b, const hlo::Value& bias, const hlo::Value& x,
                       const hlo::Value& y, const hlo::Value& beta, const hlo::Value& alpha) {
  return scaled_sum(b, bias, lower_mm(b, x, y), beta, alpha);
}

TORCH_TPU_LOWERING(mm, {"mm", "mm.out"}, [](Node& n) {
  return std::vector<hlo::Value>{lower_mm(n.b, n.in(0), n.in(1))};
});
TORCH_TPU_LOWERING(bmm, {"bmm", "bmm.out"}, [](Node& n) {
  return std::vector<hlo::Value>{lower_bmm(n.b, n.in(0), n.in(1))};
});
TORCH_TPU_LOWERING(addmm, {"addmm", "addmm_", "addmm.out"}, [](Node& n) {
  return std::vector<hlo::Value>{lower_addmm(n.b, n.in(0), n.in(1), n.in(2), n.in(3), n.in(4))};
});
// _addmm_activation(self, mat1, mat2, beta, alpha, use_gelu): addmm, rounded to its dtype,
// then relu or (exact, erf) gelu, as CPU's kernel applies them in place on its result.
// nn.TransformerEncoderLayer's fast path calls it for its feed-forward layer.
TORCH_TPU_LOWERING(addmm_activation, {"_addmm_activation", "_addmm_activation.out"}, [](Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType dtype = n.out().dtype;
  hlo::Value y = b.convert(lower_addmm(b, n.in(0), n.in(1), n.in(2), n.in(3), n.in(4)), dtype);
  Math m{b};
  hlo::Value x = b.convert(y, math_dtype(dtype));
  hlo::Value act =
      n.flag(5) ? m.mul(m.mul(m.k(0.5, x), x),
                        m.add(m.k(1, x), m.erf(m.mul(x, m.k(0.70710678118654752440, x)))))
                : m.max(x, m.k(0, x));
  return std::vector<hlo::Value>{b.convert(act, dtype)};
});
// _int_mm(self int8 [m, k], mat2 int8 [k, n]) -> int32: exact, accumulated in int32
// (torchao's dynamic int8 quantization calls it).
TORCH_TPU_LOWERING(int_mm, {"_int_mm", "_int_mm.out"}, [](Node& n) {
  return V{contract(n.b, n.in(0), n.in(1), {}, {1}, {0}, hlo::DType::S32)};
});
// _weight_int8pack_mm(self [m, k], mat2 int8 [n, k], scales [n]): self @ mat2^T scaled per
// output channel (int8 weight-only quantization), accumulated in f32 for bf16/f16.
TORCH_TPU_LOWERING(weight_int8pack_mm, {"_weight_int8pack_mm"}, [](Node& n) {
  hlo::Builder& b = n.b;
  hlo::DType dtype = n.out().dtype, acc = math_dtype(dtype);
  Value product = b.dot_general(b.convert(n.in(0), acc), b.convert(n.in(1), acc), {}, {}, {1},
                                {1}, acc);
  Value scales = b.broadcast_in_dim(b.convert(n.in(2), acc), product.type.shape, {1});
  return V{b.convert(b.binary(Binary::Multiply, product, scales), dtype)};
});
// _scaled_mm(self f8 [m, k], mat2 f8 [k, n], scale_a, scale_b, bias, scale_result,
// out_dtype, use_fast_accum): (self @ mat2) * scale_a * scale_b (+ bias), accumulated in
// f32 (float8 values are exact in it); scales per tensor ([] or [1]) or per row of self
// ([m, 1]) and per column of mat2 ([1, n]). torchao's float8 training calls it.
TORCH_TPU_LOWERING(scaled_mm, {"_scaled_mm", "_scaled_mm.out"}, [](Node& n) {
  hlo::Builder& b = n.b;
  const hlo::DType f32 = hlo::DType::F32;
  if (n.has(5)) throw NotImplemented("_scaled_mm: scale_result (a float8 result's scale) is not supported on tpu");
  Value product = b.dot_general(b.convert(n.in(0), f32), b.convert(n.in(1), f32), {}, {}, {1},
                                {0}, f32);
  const std::vector<int64_t>& shape = product.type.shape;
  product = b.binary(Binary::Multiply, product, cast_to(b, n.in(2), f32, shape));
  product = b.binary(Binary::Multiply, product, cast_to(b, n.in(3), f32, shape));
  if (n.has(4)) product = b.binary(Binary::Add, product, cast_to(b, n.in(4), f32, shape));
  return V{b.convert(product, n.out().dtype)};
});
// _compute_linear_combination(input [n, ...], coefficients [m, n]) -> [m, ...]: row i is
// sum_j coefficients[i, j] * input[j] (torch.linalg.matrix_exp's Taylor terms). The out=
// form, which adds to what `out` holds, is aten/composite_kernels.cpp's.
V lower_linear_combination(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const int64_t rows = std::max<int64_t>(x.type.shape[0], 1);
  Value flat = b.reshape(x, {x.type.shape[0], x.type.numel() / rows});
  Value sum = b.reshape(contract(b, n.in(1), flat, {}, {1}, {0}, n.out().dtype), n.out().shape);
  return {sum};
}
TORCH_TPU_LOWERING(linear_combination, {"_compute_linear_combination"},
                   lower_linear_combination);
TORCH_TPU_LOWERING(baddbmm, {"baddbmm", "baddbmm_", "baddbmm.out"}, lower_baddbmm);
TORCH_TPU_LOWERING(addbmm, {"addbmm", "addbmm_", "addbmm.out"}, lower_addbmm);
TORCH_TPU_LOWERING(addmv, {"addmv", "addmv_", "addmv.out"}, lower_addmv);
TORCH_TPU_LOWERING(mv, {"mv", "mv.out"}, lower_mv);
TORCH_TPU_LOWERING(grouped_mm, {"_grouped_mm"}, lower_grouped_mm);
// vdot conjugates its first argument: the same as dot for the real dtypes a tpu holds.
TORCH_TPU_LOWERING(dot, {"dot", "dot.out", "vdot", "vdot.out"}, lower_dot);

}  // namespace torch_tpu::ops
