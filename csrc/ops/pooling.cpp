// Max, average, adaptive and fractional max pooling over the trailing 1-3 dims, with
// gradients.
//
// Max pooling returns PyTorch's indices: the first maximum of a window in row-major
// order, or its last NaN. Their gradients scatter into the input at those indices.
// Average pooling sums with reduce_window and divides by PyTorch's per-window divisor,
// known from the shapes alone; its gradient is the transposed window sum. Adaptive windows vary in
// size: average pooling applies a per-dim averaging matrix, max pooling gathers each window (padded
// by repeating its last element, which changes neither the maximum nor its index) and reduces.
#include "ops/pooling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

std::string list_text(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Ints all_but(int64_t rank, int64_t skip) {
  Ints dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != skip) dims.push_back(d);
  return dims;
}

int64_t product(const Ints& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// g summed into `zeros` at the [M, 1] positions `index` along `dim` (g's dim `dim` is M).
Value scatter_add(hlo::Builder& b, const Value& zeros, int64_t dim, const Value& index,
                  const Value& g) {
  std::string add = b.binary_region(Binary::Add, g.type.dtype);
  std::string attrs = "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " +
                      list_text(all_but(g.type.rank(), dim)) + ", inserted_window_dims = [" +
                      std::to_string(dim) + "], scatter_dims_to_operand_dims = [" +
                      std::to_string(dim) +
                      "], index_vector_dim = 1>, indices_are_sorted = false, "
                      "unique_indices = false";
  return b.emit("stablehlo.scatter", {zeros, index, g}, attrs, zeros.type, {add});
}

struct Window {
  Ints dims, strides, dilations, lo, hi;
};

// reduce_window over `operands` (padded with `inits`) with the reducer `body`.
V reduce_window(hlo::Builder& b, const V& operands, const V& inits, const Window& w,
                const std::string& body) {
  int64_t rank = operands[0].type.rank();
  Ints shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t span = w.dilations[d] * (w.dims[d] - 1) + 1;
    int64_t padded = operands[0].type.shape[d] + w.lo[d] + w.hi[d];
    shape.push_back(padded < span ? 0 : (padded - span) / w.strides[d] + 1);
  }
  std::string padding = "dense<[";
  for (int64_t d = 0; d < rank; ++d)
    padding += (d ? ", [" : "[") + std::to_string(w.lo[d]) + ", " + std::to_string(w.hi[d]) + "]";
  padding += "]> : tensor<" + std::to_string(rank) + "x2xi64>";
  std::string attrs = "base_dilations = " + hlo::i64_array(Ints(rank, 1)) +
                      ", padding = " + padding +
                      ", window_dilations = " + hlo::i64_array(w.dilations) +
                      ", window_dimensions = " + hlo::i64_array(w.dims) +
                      ", window_strides = " + hlo::i64_array(w.strides);
  V args = operands;
  args.insert(args.end(), inits.begin(), inits.end());
  std::vector<hlo::TensorType> types;
  for (const Value& v : operands) types.push_back({v.type.dtype, shape});
  return b.emit_multi("stablehlo.reduce_window", args, attrs, types, {body});
}

// ---- parameters ----

struct Pool {
  size_t spatial;
  Ints kernel, stride, padding, dilation, in, out;  // per spatial dim
  int64_t lead;                                     // leading (batch, channel) dims
};

Ints per_dim(const Ints& v, size_t n, const Ints& fallback) {
  if (v.empty()) return fallback;
  return v.size() == 1 ? Ints(n, v[0]) : v;
}

Pool pool(const hlo::TensorType& input, const hlo::TensorType& output, size_t spatial,
          const Ints& kernel, const Ints& stride, const Ints& padding, const Ints& dilation) {
  Pool p;
  p.spatial = spatial;
  p.lead = input.rank() - static_cast<int64_t>(spatial);
  p.kernel = per_dim(kernel, spatial, {});
  p.stride = per_dim(stride, spatial, p.kernel);
  p.padding = per_dim(padding, spatial, Ints(spatial, 0));
  p.dilation = per_dim(dilation, spatial, Ints(spatial, 1));
  for (size_t j = 0; j < spatial; ++j) {
    p.in.push_back(input.shape[p.lead + j]);
    p.out.push_back(output.shape[p.lead + j]);
  }
  return p;
}

