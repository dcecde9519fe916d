// Sorting and order statistics. One stable stablehlo.sort of (values, positions) serves
// them all, with NaN ordered above every number as in PyTorch; stability gives the
// first occurrence among equal values.
#include <cmath>
#include <optional>

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
      Value nan_first = descending ? r.binary(Binary::And, ln, r.unary(Unary::Not, rn))
                                   : r.binary(Binary::And, r.unary(Unary::Not, ln), rn);
      ordered = r.binary(Binary::Or, ordered, nan_first);
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

// topk(self, k, dim, largest, sorted), always sorted, as XLA's TopK along the last dim
// (far cheaper than a full sort). Keys are made so that the largest key is the wanted
// element: NaN becomes +NaN, the top of TopK's total order, and the smallest-k keys are
// order-reversed (negation for floats keeps NaN at the wanted end; bitwise not for
// integers cannot overflow).
V lower_topk(Node& n) {
  hlo::Builder& b = n.b;
  Value x = at_least_1d(b, n.in(0));
  const int64_t rank = x.type.rank();
  int64_t dim = wrap_dim(n.i64(2), n.in(0).type.rank());
  int64_t k = n.i64(1);
  bool largest = n.flag(3);
  if (k == 0 || x.type.numel() == 0) {
    auto [v, i] = sort_along(b, x, dim, largest);
    return V{b.reshape(take(b, v, dim, 0, k), n.out(0).shape),
             b.reshape(take(b, i, dim, 0, k), n.out(1).shape)};
  }
  std::vector<int64_t> perm = other_dims(rank, dim);
  perm.push_back(dim);
  std::vector<int64_t> inverse(rank);
  for (int64_t d = 0; d < rank; ++d) inverse[perm[d]] = d;
  Value key = b.transpose(x, perm);
  const bool floating = hlo::is_float(key.type.dtype);
  if (floating) key = b.select(is_nan(b, key), b.full(NAN, key.type), key);
  auto reverse = [&](const Value& v) { return b.unary(floating ? Unary::Negate : Unary::Not, v); };
  if (!largest) key = reverse(key);
  std::vector<int64_t> shape = key.type.shape;
  shape.back() = k;
  V top = b.emit_multi("chlo.top_k", {key}, "k = " + std::to_string(k) + " : i64",
                       {TensorType{key.type.dtype, shape}, TensorType{DType::S32, shape}});
  Value values = largest ? top[0] : reverse(top[0]);
  Value indices = b.convert(top[1], DType::S64);
  return V{b.reshape(b.transpose(values, inverse), n.out(0).shape),
           b.reshape(b.transpose(indices, inverse), n.out(1).shape)};
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
                        Binary::Add);
  Value n = b.full(static_cast<double>(len), nans.type);
  Value one = b.full(1, nans.type), two = b.full(2, nans.type);
  Value numbers = b.binary(Binary::Subtract, n, nans);
  // A row of NaNs has its (NaN) median where a row of numbers would, as in PyTorch.
  Value counted = b.select(b.compare(Compare::EQ, numbers, b.full(0, nans.type)), n, numbers);
  Value pos =
      b.binary(Binary::Divide, b.binary(Binary::Subtract, skip_nan ? counted : n, one), two);
  if (!skip_nan) {
    Value any_nan = b.compare(Compare::GT, nans, b.full(0, nans.type));
    pos = b.select(any_nan, numbers, pos);
  }
  Value at =
      b.compare(Compare::EQ, b.iota(i.type, dim), b.broadcast_in_dim(pos, i.type.shape, rows));
  Value others = b.broadcast_in_dim(lowest(b, v.type.dtype), v.type.shape, {});
  Value value = reduce_extreme(b, b.select(at, v, others), {dim}, true);
  Value index = b.reduce(b.select(at, i, b.full(-1, i.type)), b.constant_int(-1, DType::S64), {dim},
                         Binary::Maximum);
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

