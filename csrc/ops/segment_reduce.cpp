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

std::vector<Value> lower_segment_reduce(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const Value& data = n.in(0);
  const std::string& reduce = n.str(1);
  const TensorType& out = n.out();
  const DType t = out.dtype;
  const bool by_lengths = n.has(2);
  if (!by_lengths && !n.has(4))
    throw std::invalid_argument("_segment_reduce: either lengths or offsets must be given");
  Value bounds = b.convert(n.in(by_lengths ? 2 : 4), DType::S64);
  const int64_t axis = bounds.type.rank() - 1;
  Value starts, ends;
  if (by_lengths) {
    ends = prefix_sum(b, bounds);
    starts = m.sub(ends, bounds);
  } else {
    const int64_t k = bounds.type.shape.back();
    starts = last_slice(b, bounds, 0, k - 1);
    ends = last_slice(b, bounds, 1, k);
  }
  const int64_t segments = starts.type.shape.back();
  if (out.numel() == 0) return {b.full(0, out)};

  // [outer.., S, L, inner..]: data repeated per segment, masked to its members.
  Ints shape(data.type.shape.begin(), data.type.shape.begin() + axis);
  shape.push_back(segments);
  shape.insert(shape.end(), data.type.shape.begin() + axis, data.type.shape.end());
  Ints data_dims, bound_dims;
  for (int64_t d = 0; d < data.type.rank(); ++d) data_dims.push_back(d < axis ? d : d + 1);
  for (int64_t d = 0; d <= axis; ++d) bound_dims.push_back(d);
  Ints mask_shape(shape.begin(), shape.begin() + axis + 2);  // [outer.., S, L]
  TensorType it{DType::S64, mask_shape};
  Value j = b.iota(it, axis + 1);
  Value member = m.and_(m.le(b.broadcast_in_dim(starts, mask_shape, bound_dims), j),
                        m.lt(j, b.broadcast_in_dim(ends, mask_shape, bound_dims)));
  Ints mask_dims;
  for (int64_t d = 0; d < axis + 2; ++d) mask_dims.push_back(d);
  member = b.broadcast_in_dim(member, shape, mask_dims);
  Value x = b.broadcast_in_dim(b.convert(data, t), shape, data_dims);

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

}  // namespace

TORCH_TPU_LOWERING(segment_reduce, {"segment_reduce", "segment_reduce.out"}, lower_segment_reduce);

}  // namespace torch_tpu::ops
