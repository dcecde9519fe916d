// _segment_reduce: sum, mean, max, min or prod of consecutive segments along the last
// dim of `lengths` (or `offsets`), as CPU computes them: an empty segment gives `initial`
// when given, else the reduction's identity (mean: NaN); max and min let NaN win; mean
// divides a non-NaN sum by the length. One program: a [segments, positions] membership
// mask selects each segment's elements, reduced in the data's dtype (as CPU accumulates).
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using Ints = std::vector<int64_t>;

// Inclusive prefix sum along the last dim of a small s64 value: [.., S] -> [.., S].
Value prefix_sum(hlo::Builder& b, const Value& x) {
  Math m{b};
  const int64_t rank = x.type.rank(), s = x.type.shape.back();
  Ints shape = x.type.shape;
  shape.push_back(s);  // [.., S (output), S (summed)]
  Ints dims;
  for (int64_t d = 0; d + 1 < rank; ++d) dims.push_back(d);
  dims.push_back(rank);  // x's last dim is the summed one
  Value spread = b.broadcast_in_dim(x, shape, dims);
  TensorType it{DType::S64, shape};
  Value keep = m.le(b.iota(it, rank), b.iota(it, rank - 1));
  Value picked = m.sel(keep, spread, b.full(0, spread.type));
  return b.reduce(picked, b.constant_int(0, DType::S64), {rank}, hlo::Binary::Add);
}

Value last_slice(hlo::Builder& b, const Value& x, int64_t begin, int64_t end) {
  Ints start(x.type.rank(), 0), limit = x.type.shape, strides(x.type.rank(), 1);
  start.back() = begin;
  limit.back() = end;
  return b.slice(x, start, limit, strides);
}

// Segments along the last dim of the bounds: [outer.., S, L, inner..] for data of shape
// [outer.., L, inner..], and which of those elements each segment holds.
struct Segments {
  int64_t axis, count;
  Ints shape, data_dims;
  Value starts, ends, member;  // member: [outer.., S, L, inner..]
};

Segments segments_of(Node& n, const Value& data, size_t lengths, size_t offsets) {
  hlo::Builder& b = n.b;
  Math m{b};
  const bool by_lengths = n.has(lengths);
  if (!by_lengths && !n.has(offsets))
    throw std::invalid_argument("_segment_reduce: either lengths or offsets must be given");
  Segments seg;
  Value bounds = b.convert(n.in(by_lengths ? lengths : offsets), DType::S64);
  seg.axis = bounds.type.rank() - 1;
  const int64_t axis = seg.axis;
  if (by_lengths) {
    seg.ends = prefix_sum(b, bounds);
    seg.starts = m.sub(seg.ends, bounds);
  } else {
    const int64_t k = bounds.type.shape.back();
    seg.starts = last_slice(b, bounds, 0, k - 1);
    seg.ends = last_slice(b, bounds, 1, k);
  }
  seg.count = seg.starts.type.shape.back();
  seg.shape = Ints(data.type.shape.begin(), data.type.shape.begin() + axis);
  seg.shape.push_back(seg.count);
  seg.shape.insert(seg.shape.end(), data.type.shape.begin() + axis, data.type.shape.end());
  Ints bound_dims;
  for (int64_t d = 0; d < data.type.rank(); ++d) seg.data_dims.push_back(d < axis ? d : d + 1);
  for (int64_t d = 0; d <= axis; ++d) bound_dims.push_back(d);
  Ints mask_shape(seg.shape.begin(), seg.shape.begin() + axis + 2);  // [outer.., S, L]
  TensorType it{DType::S64, mask_shape};
  Value j = b.iota(it, axis + 1);
  Value member = m.and_(m.le(b.broadcast_in_dim(seg.starts, mask_shape, bound_dims), j),
                        m.lt(j, b.broadcast_in_dim(seg.ends, mask_shape, bound_dims)));
  Ints mask_dims;
  for (int64_t d = 0; d < axis + 2; ++d) mask_dims.push_back(d);
  seg.member = b.broadcast_in_dim(member, seg.shape, mask_dims);
  return seg;
}