// The insertion position of each value in a sorted sequence (the last dim of `seq`,
// shared when `seq` is 1-d, else matched row by row with `values`' leading dims), by
// PyTorch's own binary search, step for step (every value runs the same fixed number
// of halvings): NaNs and unsorted entries then land where CPU's search puts them. The
// first position whose entry is >= the value (> with `right`); `sorter`, if any, gives
// each row's order.
Value search(hlo::Builder& b, const Value& seq_in, const Value& values_in, bool right,
             DType compute, const TensorType& out, const Value* sorter) {
  Value seq = b.convert(seq_in, compute), values = b.convert(values_in, compute);
  const int64_t len = seq.type.shape.empty() ? 1 : seq.type.shape.back();
  const TensorType it{DType::S64, values.type.shape};
  if (values.type.numel() == 0 || len == 0) return b.full(0, out);
  auto k = [&](int64_t v) { return b.full(static_cast<double>(v), it); };
  // Each value's row offset into the flattened sequence.
  Value row = k(0);
  if (seq.type.rank() > 1) {
    const int64_t rows = seq.type.numel() / len, width = values.type.numel() / rows;
    row = b.reshape(b.iota({DType::S64, {rows, width}}, 0), values.type.shape);
    row = b.binary(Binary::Multiply, row, k(len));
  }
  Value flat = b.reshape(seq, {seq.type.numel()});
  Value order = sorter ? b.reshape(b.convert(*sorter, DType::S64), {seq.type.numel()}) : Value{};
  Value lo = k(0), hi = k(len);
  int steps = 1;
  while ((int64_t{1} << (steps - 1)) <= len) ++steps;
  for (int s = 0; s < steps; ++s) {
    Value active = b.compare(Compare::LT, lo, hi);
    Value mid =
        b.binary(Binary::Add, lo,
                 b.binary(Binary::ShiftRightLogical, b.binary(Binary::Subtract, hi, lo), k(1)));
    Value at = b.select(active, mid, k(0));
    if (sorter) at = b.gather_flat(order, b.binary(Binary::Add, row, at));
    Value entry = b.gather_flat(flat, b.binary(Binary::Add, row, at));
    Value past = b.compare(right ? Compare::GT : Compare::GE, entry, values);
    Value up = b.binary(Binary::And, active, b.unary(Unary::Not, past));
    Value down = b.binary(Binary::And, active, past);
    lo = b.select(up, b.binary(Binary::Add, mid, k(1)), lo);
    hi = b.select(down, mid, hi);
  }
  return b.reshape(b.convert(lo, out.dtype), out.shape);
}

// searchsorted(sorted_sequence, self, out_int32, right, side, sorter).
V lower_searchsorted(Node& n) {
  hlo::Builder& b = n.b;
  bool right = n.flag(3);
  if (!n.is_none(4)) right = n.str(4) == "right";
  std::optional<Value> sorter;
  if (n.has(5)) sorter = n.in(5);
  return {search(b, n.in(0), n.in(1), right, n.compute, n.out(), sorter ? &*sorter : nullptr)};
}

// bucketize(self, boundaries, out_int32, right): searchsorted with the arguments swapped.
V lower_bucketize(Node& n) {
  return {search(n.b, n.in(1), n.in(0), n.flag(3), n.compute, n.out(), nullptr)};
}

// mode(self, dim, keepdim): the most frequent value of each row (the smallest among
// equally frequent ones) and the last position holding it, as PyTorch's CPU kernel gives
// for rows it sorts stably. Counts come from comparing every pair of a row's elements.
V lower_mode(Node& n) {
  hlo::Builder& b = n.b;
  Value x = at_least_1d(b, n.in(0));
  const int64_t rank = x.type.rank();
  const int64_t dim = wrap_dim(n.i64(1), n.in(0).type.rank());
  if (x.type.numel() == 0) return {b.full(0, n.out(0)), b.full(0, n.out(1))};
  std::vector<int64_t> perm = other_dims(rank, dim);
  perm.push_back(dim);
  Value t = b.transpose(x, perm);  // [..., L]
  const int64_t len = t.type.shape.back();
  std::vector<int64_t> pair = t.type.shape;
  pair.push_back(len);  // [..., L (i), L (j)]
  std::vector<int64_t> lead;
  for (int64_t d = 0; d + 1 < rank; ++d) lead.push_back(d);
  std::vector<int64_t> di = lead, dj = lead;
  di.push_back(rank - 1);
  dj.push_back(rank);
  Value xi = b.broadcast_in_dim(t, pair, di), xj = b.broadcast_in_dim(t, pair, dj);
  Value same = b.compare(Compare::EQ, xi, xj);
  Value count =
      b.reduce(b.convert(same, DType::S64), b.constant_int(0, DType::S64), {rank}, Binary::Add);
  Value most = b.reduce(count, b.constant_int(0, DType::S64), {rank - 1}, Binary::Maximum);
  Value top = b.compare(Compare::EQ, count, b.broadcast_in_dim(most, count.type.shape, lead));
  Value value = reduce_extreme(
      b, b.select(top, t, b.broadcast_in_dim(highest(b, t.type.dtype), t.type.shape, {})),
      {rank - 1}, false);
  Value at = b.compare(Compare::EQ, t, b.broadcast_in_dim(value, t.type.shape, lead));
  TensorType it{DType::S64, t.type.shape};
  Value index = b.reduce(b.select(at, b.iota(it, rank - 1), b.full(-1, it)),
                         b.constant_int(-1, DType::S64), {rank - 1}, Binary::Maximum);
  return {b.reshape(value, n.out(0).shape), b.reshape(index, n.out(1).shape)};
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

TORCH_TPU_LOWERING(searchsorted,
                   {"searchsorted.Tensor", "searchsorted.Tensor_out", "searchsorted.Scalar",
                    "searchsorted.Scalar_out"},
                   lower_searchsorted);
TORCH_TPU_LOWERING(bucketize, {"bucketize.Tensor", "bucketize.Tensor_out", "bucketize.Scalar"},
                   lower_bucketize);
TORCH_TPU_LOWERING(mode, {"mode", "mode.values"}, lower_mode);

}  // namespace torch_tpu::ops