// The window of `p` over a tensor of p's rank; the high padding covers ceil_mode's last
// window, and the result is sliced to p.out where floor mode leaves elements over.
Window pool_window(const Pool& p) {
  Window w;
  for (int64_t d = 0; d < p.lead; ++d) {
    w.dims.push_back(1), w.strides.push_back(1), w.dilations.push_back(1);
    w.lo.push_back(0), w.hi.push_back(0);
  }
  for (size_t j = 0; j < p.spatial; ++j) {
    int64_t need = (p.out[j] - 1) * p.stride[j] + p.dilation[j] * (p.kernel[j] - 1) + 1 - p.in[j] -
                   p.padding[j];
    w.dims.push_back(p.kernel[j]), w.strides.push_back(p.stride[j]);
    w.dilations.push_back(p.dilation[j]);
    w.lo.push_back(p.padding[j]), w.hi.push_back(std::max<int64_t>(need, 0));
  }
  return w;
}

Value slice_to(hlo::Builder& b, const Value& x, const Ints& shape) {
  return b.slice(x, Ints(shape.size(), 0), shape, Ints(shape.size(), 1));
}

Ints full_shape(const Value& x, const Pool& p, const Ints& spatial) {
  Ints shape(x.type.shape.begin(), x.type.shape.begin() + p.lead);
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  return shape;
}

// ---- max pooling ----

// Keeps the larger (value, index) pair: NaN beats numbers and a later NaN beats an
// earlier one; among equal values the smaller index wins.
std::string argmax_region(hlo::Builder& b, hlo::DType dtype) {
  hlo::TensorType v{dtype, {}}, i{hlo::DType::S64, {}};
  return b.region({v, i, v, i}, [](hlo::Builder& r, const V& a) {
    using hlo::Compare;
    Value a_nan = r.compare(Compare::NE, a[0], a[0]), b_nan = r.compare(Compare::NE, a[2], a[2]);
    Value numbers = r.binary(Binary::And, r.unary(Unary::Not, a_nan), r.unary(Unary::Not, b_nan));
    Value better = r.binary(Binary::Or, r.compare(Compare::GT, a[2], a[0]),
                            r.binary(Binary::And, r.compare(Compare::EQ, a[2], a[0]),
                                     r.compare(Compare::LT, a[3], a[1])));
    Value nan_wins = r.binary(
        Binary::And, b_nan,
        r.binary(Binary::Or, r.unary(Unary::Not, a_nan), r.compare(Compare::GT, a[3], a[1])));
    Value take = r.binary(Binary::Or, nan_wins, r.binary(Binary::And, numbers, better));
    return V{r.select(take, a[2], a[0]), r.select(take, a[3], a[1])};
  });
}

V argmax_inits(hlo::Builder& b, hlo::DType dtype) {
  return {b.constant(-std::numeric_limits<double>::infinity(), dtype),
          b.constant_int(std::numeric_limits<int64_t>::max(), hlo::DType::S64)};
}

