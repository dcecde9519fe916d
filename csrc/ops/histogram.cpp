// Histograms: histc, histogram, histogramdd, bincount.
#include "ops/histogram.h"

#include <string>
#include <variant>
#include <vector>

#include "ops/common.h"
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
  Value pos =
      b.reduce(b.convert(le, DType::S64), b.constant_int(0, DType::S64), {1}, hlo::Binary::Add);
  TensorType positions{DType::S64, {count}};
  pos = m.min(m.sub(pos, b.full(1, positions)), b.full(static_cast<double>(bins - 1), positions));
  Value inside = m.and_(m.ge(x, b.broadcast_in_dim(lo, {count}, {})),
                        m.le(x, b.broadcast_in_dim(hi, {count}, {})));
  TensorType hits{DType::S64, {count, bins}};
  Value onehot = m.and_(m.eq(b.broadcast_in_dim(pos, hits.shape, {0}), b.iota(hits, 1)),
                        b.broadcast_in_dim(inside, hits.shape, {0}));
  Value counts =
      b.reduce(b.convert(onehot, DType::S64), b.constant_int(0, DType::S64), {0}, hlo::Binary::Add);
  return {b.convert(counts, out.dtype)};
}

// torch.histogram / histogramdd, as CPU computes them: per dim, edges linspace(range) or
// linspace(min, max) of the data (widened by 0.5 each way where equal), or the given
// edges; a point counts when every coordinate lies within its first and last edge (NaN
// never does), in the bin after the last edge <= it (the last bin includes its right
// edge); density divides by the total and by the bin widths. `points` is [M, D].
struct Histogram {
  Value hist;  // flat, prod(bins) long
  std::vector<Value> edges;
};

Histogram histogram_dd(Node& n, const Value& points, const std::vector<int64_t>& bins,
                       const std::vector<Value>* given, size_t range_arg, size_t weight_arg,
                       bool density, DType t) {
  hlo::Builder& b = n.b;
  Math m{b};
  const int64_t count = points.type.shape.at(0), dims = points.type.shape.at(1);
  int64_t total_bins = 1;
  for (int64_t k : bins) total_bins *= k;
  Histogram h;
  TensorType positions{DType::S64, {count}};
  Value index = b.full(0, positions);
  Value inside = b.full(1, {DType::Pred, {count}});
  for (int64_t d = 0; d < dims; ++d) {
    Value x = b.reshape(b.slice(points, {0, d}, {count, d + 1}, {1, 1}), {count});
    Value edges;
    if (given) {
      edges = b.convert((*given)[d], t);
    } else {
      Value lo, hi;
      if (!n.is_none(range_arg)) {
        const std::vector<double>& range = std::get<std::vector<double>>(n.args.at(range_arg).attr);
        lo = b.constant(range.at(2 * d), DType::F64);
        hi = b.constant(range.at(2 * d + 1), DType::F64);
      } else if (count == 0) {
        lo = b.constant(0, DType::F64);
        hi = b.constant(1, DType::F64);
      } else {
        lo = b.convert(reduce_extreme(b, x, {0}, /*max=*/false), DType::F64);
        hi = b.convert(reduce_extreme(b, x, {0}, /*max=*/true), DType::F64);
      }
      Value same = m.eq(lo, hi);
      lo = m.sel(same, m.sub(lo, b.constant(0.5, DType::F64)), lo);
      hi = m.sel(same, m.add(hi, b.constant(0.5, DType::F64)), hi);
      edges = lower_linspace(b, lo, hi, bins[d] + 1, t);
    }
    h.edges.push_back(edges);
    if (count == 0 || bins[d] == 0) continue;
    std::vector<int64_t> grid{count, bins[d] + 1};
    Value le = m.le(b.broadcast_in_dim(edges, grid, {1}), b.broadcast_in_dim(x, grid, {0}));
    Value pos =
        b.reduce(b.convert(le, DType::S64), b.constant_int(0, DType::S64), {1}, hlo::Binary::Add);
    pos = m.max(m.min(m.sub(pos, b.full(1, positions)),
                      b.full(static_cast<double>(bins[d] - 1), positions)),
                b.full(0, positions));
    auto edge = [&](int64_t i) {
      return b.broadcast_in_dim(b.reshape(b.slice(edges, {i}, {i + 1}, {1}), {}), {count}, {});
    };
    inside = m.and_(inside, m.and_(m.ge(x, edge(0)), m.le(x, edge(bins[d]))));
    index = m.add(m.mul(index, b.full(static_cast<double>(bins[d]), positions)), pos);
  }
  h.hist = b.full(0, {t, {total_bins}});
  if (count > 0 && total_bins > 0) {
    TensorType wt{t, {count}};
    Value w =
        n.has(weight_arg) ? b.reshape(b.convert(n.in(weight_arg), t), {count}) : b.full(1, wt);
    w = m.sel(inside, w, b.full(0, wt));
    h.hist = lower_bincount(b, index, &w, total_bins, t);
  }
  if (density && total_bins > 0) {
    Value sum = b.reduce(h.hist, b.constant(0, t), {0}, hlo::Binary::Add);
    Value hist = b.reshape(m.div(h.hist, b.broadcast_in_dim(sum, {total_bins}, {})), bins);
    for (int64_t d = 0; d < dims; ++d) {
      const Value& e = h.edges[d];
      Value widths = m.sub(b.slice(e, {1}, {bins[d] + 1}, {1}), b.slice(e, {0}, {bins[d]}, {1}));
      hist = m.div(hist, b.broadcast_in_dim(widths, bins, {d}));
    }
    h.hist = b.reshape(hist, {total_bins});
  }
  return h;
}