std::vector<Value> lower_segment_reduce(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const Value& data = n.in(0);
  const std::string& reduce = n.str(1);
  const TensorType& out = n.out();
  const DType t = out.dtype;
  Segments seg = segments_of(n, data, 2, 4);
  const int64_t axis = seg.axis;
  if (out.numel() == 0) return {b.full(0, out)};
  const Ints& shape = seg.shape;
  const Value& member = seg.member;
  const Value &starts = seg.starts, &ends = seg.ends;
  Value x = b.broadcast_in_dim(b.convert(data, t), shape, seg.data_dims);

  const bool has_initial = n.has(7);
  Value initial = has_initial ? b.convert(n.in(7), t) : Value{};
  TensorType result_type{t, out.shape};
  auto init_full = [&] { return b.broadcast_in_dim(initial, out.shape, {}); };
  Value result;
  if (reduce == "max" || reduce == "min") {
    const bool max = reduce == "max";
    Value fill = max ? lowest(b, t) : highest(b, t);
    Value picked = m.sel(member, x, b.broadcast_in_dim(fill, shape, {}));
    result = reduce_extreme(b, picked, {axis + 1}, max);
    if (has_initial)
      result = max ? nan_max(b, init_full(), result) : nan_min(b, init_full(), result);
  } else if (reduce == "sum" || reduce == "mean" || reduce == "prod") {
    const bool prod = reduce == "prod";
    Value picked = m.sel(member, x, b.full(prod ? 1 : 0, x.type));
    result = b.reduce(picked, b.constant(prod ? 1 : 0, t), {axis + 1},
                      prod ? hlo::Binary::Multiply : hlo::Binary::Add);
    if (has_initial) result = prod ? m.mul(init_full(), result) : m.add(init_full(), result);
    if (reduce == "mean") {
      Ints len_dims;
      for (int64_t d = 0; d <= axis; ++d) len_dims.push_back(d);
      Value len = b.broadcast_in_dim(m.sub(ends, starts), out.shape, len_dims);
      TensorType lt{DType::S64, out.shape};
      Value empty = m.le(len, b.full(0, lt));
      Value divided = m.div(result, b.convert(len, t));
      Value keep = m.or_(empty, m.is_nan(result));
      result = m.sel(keep, result, divided);
      if (!has_initial) result = m.sel(empty, b.full(NAN, result_type), result);
    }
  } else {
    throw std::invalid_argument("_segment_reduce: unsupported reduction " + reduce);
  }
  return {result};
}

// _segment_reduce_backward(grad, output, data, reduce, lengths, offsets, axis, initial):
// each element's share of its segment's grad, as CPU's kernel gives it: sum all of it,
// mean over the length, max/min split among the elements equal to the result, prod
// grad * result / element (with zeros: only a segment's single zero gets grad times the
// product of the others).
std::vector<Value> lower_segment_reduce_backward(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const Value& data = n.in(2);
  const std::string& reduce = n.str(3);
  const TensorType& out = n.out();
  const DType t = math_dtype(out.dtype);
  if (out.numel() == 0) return {b.full(0, out)};
  Segments seg = segments_of(n, data, 4, 5);
  const int64_t axis = seg.axis;
  const Ints& shape = seg.shape;
  Ints seg_dims;  // a per-segment value [outer.., S, inner..] spread over [.., S, L, ..]
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d != axis + 1) seg_dims.push_back(d);
  Value zero = b.full(0, {t, shape});
  auto spread = [&](const Value& v) { return b.broadcast_in_dim(b.convert(v, t), shape, seg_dims); };
  auto per_element = [&](const Value& v) {  // a segment value at each of its elements
    return b.reduce(m.sel(seg.member, v, zero), b.constant(0, t), {axis}, hlo::Binary::Add);
  };
  auto per_segment = [&](const Value& v) {  // a sum over each segment's elements
    return b.reduce(m.sel(seg.member, v, zero), b.constant(0, t), {axis + 1}, hlo::Binary::Add);
  };
  Value x = b.broadcast_in_dim(b.convert(data, t), shape, seg.data_dims);
  Value g = spread(n.in(0)), result = spread(n.in(1));
  Value share;
  if (reduce == "sum") {
    share = g;
  } else if (reduce == "mean") {
    Ints len_dims;
    for (int64_t d = 0; d <= axis; ++d) len_dims.push_back(d);
    Value len = b.broadcast_in_dim(b.convert(m.sub(seg.ends, seg.starts), t), shape, len_dims);
    share = m.div(g, len);
  } else if (reduce == "max" || reduce == "min") {
    Value hit = b.convert(m.eq(x, result), t);
    Value ties = b.broadcast_in_dim(per_segment(hit), shape, seg_dims);
    share = m.mul(hit, m.div(g, ties));
  } else if (reduce == "prod") {
    Value is_zero = m.eq(x, zero);
    Value zeros = b.broadcast_in_dim(per_segment(b.convert(is_zero, t)), shape, seg_dims);
    Value ones = b.full(1, {t, shape});
    Value others = b.reduce(m.sel(m.and_(seg.member, m.not_(is_zero)), x, ones), b.constant(1, t),
                            {axis + 1}, hlo::Binary::Multiply);
    Value nonzero_product = b.broadcast_in_dim(others, shape, seg_dims);
    Value none = m.div(m.mul(g, result), m.sel(is_zero, ones, x));
    Value single = m.sel(is_zero, m.mul(g, nonzero_product), zero);
    share = m.sel(m.eq(zeros, zero), none, m.sel(m.eq(zeros, ones), single, zero));
  } else {
    throw std::invalid_argument("_segment_reduce_backward: unsupported reduction " + reduce);
  }
  return {b.convert(per_element(share), out.dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(segment_reduce, {"segment_reduce", "segment_reduce.out"}, lower_segment_reduce);
TORCH_TPU_LOWERING(segment_reduce_backward,
                   {"_segment_reduce_backward", "_segment_reduce_backward.out"},
                   lower_segment_reduce_backward);

}  // namespace torch_tpu::ops