// The maximum is a plain max reduce_window. Its index is found by visiting the window
// offsets in row-major order: each offset is one strided slice of the padded input, and
// the first slice equal to the maximum (or, for NaN, the last NaN) gives the position.
// A variadic (value, index) reduce_window does the same in one op but runs far slower.
V max_pool(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const hlo::TensorType& out = n.out(0);
  Pool p = pool(x.type, out, spatial, n.ints(1), n.ints(2), n.ints(3), n.ints(4));
  Window w = pool_window(p);
  Value lowest = b.constant(-std::numeric_limits<double>::infinity(), x.type.dtype);
  Value max = reduce_window(b, {x}, {lowest}, w, b.binary_region(Binary::Maximum, x.type.dtype))[0];
  max = slice_to(b, max, out.shape);
  Value padded = b.pad(x, lowest, w.lo, w.hi, Ints(w.lo.size(), 0));

  hlo::TensorType it{hlo::DType::S64, out.shape};
  hlo::TensorType pt{hlo::DType::Pred, out.shape};
  Value index = b.full(0, it), nan_index = b.full(0, it), found = b.full(0, pt);
  Value any_nan = b.full(0, pt);
  Ints offset(spatial, 0);
  for (int64_t visit = 0; visit < product(p.kernel); ++visit) {
    Ints start(p.lead, 0), limit(out.shape.begin(), out.shape.begin() + p.lead), strides(p.lead, 1);
    Value position = b.full(0, it), valid = b.full(1, pt);
    for (size_t j = 0; j < spatial; ++j) {
      int64_t first = offset[j] * p.dilation[j];
      start.push_back(first);
      limit.push_back(first + (p.out[j] - 1) * p.stride[j] + 1);
      strides.push_back(p.stride[j]);
      Ints pos, inside;
      for (int64_t o = 0; o < p.out[j]; ++o) {
        int64_t at = o * p.stride[j] - p.padding[j] + first;
        pos.push_back(at * product(p.in, j + 1));
        inside.push_back(at >= 0 && at < p.in[j]);
      }
      int64_t dim = p.lead + static_cast<int64_t>(j);
      position = b.binary(Binary::Add, position,
                          b.broadcast_in_dim(index_constant(b, pos), out.shape, {dim}));
      valid = b.binary(Binary::And, valid,
                       b.broadcast_in_dim(b.convert(index_constant(b, inside), hlo::DType::Pred),
                                          out.shape, {dim}));
    }
    Value v = b.slice(padded, start, limit, strides);
    Value hit = b.binary(Binary::And, valid, b.compare(hlo::Compare::EQ, v, max));
    index = b.select(b.binary(Binary::And, hit, b.unary(Unary::Not, found)), position, index);
    found = b.binary(Binary::Or, found, hit);
    Value nan = b.binary(Binary::And, valid, b.compare(hlo::Compare::NE, v, v));
    nan_index = b.select(nan, position, nan_index);
    any_nan = b.binary(Binary::Or, any_nan, nan);
    for (int64_t j = static_cast<int64_t>(spatial) - 1; j >= 0 && ++offset[j] == p.kernel[j]; --j)
      offset[j] = 0;
  }
  // reduce_window's maximum may skip NaN; PyTorch's does not.
  Value nan_value = b.full(std::numeric_limits<double>::quiet_NaN(), out);
  return {b.select(any_nan, nan_value, max), b.select(any_nan, nan_index, index)};
}

// The gradient of a max pooling: g added into the input plane at `indices`. With
// `replace`, g is written there instead (max_unpool: indices repeat only where the
// pooling windows overlapped, and then they carry the same value).
Value scatter_by_indices(hlo::Builder& b, const Value& g, const Value& indices,
                         const hlo::TensorType& input, size_t spatial, bool replace = false) {
  int64_t lead = input.rank() - static_cast<int64_t>(spatial);
  int64_t planes = product(Ints(input.shape.begin(), input.shape.begin() + lead));
  int64_t plane = product(Ints(input.shape.begin() + lead, input.shape.end()));
  int64_t per_plane = planes ? g.type.numel() / planes : 0;
  hlo::DType acc = math_dtype(input.dtype);
  hlo::TensorType it{hlo::DType::S64, {planes, per_plane}};
  Value base = b.binary(Binary::Multiply, b.iota(it, 0), b.full(static_cast<double>(plane), it));
  Value index =
      b.binary(Binary::Add, b.reshape(b.convert(indices, hlo::DType::S64), it.shape), base);
  int64_t m = planes * per_plane;
  Value zeros = b.full(0, {acc, {planes * plane}});
  if (replace) {
    Value flat = b.scatter_flat(zeros, b.reshape(index, {m}), b.reshape(b.convert(g, acc), {m}));
    return b.reshape(flat, input.shape);
  }
  Value sum = scatter_add(b, zeros, 0, b.reshape(index, {m, 1}), b.reshape(b.convert(g, acc), {m}));
  return b.reshape(sum, input.shape);
}