// histogram flattens its input: one dim.
Value as_points(hlo::Builder& b, const Value& x, DType t, bool flat) {
  const int64_t numel = x.type.numel();
  const int64_t dims = flat ? 1 : (x.type.rank() ? x.type.shape.back() : 1);
  return b.reshape(b.convert(x, t), {dims ? numel / dims : 0, dims});
}

std::vector<Value> lower_histogram_bin_ct(Node& n) {
  const DType t = n.out(0).dtype;
  Histogram h =
      histogram_dd(n, as_points(n.b, n.in(0), t, true), {n.i64(1)}, nullptr, 2, 3, n.flag(4), t);
  return {h.hist, h.edges[0]};
}

std::vector<Value> lower_histogram_bins_tensor(Node& n) {
  const DType t = n.out(0).dtype;
  std::vector<Value> given{n.in(1)};
  Histogram h = histogram_dd(n, as_points(n.b, n.in(0), t, true), {n.out(0).shape.at(0)}, &given,
                             /*range_arg=*/99, 2, n.flag(3), t);
  return {h.hist, h.edges[0]};
}

// _histogramdd_bin_edges(self, bins, range?, weight?, density) -> edges per dim.
std::vector<Value> lower_histogramdd_bin_edges(Node& n) {
  const DType t = n.out(0).dtype;
  return histogram_dd(n, as_points(n.b, n.in(0), t, false), n.ints(1), nullptr, 2, 3, false, t)
      .edges;
}

// _histogramdd_from_bin_cts(self, bins, range?, weight?, density) -> hist.
std::vector<Value> lower_histogramdd_from_bin_cts(Node& n) {
  const DType t = n.out(0).dtype;
  Histogram h =
      histogram_dd(n, as_points(n.b, n.in(0), t, false), n.ints(1), nullptr, 2, 3, n.flag(4), t);
  return {n.b.reshape(h.hist, n.out(0).shape)};
}

// _histogramdd_from_bin_tensors(self, bins (edges), weight?, density) -> hist.
std::vector<Value> lower_histogramdd_from_bin_tensors(Node& n) {
  const DType t = n.out(0).dtype;
  std::vector<Value> given;
  for (const auto& e : n.list(1)) given.push_back(e.value());
  Histogram h = histogram_dd(n, as_points(n.b, n.in(0), t, false), n.out(0).shape, &given, 99, 2,
                             n.flag(3), t);
  return {n.b.reshape(h.hist, n.out(0).shape)};
}

}  // namespace

// One scatter-add of ones (or the weights) at the values.
Value lower_bincount(hlo::Builder& b, const Value& x, const Value* weights, int64_t length,
                     DType dtype) {
  const int64_t count = x.type.numel();
  Value zeros = b.full(0, {dtype, {length}});
  if (count == 0) return zeros;
  Value updates = weights ? b.convert(*weights, dtype) : b.full(1, {dtype, {count}});
  std::string add = b.binary_region(Binary::Add, dtype);
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, "
      "unique_indices = false";
  Value index = b.reshape(b.convert(x, DType::S64), {count, 1});
  return b.emit("stablehlo.scatter", {zeros, index, updates}, attrs, zeros.type, {add});
}

TORCH_TPU_LOWERING(histc, {"histc", "histc.out"}, lower_histc);
TORCH_TPU_LOWERING(histogram_bin_ct, {"histogram.bin_ct", "histogram.bin_ct_out"},
                   lower_histogram_bin_ct);
TORCH_TPU_LOWERING(histogram_bins_tensor, {"histogram.bins_tensor", "histogram.bins_tensor_out"},
                   lower_histogram_bins_tensor);
TORCH_TPU_LOWERING(histogramdd_bin_edges, {"_histogramdd_bin_edges", "_histogramdd_bin_edges.out"},
                   lower_histogramdd_bin_edges);
TORCH_TPU_LOWERING(histogramdd_from_bin_cts,
                   {"_histogramdd_from_bin_cts", "_histogramdd_from_bin_cts.out"},
                   lower_histogramdd_from_bin_cts);
TORCH_TPU_LOWERING(histogramdd_from_bin_tensors,
                   {"_histogramdd_from_bin_tensors", "_histogramdd_from_bin_tensors.out"},
                   lower_histogramdd_from_bin_tensors);

}  // namespace torch_tpu::ops
