// Sorting and order statistics. One stable stablehlo.sort of (values, positions) serves
// them all, with NaN ordered above every number as in PyTorch; stability gives the
// first occurrence among equal values.
#include <cmath>

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

// (sorted values, their original positions along dim) of a tensor of rank >= 1.
std::pair<Value, Value> sort_along(hlo::Builder& b, const Value& x, int64_t dim, bool descending) {
  const DType t = x.type.dtype;
  Value idx = b.iota(TensorType{DType::S64, x.type.shape}, dim);
  TensorType sv{t, {}}, si{DType::S64, {}};
  std::string before = b.region({sv, sv, si, si}, [&](hlo::Builder& r, const V& a) {
    const Value &lhs = a[0], &rhs = a[1];
    Value ordered = r.compare(descending ? Compare::GT : Compare::LT, lhs, rhs);
    if (hlo::is_float(t)) {
      Value ln = is_nan(r, lhs), rn = is_nan(r, rhs);
      // NaN is the largest value: first when descending, last when ascending.
      Value nan_first = descending ? r.binary("and", ln, r.emit("stablehlo.not", {rn}, "", rn.type))
                                   : r.binary("and", r.emit("stablehlo.not", {ln}, "", ln.type), rn);
      ordered = r.binary("or", ordered, nan_first);
    }
    return V{ordered};
  });
  V out = b.emit_multi("stablehlo.sort", {x, idx},
                       "dimension = " + std::to_string(dim) + " : i64, is_stable = true",
                       {x.type, idx.type}, {before});
  return {out[0], out[1]};
}

Value at_least_1d(hlo::Builder& b, const Value& x) {
  return x.type.rank() == 0 ? b.reshape(x, {1}) : x;
}

// sort(self, dim, descending) and sort.stable(self, *, stable, dim, descending): the
// sort is always stable, which the unstable form allows.
LowerFn sort(size_t dim_arg) {
  return [dim_arg](Node& n) {
    Value x = at_least_1d(n.b, n.in(0));
    int64_t dim = wrap_dim(n.i64(dim_arg), n.in(0).type.rank());
    auto [v, i] = sort_along(n.b, x, dim, n.flag(dim_arg + 1));
    return V{n.b.reshape(v, n.out(0).shape), n.b.reshape(i, n.out(1).shape)};
  };
}

// The first `count` entries along dim from `start`.
Value take(hlo::Builder& b, const Value& x, int64_t dim, int64_t start, int64_t count) {
  std::vector<int64_t> lo(x.type.rank(), 0), hi = x.type.shape, step(x.type.rank(), 1);
  lo[dim] = start;
  hi[dim] = start + count;
  return b.slice(x, lo, hi, step);
}

// topk(self, k, dim, largest, sorted): always sorted.
V lower_topk(Node& n) {
  Value x = at_least_1d(n.b, n.in(0));
  int64_t dim = wrap_dim(n.i64(2), n.in(0).type.rank());
  int64_t k = n.i64(1);
  auto [v, i] = sort_along(n.b, x, dim, n.flag(3));
  return V{n.b.reshape(take(n.b, v, dim, 0, k), n.out(0).shape),
           n.b.reshape(take(n.b, i, dim, 0, k), n.out(1).shape)};
}

// kthvalue(self, k, dim, keepdim): the k-th smallest.
V lower_kthvalue(Node& n) {
  Value x = at_least_1d(n.b, n.in(0));
  int64_t dim = wrap_dim(n.i64(2), n.in(0).type.rank());
  int64_t k = n.i64(1);
  auto [v, i] = sort_along(n.b, x, dim, false);
  return V{n.b.reshape(take(n.b, v, dim, k - 1, 1), n.out(0).shape),
           n.b.reshape(take(n.b, i, dim, k - 1, 1), n.out(1).shape)};
}

// The lower median along dim of sorted (NaN-last) values: with `skip_nan`, of the
// numbers only (nanmedian); otherwise any NaN makes it the first NaN. The position
// differs per row, so it is picked with a mask rather than a slice.
std::pair<Value, Value> median_along(hlo::Builder& b, const Value& x, int64_t dim, bool skip_nan) {
  auto [v, i] = sort_along(b, x, dim, false);
  const int64_t len = x.type.shape[dim];
  std::vector<int64_t> rows = other_dims(x.type.rank(), dim);
  Value nans = b.reduce(b.convert(is_nan(b, x), DType::S64), b.constant_int(0, DType::S64), {dim},
                        Reducer::Add);
  Value n = b.full(static_cast<double>(len), nans.type);
  Value one = b.full(1, nans.type), two = b.full(2, nans.type);
  Value numbers = b.binary("subtract", n, nans);
  // A row of NaNs has its (NaN) median where a row of numbers would, as in PyTorch.
  Value counted = b.select(b.compare(Compare::EQ, numbers, b.full(0, nans.type)), n, numbers);
  Value pos = b.binary("divide", b.binary("subtract", skip_nan ? counted : n, one), two);
  if (!skip_nan) {
    Value any_nan = b.compare(Compare::GT, nans, b.full(0, nans.type));
    pos = b.select(any_nan, numbers, pos);
  }
  Value at = b.compare(Compare::EQ, b.iota(i.type, dim), b.broadcast_in_dim(pos, i.type.shape, rows));
  Value others = b.broadcast_in_dim(lowest(b, v.type.dtype), v.type.shape, {});
  Value value = reduce_extreme(b, b.select(at, v, others), {dim}, true);
  Value index = b.reduce(b.select(at, i, b.full(-1, i.type)), b.constant_int(-1, DType::S64), {dim},
                         Reducer::Max);
  return {value, index};
}

LowerFn median_dim(bool skip_nan) {
  return [skip_nan](Node& n) {
    Value x = at_least_1d(n.b, n.in(0));
    auto [v, i] = median_along(n.b, x, wrap_dim(n.i64(1), n.in(0).type.rank()), skip_nan);
    return V{n.b.reshape(v, n.out(0).shape), n.b.reshape(i, n.out(1).shape)};
  };
}

// median() / nanmedian() of every element; NaN for an empty tensor.
LowerFn median_all(bool skip_nan) {
  return [skip_nan](Node& n) {
    const Value& x = n.in(0);
    if (x.type.numel() == 0) return V{n.b.full(NAN, n.out())};
    return V{median_along(n.b, n.b.reshape(x, {x.type.numel()}), 0, skip_nan).first};
  };
}

}  // namespace

TORCH_TPU_LOWERING(sort, {"sort", "sort.values"}, sort(1));
TORCH_TPU_LOWERING(sort_stable, {"sort.stable", "sort.values_stable"}, sort(2));
TORCH_TPU_LOWERING(topk, {"topk", "topk.values"}, lower_topk);
TORCH_TPU_LOWERING(kthvalue, {"kthvalue", "kthvalue.values"}, lower_kthvalue);
TORCH_TPU_LOWERING(median, {"median", "median.out"}, median_all(false));
TORCH_TPU_LOWERING(median_dim, {"median.dim", "median.dim_values"}, median_dim(false));
TORCH_TPU_LOWERING(nanmedian, {"nanmedian", "nanmedian.out"}, median_all(true));
TORCH_TPU_LOWERING(nanmedian_dim, {"nanmedian.dim", "nanmedian.dim_values"}, median_dim(true));

}  // namespace torch_tpu::ops