// max_unpool2d(self, indices, output_size) / max_unpool3d(..., stride, padding): each
// plane of `self` written into a zero plane of output_size at its flat `indices`.
LowerFn max_unpool(size_t spatial) {
  return [spatial](Node& n) {
    const hlo::TensorType& out = n.out();
    Value plane = scatter_by_indices(n.b, n.in(0), n.in(1), {math_dtype(out.dtype), out.shape},
                                     spatial, true);
    return V{n.b.convert(plane, out.dtype)};
  };
}

// ---- average pooling ----

// PyTorch's divisor for each output position: a product of per-dim window sizes.
Value avg_divisor(hlo::Builder& b, const Pool& p, const Ints& out_shape, bool count_pad,
                  std::optional<int64_t> divisor, hlo::DType dtype) {
  hlo::TensorType t{dtype, out_shape};
  if (divisor) return b.full(static_cast<double>(*divisor), t);
  Value result = b.full(1, t);
  for (size_t j = 0; j < p.spatial; ++j) {
    Ints sizes;
    for (int64_t o = 0; o < p.out[j]; ++o) {
      int64_t start = o * p.stride[j] - p.padding[j];
      int64_t end = std::min(start + p.kernel[j], p.in[j] + p.padding[j]);
      int64_t size = end - start;
      if (!count_pad) size = std::min(end, p.in[j]) - std::max<int64_t>(start, 0);
      sizes.push_back(size);
    }
    Value v = b.convert(index_constant(b, sizes), dtype);
    result = b.binary(Binary::Multiply, result,
                      b.broadcast_in_dim(v, out_shape, {p.lead + static_cast<int64_t>(j)}));
  }
  return result;
}

Pool avg_pool(const Node& n, const hlo::TensorType& input, const hlo::TensorType& output,
              size_t spatial, size_t first) {
  return pool(input, output, spatial, n.ints(first), n.ints(first + 1), n.ints(first + 2), {});
}

V avg_pool_forward(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.out().dtype);
  Value x = b.convert(n.in(0), acc);
  Pool p = avg_pool(n, x.type, n.out(), spatial, 1);
  Value sum = reduce_window(b, {x}, {b.constant(0, acc)}, pool_window(p),
                            b.binary_region(Binary::Add, acc))[0];
  sum = slice_to(b, sum, n.out().shape);
  return {b.binary(Binary::Divide, sum,
                   avg_divisor(b, p, sum.type.shape, n.flag(5), n.opt_i64(6), acc))};
}

V avg_pool_backward(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.out().dtype);
  Value g = b.convert(n.in(0), acc);
  Pool p = avg_pool(n, n.in(1).type, g.type, spatial, 2);
  g = b.binary(Binary::Divide, g, avg_divisor(b, p, g.type.shape, n.flag(6), n.opt_i64(7), acc));
  // Each output gradient sits where its window starts, so a stride-1 window sum over
  // the stride-dilated gradient hands it to every input position its window covered.
  Ints lo(p.lead, 0), hi(p.lead, 0), interior(p.lead, 0);
  Window w{Ints(p.lead + p.spatial, 1), Ints(p.lead + p.spatial, 1), Ints(p.lead + p.spatial, 1),
           Ints(p.lead + p.spatial, 0), Ints(p.lead + p.spatial, 0)};
  for (size_t j = 0; j < p.spatial; ++j) {
    lo.push_back(p.kernel[j] - 1 - p.padding[j]);
    hi.push_back(p.in[j] + p.padding[j] - (p.out[j] - 1) * p.stride[j] - 1);
    interior.push_back(p.stride[j] - 1);
    w.dims[p.lead + j] = p.kernel[j];
  }
  Value padded = b.pad(g, b.constant(0, acc), lo, hi, interior);
  return {
      reduce_window(b, {padded}, {b.constant(0, acc)}, w, b.binary_region(Binary::Add, acc))[0]};
}

// ---- adaptive pooling ----

