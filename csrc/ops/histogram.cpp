// Histograms: histc, bincount.
#include "ops/histogram.h"

#include <string>

#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::TensorType;
using hlo::Value;

// histc(self, bins, min, max), as CPU computes it for floats: bin edges linspace(min,
// max, bins + 1) in self's dtype (the data's range when min == max, widened by 1 each way
// if still equal); a value in [min, max] counts in the last
// bin whose left edge is <= it, max itself in the last bin; other values (NaN too) are
// ignored. Integer inputs (as Hugging Face's MoE routing passes them off the CPU) bin in
// f64. One program: a [values, bins] comparison, summed.
std::vector<Value> lower_histc(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  const TensorType& out = n.out();
  DType t = hlo::is_float(out.dtype) ? out.dtype : DType::F64;
  int64_t bins = out.shape.at(0), count = n.in(0).type.numel();
  if (count == 0) return {b.full(0, out)};
  Value x = b.reshape(b.convert(n.in(0), t), {count});
  Value lo = b.convert(n.in(2), t), hi = b.convert(n.in(3), t);
  Value one = b.constant(1, t);
  Value same = m.eq(lo, hi);
  lo = m.sel(same, reduce_extreme(b, x, {0}, /*max=*/false), lo);
  hi = m.sel(same, reduce_extreme(b, x, {0}, /*max=*/true), hi);
  same = m.eq(lo, hi);
  lo = m.sel(same, m.sub(lo, one), lo);
  hi = m.sel(same, m.add(hi, one), hi);
  Value edges = lower_linspace(b, lo, hi, bins + 1, t);
  // The bin: (edges <= x) - 1, capped at the last bin.
  std::vector<int64_t> grid{count, bins + 1};
  Value le = m.le(b.broadcast_in_dim(edges, grid, {1}), b.broadcast_in_dim(x, grid, {0}));
  Value pos = b.reduce(b.convert(le, DType::S64), b.constant_int(0, DType::S64), {1},
                       hlo::Reducer::Add);
  TensorType positions{DType::S64, {count}};
  pos = m.min(m.sub(pos, b.full(1, positions)), b.full(static_cast<double>(bins - 1), positions));
  Value inside = m.and_(m.ge(x, b.broadcast_in_dim(lo, {count}, {})),
                        m.le(x, b.broadcast_in_dim(hi, {count}, {})));
  TensorType hits{DType::S64, {count, bins}};
  Value onehot = m.and_(m.eq(b.broadcast_in_dim(pos, hits.shape, {0}), b.iota(hits, 1)),
                        b.broadcast_in_dim(inside, hits.shape, {0}));
  Value counts = b.reduce(b.convert(onehot, DType::S64), b.constant_int(0, DType::S64), {0},
                          hlo::Reducer::Add);
  return {b.convert(counts, out.dtype)};
}

}  // namespace

// One scatter-add of ones (or the weights) at the values.
Value lower_bincount(hlo::Builder& b, const Value& x, const Value* weights, int64_t length,
                     DType dtype) {
  const int64_t count = x.type.numel();
  Value zeros = b.full(0, {dtype, {length}});
  if (count == 0) return zeros;
  Value updates = weights ? b.convert(*weights, dtype) : b.full(1, {dtype, {count}});
  std::string add = b.binary_region("stablehlo.add", dtype);
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
      "unique_indices = false";
  Value index = b.reshape(b.convert(x, DType::S64), {count, 1});
  return b.emit("stablehlo.scatter", {zeros, index, updates}, attrs, zeros.type, {add});
}

TORCH_TPU_LOWERING(histc, {"histc", "histc.out"}, lower_histc);

}  // namespace torch_tpu::ops