// Output position o of an adaptive pooling pools input [start, end).
int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return o * in / out; }
int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

// [out, in]: 1/size where the input element is in the output's window, else 0.
Value averaging_matrix(hlo::Builder& b, int64_t in, int64_t out, hlo::DType dtype) {
  Ints starts, sizes;
  for (int64_t o = 0; o < out; ++o) {
    starts.push_back(adaptive_start(o, in, out));
    sizes.push_back(adaptive_end(o, in, out) - starts.back());
  }
  hlo::TensorType it{hlo::DType::S64, {out, in}};
  Value col = b.iota(it, 1);
  Value start = b.broadcast_in_dim(index_constant(b, starts), it.shape, {0});
  Value size = b.broadcast_in_dim(index_constant(b, sizes), it.shape, {0});
  Value offset = b.binary(Binary::Subtract, col, start);
  Value inside = b.binary(Binary::And, b.compare(hlo::Compare::GE, offset, b.full(0, it)),
                          b.compare(hlo::Compare::LT, offset, size));
  hlo::TensorType ft{dtype, {out, in}};
  Value weight = b.binary(Binary::Divide, b.full(1, ft), b.convert(size, dtype));
  return b.select(inside, weight, b.full(0, ft));
}

// Applies one [out_j, in_j] matrix per spatial dim (`transpose`: [in_j, out_j]).
Value per_dim_matrices(hlo::Builder& b, Value x, int64_t lead, const Ints& in, const Ints& out,
                       bool transpose) {
  for (size_t j = 0; j < in.size(); ++j) {
    Value m = averaging_matrix(b, in[j], out[j], x.type.dtype);
    // Contracting dim `lead` appends the new dim last, so the spatial dims rotate into
    // place one by one.
    x = b.dot_general(x, m, {}, {}, {lead}, {transpose ? 0 : 1}, x.type.dtype);
  }
  return x;
}

Ints spatial_of(const hlo::TensorType& t, size_t spatial) {
  return Ints(t.shape.end() - static_cast<int64_t>(spatial), t.shape.end());
}

V adaptive_avg_pool(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.out().dtype);
  Value x = b.convert(n.in(0), acc);
  int64_t lead = x.type.rank() - static_cast<int64_t>(spatial);
  return {per_dim_matrices(b, x, lead, spatial_of(x.type, spatial), spatial_of(n.out(), spatial),
                           false)};
}

V adaptive_avg_pool_backward(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  hlo::DType acc = math_dtype(n.out().dtype);
  Value g = b.convert(n.in(0), acc);
  int64_t lead = g.type.rank() - static_cast<int64_t>(spatial);
  return {per_dim_matrices(b, g, lead, spatial_of(n.out(), spatial), spatial_of(g.type, spatial),
                           true)};
}

V adaptive_max_pool(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  Value x = n.in(0);
  int64_t lead = x.type.rank() - static_cast<int64_t>(spatial);
  Ints in = spatial_of(x.type, spatial), out = spatial_of(n.out(0), spatial);
  Value v = x;
  std::vector<Ints> tables;
  Ints windows;  // the largest window per dim
  for (size_t j = 0; j < spatial; ++j) {
    int64_t k = 0;
    for (int64_t o = 0; o < out[j]; ++o)
      k = std::max(k, adaptive_end(o, in[j], out[j]) - adaptive_start(o, in[j], out[j]));
    Ints table;
    for (int64_t o = 0; o < out[j]; ++o)
      for (int64_t t = 0; t < k; ++t)
        table.push_back(
            std::min(adaptive_start(o, in[j], out[j]) + t, adaptive_end(o, in[j], out[j]) - 1));
    int64_t dim = lead + 2 * static_cast<int64_t>(j);
    v = take_along(b, v, dim, table);
    Ints shape = v.type.shape;
    shape[dim] = k;
    shape.insert(shape.begin() + dim, out[j]);
    v = b.reshape(v, shape);
    tables.push_back(table);
    windows.push_back(k);
  }
  hlo::TensorType it{hlo::DType::S64, v.type.shape};
  Value index = b.full(0, it);
  for (size_t j = 0; j < spatial; ++j) {
    int64_t dim = lead + 2 * static_cast<int64_t>(j);
    Value t = b.reshape(index_constant(b, tables[j]), {out[j], windows[j]});
    t = b.binary(Binary::Multiply, t, b.full(static_cast<double>(product(in, j + 1)), t.type));
    index = b.binary(Binary::Add, index, b.broadcast_in_dim(t, it.shape, {dim, dim + 1}));
  }
  Ints reduce;
  for (size_t j = 0; j < spatial; ++j) reduce.push_back(lead + 2 * static_cast<int64_t>(j) + 1);
  V inits = argmax_inits(b, x.type.dtype);
  std::vector<hlo::TensorType> types{n.out(0), {hlo::DType::S64, n.out(1).shape}};
  std::string attrs = "dimensions = " + hlo::i64_array(reduce);
  V r = b.emit_multi("stablehlo.reduce", {v, index, inits[0], inits[1]}, attrs, types,
                     {argmax_region(b, x.type.dtype)});
  return r;
}

// The lowering of `f` over `spatial` trailing dims.
// ---- fractional max pooling ----

// fractional_max_pool2d/3d(self, kernel_size, output_size, random_samples): window o of a
// dim starts at int((o + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1), the
// last one at in - k, with u the plane's sample for that dim (W then H in 2-d, T, H, W in
// 3-d), all in the input's dtype as CPU computes them. Each window is read by one gather
// per kernel tap; the maximum and its index follow CPU's scan (a greater value or a NaN
// replaces the one so far).
V fractional_max_pool(Node& n, size_t spatial) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const hlo::TensorType& out = n.out(0);
  const Ints kernel = n.ints(1);
  const hlo::DType t = x.type.dtype;
  const int64_t lead = x.type.rank() - static_cast<int64_t>(spatial);
  const int64_t planes = product(Ints(x.type.shape.begin(), x.type.shape.begin() + lead));
  Ints in = spatial_of(x.type, spatial), os = spatial_of(out, spatial);
  if (out.numel() == 0) return V{b.full(0, out), b.full(0, {hlo::DType::S64, out.shape})};
  // [planes, *out] index space.
  Ints grid{planes};
  grid.insert(grid.end(), os.begin(), os.end());
  hlo::TensorType it{hlo::DType::S64, grid};
  Value samples = b.reshape(b.convert(n.in(3), t), {planes, static_cast<int64_t>(spatial)});
  std::vector<Value> starts;  // per dim, s64 over `grid`
  for (size_t j = 0; j < spatial; ++j) {
    const size_t which = spatial == 2 ? 1 - j : j;
    Value u = b.reshape(b.slice(samples, {0, static_cast<int64_t>(which)},
                                {planes, static_cast<int64_t>(which) + 1}, {1, 1}),
                        {planes});
    hlo::TensorType ut{t, {planes, os[j]}};
    Value uu = b.broadcast_in_dim(u, ut.shape, {0});
    Value last = b.full(static_cast<double>(in[j] - kernel[j]), {hlo::DType::S64, ut.shape});
    Value start = last;
    if (os[j] > 1) {
      Value alpha = b.binary(Binary::Divide, b.full(static_cast<double>(in[j] - kernel[j]), ut),
                             b.full(static_cast<double>(os[j] - 1), ut));
      Value o = b.convert(b.iota({hlo::DType::S64, ut.shape}, 1), t);
      Value first = b.convert(b.binary(Binary::Multiply, b.binary(Binary::Add, o, uu), alpha),
                              hlo::DType::S64);
      Value shift = b.convert(b.binary(Binary::Multiply, uu, alpha), hlo::DType::S64);
      Value is_last =
          b.compare(hlo::Compare::EQ, b.iota({hlo::DType::S64, ut.shape}, 1),
                    b.full(static_cast<double>(os[j] - 1), {hlo::DType::S64, ut.shape}));
      start = b.select(is_last, last, b.binary(Binary::Subtract, first, shift));
    }
    starts.push_back(b.broadcast_in_dim(start, grid, {0, static_cast<int64_t>(j) + 1}));
  }
  const int64_t plane_size = product(in);
  Value flat = b.reshape(x, {planes * plane_size});
  Value base =
      b.binary(Binary::Multiply, b.iota(it, 0), b.full(static_cast<double>(plane_size), it));
  Value best = b.full(-std::numeric_limits<double>::infinity(), {t, grid});
  Value best_index;
  const int64_t taps = product(kernel);
  for (int64_t tap = 0; tap < taps; ++tap) {
    // Tap offsets in row-major order over the kernel.
    Ints offset(spatial);
    for (int64_t r = tap, j = static_cast<int64_t>(spatial) - 1; j >= 0; --j) {
      offset[j] = r % kernel[j];
      r /= kernel[j];
    }
    Value index = b.full(0, it);
    for (size_t j = 0; j < spatial; ++j) {
      Value pos = b.binary(Binary::Add, starts[j], b.full(static_cast<double>(offset[j]), it));
      index =
          b.binary(Binary::Add,
                   b.binary(Binary::Multiply, index, b.full(static_cast<double>(in[j]), it)), pos);
    }
    if (tap == 0) best_index = index;
    Value v = b.gather_flat(flat, b.binary(Binary::Add, base, index));
    Value take = b.binary(Binary::Or, b.compare(hlo::Compare::GT, v, best),
                          b.compare(hlo::Compare::NE, v, v));
    best = b.select(take, v, best);
    best_index = b.select(take, index, best_index);
  }
  return V{b.reshape(best, out.shape), b.reshape(best_index, out.shape)};
}

LowerFn over(V (*f)(Node&, size_t), size_t spatial) {
  return [f, spatial](Node& n) { return f(n, spatial); };
}

// The gradient of a max pooling whose indices are argument `indices`.
LowerFn max_pool_backward(size_t indices, size_t spatial) {
  return [indices, spatial](Node& n) {
    return V{scatter_by_indices(n.b, n.in(0), n.in(indices), n.in(1).type, spatial)};
  };
}

}  // namespace

Value index_constant(hlo::Builder& b, const Ints& values) {
  hlo::TensorType t{hlo::DType::S64, {static_cast<int64_t>(values.size())}};
  std::string text = values.empty() ? "dense<>" : "dense<" + list_text(values) + ">";
  return b.emit("stablehlo.constant", {}, "value = " + text + " : " + t.str(), t);
}

Value take_along(hlo::Builder& b, const Value& x, int64_t dim, const Ints& index) {
  int64_t m = static_cast<int64_t>(index.size());
  Value idx = b.reshape(index_constant(b, index), {m, 1});
  Ints sizes = x.type.shape, shape = x.type.shape;
  sizes[dim] = 1;
  shape[dim] = m;
  std::string attrs = "dimension_numbers = #stablehlo.gather<offset_dims = " +
                      list_text(all_but(x.type.rank(), dim)) + ", collapsed_slice_dims = [" +
                      std::to_string(dim) + "], start_index_map = [" + std::to_string(dim) +
                      "], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = " +
                      hlo::i64_array(sizes);
  return b.emit("stablehlo.gather", {x, idx}, attrs, {x.type.dtype, shape});
}

Value scatter_add_along(hlo::Builder& b, const Value& g, int64_t dim, const Ints& index,
                        int64_t size) {
  int64_t m = static_cast<int64_t>(index.size());
  Ints shape = g.type.shape;
  shape[dim] = size;
  return scatter_add(b, b.full(0, {g.type.dtype, shape}), dim,
                     b.reshape(index_constant(b, index), {m, 1}), g);
}

TORCH_TPU_LOWERING(max_pool2d, {"max_pool2d_with_indices", "max_pool2d_with_indices.out"},
                   over(max_pool, 2));
TORCH_TPU_LOWERING(max_pool3d, {"max_pool3d_with_indices", "max_pool3d_with_indices.out"},
                   over(max_pool, 3));
TORCH_TPU_LOWERING(max_pool2d_backward,
                   {"max_pool2d_with_indices_backward",
                    "max_pool2d_with_indices_backward.grad_input"},
                   max_pool_backward(7, 2));
TORCH_TPU_LOWERING(max_pool3d_backward,
                   {"max_pool3d_with_indices_backward",
                    "max_pool3d_with_indices_backward.grad_input"},
                   max_pool_backward(7, 3));
TORCH_TPU_LOWERING(max_unpool2d, {"max_unpool2d", "max_unpool2d.out"}, max_unpool(2));
TORCH_TPU_LOWERING(max_unpool3d, {"max_unpool3d", "max_unpool3d.out"}, max_unpool(3));
TORCH_TPU_LOWERING(fractional_max_pool2d, {"fractional_max_pool2d", "fractional_max_pool2d.output"},
                   over(fractional_max_pool, 2));
TORCH_TPU_LOWERING(fractional_max_pool3d, {"fractional_max_pool3d", "fractional_max_pool3d.output"},
                   over(fractional_max_pool, 3));
TORCH_TPU_LOWERING(fractional_max_pool2d_backward,
                   {"fractional_max_pool2d_backward", "fractional_max_pool2d_backward.grad_input"},
                   max_pool_backward(4, 2));
TORCH_TPU_LOWERING(fractional_max_pool3d_backward,
                   {"fractional_max_pool3d_backward", "fractional_max_pool3d_backward.grad_input"},
                   max_pool_backward(4, 3));
TORCH_TPU_LOWERING(avg_pool2d, {"avg_pool2d", "avg_pool2d.out"}, over(avg_pool_forward, 2));
TORCH_TPU_LOWERING(avg_pool3d, {"avg_pool3d", "avg_pool3d.out"}, over(avg_pool_forward, 3));
TORCH_TPU_LOWERING(avg_pool2d_backward, {"avg_pool2d_backward", "avg_pool2d_backward.grad_input"},
                   over(avg_pool_backward, 2));
TORCH_TPU_LOWERING(avg_pool3d_backward, {"avg_pool3d_backward", "avg_pool3d_backward.grad_input"},
                   over(avg_pool_backward, 3));
TORCH_TPU_LOWERING(adaptive_avg_pool2d, {"_adaptive_avg_pool2d", "_adaptive_avg_pool2d.out", "adaptive_avg_pool2d.out"},
                   over(adaptive_avg_pool, 2));
TORCH_TPU_LOWERING(adaptive_avg_pool3d, {"_adaptive_avg_pool3d", "_adaptive_avg_pool3d.out", "adaptive_avg_pool3d.out"},
                   over(adaptive_avg_pool, 3));
TORCH_TPU_LOWERING(adaptive_avg_pool2d_backward,
                   {"_adaptive_avg_pool2d_backward", "_adaptive_avg_pool2d_backward.out"},
                   over(adaptive_avg_pool_backward, 2));
TORCH_TPU_LOWERING(adaptive_avg_pool3d_backward,
                   {"_adaptive_avg_pool3d_backward", "_adaptive_avg_pool3d_backward.out",
                    "adaptive_avg_pool3d_backward.grad_input"},
                   over(adaptive_avg_pool_backward, 3));
TORCH_TPU_LOWERING(adaptive_max_pool2d, {"adaptive_max_pool2d", "adaptive_max_pool2d.out"},
                   over(adaptive_max_pool, 2));
TORCH_TPU_LOWERING(adaptive_max_pool3d, {"adaptive_max_pool3d", "adaptive_max_pool3d.out"},
                   over(adaptive_max_pool, 3));
TORCH_TPU_LOWERING(adaptive_max_pool2d_backward,
                   {"adaptive_max_pool2d_backward", "adaptive_max_pool2d_backward.grad_input"},
                   max_pool_backward(2, 2));
TORCH_TPU_LOWERING(adaptive_max_pool3d_backward,
                   {"adaptive_max_pool3d_backward", "adaptive_max_pool3d_backward.grad_input"},
                   max_pool_backward(2, 3));

}  // namespace torch_tpu::ops
