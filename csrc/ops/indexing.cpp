// Indexing: gathers and scatters along a dim or at points, advanced indexing, masks,
// embeddings. Negative indices wrap as on CPU. Indices still out of range are clamped by
// gather and dropped by scatter (XLA's semantics; CUDA's result is undefined too):
// checking device-resident indices would need a sync per op.
#include "ops/indexing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/elementwise.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

std::string field(const char* name, const std::vector<int64_t>& dims) {
  if (dims.empty()) return "";
  std::string s = std::string(name) + " = [";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "], ";
}

std::vector<int64_t> iota_list(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

// `idx` has its index vector in the last dim.
Value gather(hlo::Builder& b, const Value& x, const Value& idx,
             const std::vector<int64_t>& offset_dims, const std::vector<int64_t>& collapsed,
             const std::vector<int64_t>& index_map, const std::vector<int64_t>& slice_sizes,
             const std::vector<int64_t>& result_shape) {
  std::string attrs =
      "dimension_numbers = #stablehlo.gather<" + field("offset_dims", offset_dims) +
      field("collapsed_slice_dims", collapsed) + field("start_index_map", index_map) +
      "index_vector_dim = " + std::to_string(idx.type.rank() - 1) +
      ">, slice_sizes = " + hlo::i64_array(slice_sizes) + ", indices_are_sorted = false";
  return b.emit("stablehlo.gather", {x, idx}, attrs, TensorType{x.type.dtype, result_shape});
}

enum class Combine { Replace, Add, Mul, Max, Min };

std::string combiner(hlo::Builder& b, Combine c, DType dtype) {
  TensorType s{dtype, {}};
  return b.region({s, s}, [c](hlo::Builder& r, const V& a) {
    const bool pred = a[0].type.dtype == DType::Pred;
    Binary op = Binary::Add;
    switch (c) {
      case Combine::Replace: return V{a[1]};
      case Combine::Add: op = pred ? Binary::Or : Binary::Add; break;
      case Combine::Mul: op = pred ? Binary::And : Binary::Multiply; break;
      case Combine::Max: op = pred ? Binary::Or : Binary::Maximum; break;
      case Combine::Min: op = pred ? Binary::And : Binary::Minimum; break;
    }
    return V{r.binary(op, a[0], a[1])};
  });
}

Value scatter(hlo::Builder& b, const Value& x, const Value& idx, const Value& updates,
              const std::vector<int64_t>& window_dims, const std::vector<int64_t>& inserted,
              const std::vector<int64_t>& index_map, Combine c) {
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<" + field("update_window_dims", window_dims) +
      field("inserted_window_dims", inserted) + field("scatter_dims_to_operand_dims", index_map) +
      "index_vector_dim = " + std::to_string(idx.type.rank() - 1) +
      ">, indices_are_sorted = false, unique_indices = false";
  Value u = b.convert(updates, x.type.dtype);
  return b.emit("stablehlo.scatter", {x, idx, u}, attrs, x.type, {combiner(b, c, x.type.dtype)});
}

// Python-style negative indices, as s64.
Value wrap(hlo::Builder& b, const Value& index, int64_t size) {
  Value i = b.convert(index, DType::S64);
  Value negative = b.compare(Compare::LT, i, b.full(0, i.type));
  return b.select(negative, b.binary(Binary::Add, i, b.full(static_cast<double>(size), i.type)), i);
}

// Coordinates [index.shape..., rank] for point gathers/scatters along `dim`: the wrapped
// index in `dim`, the position itself in every other dim.
Value dim_coords(hlo::Builder& b, const Value& index, int64_t dim, int64_t size) {
  std::vector<int64_t> shape = index.type.shape;
  const int64_t rank = index.type.rank();
  shape.push_back(1);
  V parts;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = d == dim ? wrap(b, index, size) : b.iota({DType::S64, index.type.shape}, d);
    parts.push_back(b.reshape(c, shape));
  }
  return b.concatenate(parts, rank);
}

Value point_gather(hlo::Builder& b, const Value& x, const Value& coords) {
  const int64_t rank = x.type.rank();
  std::vector<int64_t> shape(coords.type.shape.begin(), coords.type.shape.end() - 1);
  return gather(b, x, coords, {}, iota_list(0, rank), iota_list(0, rank),
                std::vector<int64_t>(rank, 1), shape);
}

Value point_scatter(hlo::Builder& b, const Value& x, const Value& coords, const Value& updates,
                    Combine c) {
  const int64_t rank = x.type.rank();
  return scatter(b, x, coords, updates, {}, iota_list(0, rank), iota_list(0, rank), c);
}

// Rank-0 operands of the dim ops behave as 1-element vectors.
Value at_least_1d(hlo::Builder& b, const Value& x) {
  return x.type.rank() == 0 ? b.reshape(x, {1}) : x;
}

// x with the slices of `updates` (x's shape but index.numel() along `dim`) combined into
// x's slices at `index`.
Value scatter_along(hlo::Builder& b, const Value& x, int64_t dim, const Value& index,
                    const Value& updates, Combine c) {
  const int64_t n = index.type.numel();
  if (n == 0 || x.type.numel() == 0) return x;
  Value idx = b.reshape(wrap(b, index, x.type.shape[dim]), {n, 1});
  std::vector<int64_t> window;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (d != dim) window.push_back(d);
  return scatter(b, x, idx, updates, window, {dim}, {dim}, c);
}

Value splat_like(hlo::Builder& b, const Value& scalar, const TensorType& like) {
  return broadcast_to(b, b.convert(scalar, like.dtype), like.shape);
}

// ---- gather / scatter -------------------------------------------------------------------

V lower_gather(Node& n) {
  Value self = at_least_1d(n.b, n.in(0));
  Value index = at_least_1d(n.b, n.in(2));
  if (n.out().numel() == 0) return {n.b.full(0, n.out())};
  const int64_t dim = wrap_dim(n.i64(1), n.in(0).type.rank());
  Value r = point_gather(n.b, self, dim_coords(n.b, index, dim, self.type.shape[dim]));
  return {n.b.reshape(r, n.out().shape)};
}

Combine reduce_kind(const std::string& reduce) {
  if (reduce == "sum" || reduce == "add" || reduce == "mean") return Combine::Add;
  if (reduce == "prod" || reduce == "multiply") return Combine::Mul;
  if (reduce == "amax") return Combine::Max;
  if (reduce == "amin") return Combine::Min;
  throw std::invalid_argument("scatter: unknown reduce " + reduce);
}

// Rounds toward -inf for the integer mean, as PyTorch does (counts are positive).
Value floor_div_int(hlo::Builder& b, const Value& x, const Value& count) {
  Value q = b.binary(Binary::Divide, x, count);
  Value inexact = b.compare(Compare::NE, b.binary(Binary::Multiply, q, count), x);
  Value negative = b.compare(Compare::LT, x, b.full(0, x.type));
  return b.select(b.binary(Binary::And, inexact, negative),
                  b.binary(Binary::Subtract, q, b.full(1, q.type)), q);
}

// scatter / scatter_add / scatter_reduce: self(0), dim(1), index(2), src or value(3).
// `reduce` is empty for a plain scatter; `include_self` as scatter_reduce's flag.
Value scatter_op(Node& n, const std::string& reduce, bool include_self) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  Value self = at_least_1d(b, b.convert(n.in(0), out.dtype));
  Value index = at_least_1d(b, n.in(2));
  if (index.type.numel() == 0 || self.type.numel() == 0) return b.reshape(self, out.shape);
  const int64_t dim = wrap_dim(n.i64(1), n.in(0).type.rank());
  Value src = n.in(3);
  TensorType utype{out.dtype, index.type.shape};
  Value updates;
  if (src.type.rank() == 0) {
    updates = splat_like(b, src, utype);  // scatter.value, or a 0-d src
  } else {
    updates = b.convert(b.slice(src, std::vector<int64_t>(src.type.rank(), 0), index.type.shape,
                                std::vector<int64_t>(src.type.rank(), 1)),
                        out.dtype);
  }
  Value coords = dim_coords(b, index, dim, self.type.shape[dim]);
  if (reduce.empty())
    return b.reshape(point_scatter(b, self, coords, updates, Combine::Replace), out.shape);
  Combine c = reduce_kind(reduce);
  const bool mean = reduce == "mean";
  // Low-precision sums and means accumulate in f32.
  DType acc = (c == Combine::Add || c == Combine::Mul) ? math_dtype(out.dtype) : out.dtype;
  Value x = b.convert(self, acc);
  if (!include_self) {
    Value identity = c == Combine::Max   ? lowest(b, acc)
                     : c == Combine::Min ? highest(b, acc)
                                         : b.constant(c == Combine::Mul ? 1 : 0, acc);
    x = point_scatter(b, x, coords, b.broadcast_in_dim(identity, utype.shape, {}),
                      Combine::Replace);
  }
  x = point_scatter(b, x, coords, b.convert(updates, acc), c);
  if (mean) {
    TensorType ctype{acc, self.type.shape};
    Value count = point_scatter(b, b.full(include_self ? 1 : 0, ctype), coords,
                                b.full(1, {acc, utype.shape}), Combine::Add);
    count = b.select(b.compare(Compare::EQ, count, b.full(0, ctype)), b.full(1, ctype), count);
    x = hlo::is_float(acc) ? b.binary(Binary::Divide, x, count) : floor_div_int(b, x, count);
  }
  return b.reshape(b.convert(x, out.dtype), out.shape);
}

V lower_scatter(Node& n) { return {scatter_op(n, "", true)}; }
V lower_scatter_reduce_legacy(Node& n) { return {scatter_op(n, n.str(4), true)}; }
V lower_scatter_add(Node& n) { return {scatter_op(n, "sum", true)}; }
V lower_scatter_reduce(Node& n) { return {scatter_op(n, n.str(4), n.flag(5))}; }

// ---- index_select / index_add / index_copy / index_fill -----------------------------------

V lower_index_select(Node& n) {
  if (n.out().numel() == 0) return {n.b.full(0, n.out())};
  Value self = at_least_1d(n.b, n.in(0));
  const int64_t dim = wrap_dim(n.i64(1), n.in(0).type.rank());
  return {n.b.reshape(select_along(n.b, self, dim, n.in(2)), n.out().shape)};
}

// self(0), dim(1), index(2), source/value(3): the source's slices (or the value)
// combined into self's slices at `index` along dim.
Value index_update(Node& n, Combine c, bool fill) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  Value self = at_least_1d(b, b.convert(n.in(0), out.dtype));
  const int64_t dim = wrap_dim(n.i64(1), n.in(0).type.rank());
  std::vector<int64_t> ushape = self.type.shape;
  ushape[dim] = n.in(2).type.numel();
  Value updates = fill ? splat_like(b, n.in(3), {out.dtype, ushape})
                       : b.reshape(b.convert(n.in(3), out.dtype), ushape);
  if (c == Combine::Add && n.has(4) && out.dtype != DType::Pred) {
    DType acc = math_dtype(out.dtype);
    updates =
        b.binary(Binary::Multiply, b.convert(updates, acc), splat_like(b, n.in(4), {acc, ushape}));
    Value r = scatter_along(b, b.convert(self, acc), dim, n.in(2), updates, c);
    return b.reshape(b.convert(r, out.dtype), out.shape);
  }
  return b.reshape(scatter_along(b, self, dim, n.in(2), updates, c), out.shape);
}

// nonzero_static(self, size, fill_value): the first `size` coordinates of nonzero
// elements, the rows past their count filled with fill_value.
V lower_nonzero_static(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const TensorType& out = n.out();
  const int64_t size = out.shape[0], numel = x.type.numel();
  if (out.numel() == 0) return {b.full(0, out)};
  const double fill = static_cast<double>(n.i64(2));
  if (numel == 0) return {b.full(fill, out)};
  V nz = lower_nonzero_flat(b, x);
  Value positions = nz[1];
  if (size <= numel) {
    positions = b.slice(positions, {0}, {size}, {1});
  } else {
    positions = b.pad(positions, b.constant_int(0, DType::S64), {0}, {size - numel}, {0});
  }
  Value coords = unravel(b, positions, x.type.shape);
  Value row = b.iota({DType::S64, out.shape}, 0);
  Value past = b.compare(Compare::GE, row, b.broadcast_in_dim(nz[0], out.shape, {}));
  return {b.select(past, b.full(fill, out), b.convert(coords, out.dtype))};
}

// index_reduce(self, dim, index, source, reduce, include_self): source's slices combined
// into self's slices at `index` along dim by prod / mean / amax / amin; without
// include_self the indexed slices start from the reduction's identity. The mean divides
// by the count of contributions (plus one with include_self; slices without any keep
// their value), rounding toward -inf for integers, as PyTorch does.
V lower_index_reduce(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const std::string& reduce = n.str(4);
  const bool include_self = n.flag(5);
  Value self = at_least_1d(b, b.convert(n.in(0), out.dtype));
  const int64_t dim = wrap_dim(n.i64(1), n.in(0).type.rank());
  const Value& index = n.in(2);
  if (index.type.numel() == 0 || self.type.numel() == 0) return {b.reshape(self, out.shape)};
  Combine c = reduce_kind(reduce);
  const bool mean = reduce == "mean";
  DType acc = (c == Combine::Add || c == Combine::Mul) ? math_dtype(out.dtype) : out.dtype;
  std::vector<int64_t> ushape = self.type.shape;
  ushape[dim] = index.type.numel();
  Value updates = b.reshape(b.convert(n.in(3), acc), ushape);
  Value x = b.convert(self, acc);
  if (!include_self) {
    Value identity = c == Combine::Max   ? lowest(b, acc)
                     : c == Combine::Min ? highest(b, acc)
                                         : b.constant(c == Combine::Mul ? 1 : 0, acc);
    x = scatter_along(b, x, dim, index, b.broadcast_in_dim(identity, ushape, {}), Combine::Replace);
  }
  x = scatter_along(b, x, dim, index, updates, c);
  if (mean) {
    TensorType ctype{acc, self.type.shape};
    Value count = scatter_along(b, b.full(include_self ? 1 : 0, ctype), dim, index,
                                b.full(1, {acc, ushape}), Combine::Add);
    count = b.select(b.compare(Compare::EQ, count, b.full(0, ctype)), b.full(1, ctype), count);
    x = hlo::is_float(acc) ? b.binary(Binary::Divide, x, count) : floor_div_int(b, x, count);
  }
  return {b.reshape(b.convert(x, out.dtype), out.shape)};
}

V lower_index_add(Node& n) { return {index_update(n, Combine::Add, false)}; }
V lower_index_copy(Node& n) { return {index_update(n, Combine::Replace, false)}; }
V lower_index_fill(Node& n) { return {index_update(n, Combine::Replace, true)}; }

// ---- take / put -------------------------------------------------------------------------

V lower_take(Node& n) {
  if (n.out().numel() == 0) return {n.b.full(0, n.out())};
  Value flat = n.b.reshape(n.in(0), {n.in(0).type.numel()});
  return {n.b.gather_flat(flat, wrap(n.b, n.in(1), flat.type.numel()))};
}

V lower_put(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const int64_t numel = out.numel();
  const int64_t k = n.in(1).type.numel();
  if (k == 0 || numel == 0) return {b.convert(n.in(0), out.dtype)};
  Value flat = b.reshape(b.convert(n.in(0), out.dtype), {numel});
  Value idx = b.reshape(wrap(b, n.in(1), numel), {k, 1});
  Value src = b.reshape(b.convert(n.in(2), out.dtype), {k});
  Combine c = n.flag(3) ? Combine::Add : Combine::Replace;
  return {b.reshape(scatter(b, flat, idx, src, {}, {0}, {0}, c), out.shape)};
}

// ---- advanced indexing ------------------------------------------------------------------

struct Advanced {
  std::vector<int64_t> dims;         // indexed dims
  std::vector<int64_t> shape;        // the result's shape
  std::vector<int64_t> offset_dims;  // result dims that are self's unindexed dims
  Value coords;                      // [broadcast index shape..., dims.size()]
};

Advanced advanced(hlo::Builder& b, const Value& self,
                  const std::vector<std::optional<Value>>& indices) {
  Advanced a;
  std::vector<int64_t> bshape;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    a.dims.push_back(static_cast<int64_t>(i));
    bshape = a.dims.size() == 1 ? indices[i]->type.shape
                                : broadcast_shapes(bshape, indices[i]->type.shape);
  }
  std::vector<int64_t> cshape = bshape;
  cshape.push_back(1);
  V parts;
  for (int64_t d : a.dims)
    parts.push_back(
        b.reshape(wrap(b, broadcast_to(b, *indices[d], bshape), self.type.shape[d]), cshape));
  a.coords = b.concatenate(parts, static_cast<int64_t>(bshape.size()));
  const bool adjacent = a.dims.back() - a.dims.front() + 1 == static_cast<int64_t>(a.dims.size());
  const int64_t rank = self.type.rank();
  const int64_t nb = static_cast<int64_t>(bshape.size());
  if (adjacent) {
    const int64_t first = a.dims.front();
    a.shape.assign(self.type.shape.begin(), self.type.shape.begin() + first);
    a.shape.insert(a.shape.end(), bshape.begin(), bshape.end());
    a.shape.insert(a.shape.end(), self.type.shape.begin() + a.dims.back() + 1,
                   self.type.shape.end());
    for (int64_t d = 0; d < first; ++d) a.offset_dims.push_back(d);
    for (int64_t d = first + nb; d < static_cast<int64_t>(a.shape.size()); ++d)
      a.offset_dims.push_back(d);
  } else {
    a.shape = bshape;
    for (int64_t d = 0; d < rank; ++d) {
      bool indexed = false;
      for (int64_t x : a.dims) indexed |= x == d;
      if (indexed) continue;
      a.offset_dims.push_back(static_cast<int64_t>(a.shape.size()));
      a.shape.push_back(self.type.shape[d]);
    }
  }
  return a;
}

std::vector<int64_t> slice_sizes(const Value& self, const std::vector<int64_t>& dims) {
  std::vector<int64_t> s = self.type.shape;
  for (int64_t d : dims) s[d] = 1;
  return s;
}

// ---- masked ops -------------------------------------------------------------------------

V lower_masked_fill(Node& n) {
  const TensorType& out = n.out();
  Value self = broadcast_to(n.b, n.b.convert(n.in(0), out.dtype), out.shape);
  Value mask = broadcast_to(n.b, n.b.convert(n.in(1), DType::Pred), out.shape);
  return {n.b.select(mask, splat_like(n.b, n.in(2), out), self)};
}

// The rank of each true element among the true elements, in row-major order.
Value mask_rank(hlo::Builder& b, const Value& mask_flat) {
  Value m = b.convert(mask_flat, DType::S64);
  return b.binary(Binary::Subtract, cumsum_1d(b, m), b.full(1, m.type));
}

V lower_masked_scatter(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  Value self = broadcast_to(b, b.convert(n.in(0), out.dtype), out.shape);
  const int64_t numel = out.numel();
  const int64_t k = n.in(2).type.numel();
  if (numel == 0 || k == 0) return {self};
  Value mask = b.reshape(broadcast_to(b, b.convert(n.in(1), DType::Pred), out.shape), {numel});
  Value rank = mask_rank(b, mask);
  rank = b.binary(Binary::Minimum, rank, b.full(static_cast<double>(k - 1), rank.type));
  rank = b.binary(Binary::Maximum, rank, b.full(0, rank.type));
  Value source = b.reshape(b.convert(n.in(2), out.dtype), {k});
  Value picked = b.reshape(b.gather_flat(source, rank), out.shape);
  return {b.select(b.reshape(mask, out.shape), picked, self)};
}

// ---- embeddings -------------------------------------------------------------------------

// For each of the 1-d indices `idx`, how often its value occurs in `idx`, as `dtype`.
Value index_counts(hlo::Builder& b, const Value& idx, int64_t num_weights, DType dtype) {
  const int64_t m = idx.type.numel();
  Value counts = scatter(b, b.full(0, {dtype, {num_weights}}), b.reshape(idx, {m, 1}),
                         b.full(1, {dtype, {m}}), {}, {0}, {0}, Combine::Add);
  return b.gather_flat(counts, idx);
}

// The p-norm of each row of x [N, D] (in x's float dtype), p static.
Value row_norms(hlo::Builder& b, const Value& x, double p) {
  Value a = b.unary(Unary::Abs, x);
  DType dtype = x.type.dtype;
  if (std::isinf(p)) return reduce_extreme(b, a, {1}, p > 0);
  if (p == 0)
    return lower_sum(b, b.convert(b.compare(Compare::NE, a, b.full(0, a.type)), dtype), {1}, false,
                     dtype);
  if (p == 1) return lower_sum(b, a, {1}, false, dtype);
  if (p == 2)
    return b.unary(Unary::Sqrt, lower_sum(b, b.binary(Binary::Multiply, a, a), {1}, false, dtype));
  Value powered = lower_sum(b, b.binary(Binary::Power, a, b.full(p, a.type)), {1}, false, dtype);
  return b.binary(Binary::Power, powered, b.full(1 / p, powered.type));
}

// embedding_renorm(self [N, D], indices, max_norm, norm_type): self with each row that
// `indices` names scaled by max_norm / (norm + 1e-7) where its norm exceeds max_norm
// (F.embedding's max_norm). As on CPU, the norm and the scale are rounded to self's dtype.
V lower_embedding_renorm(Node& n) {
  hlo::Builder& b = n.b;
  const Value& self = n.in(0);
  const int64_t rows = self.type.shape.at(0), m = n.in(1).type.numel();
  if (m == 0 || self.type.numel() == 0) return {self};
  const DType acc = math_dtype(self.type.dtype);
  const double max_norm = n.f64(2);
  Value x = b.convert(self, acc);
  Value norm = b.convert(b.convert(row_norms(b, x, n.f64(3)), self.type.dtype), acc);
  Value named = scatter(b, b.full(0, {DType::Pred, {rows}}),
                        b.reshape(wrap(b, b.reshape(n.in(1), {m}), rows), {m, 1}),
                        b.full(1, {DType::Pred, {m}}), {}, {0}, {0}, Combine::Add);
  Value scaled =
      b.binary(Binary::And, named, b.compare(Compare::GT, norm, b.full(max_norm, norm.type)));
  Value scale = b.binary(Binary::Divide, b.full(max_norm, norm.type),
                         b.binary(Binary::Add, norm, b.full(1e-7, norm.type)));
  scale = b.select(scaled, scale, b.full(1, scale.type));
  scale = b.convert(b.convert(scale, self.type.dtype), acc);
  Value out = b.binary(Binary::Multiply, x, b.broadcast_in_dim(scale, self.type.shape, {0}));
  return {b.convert(out, self.type.dtype)};
}

// grad_output(0) [..., D], indices(1), num_weights(2), padding_idx(3), scale_grad_by_freq(4)
V lower_embedding_dense_backward(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const int64_t num_weights = out.shape[0], dim = out.shape[1];
  const int64_t m = n.in(1).type.numel();
  if (m == 0 || out.numel() == 0) return {b.full(0, out)};
  DType acc = math_dtype(out.dtype);
  Value idx = b.reshape(b.convert(n.in(1), DType::S64), {m});
  Value g = b.reshape(b.convert(n.in(0), acc), {m, dim});
  Value keep = b.compare(Compare::NE, idx, b.full(static_cast<double>(n.i64(3)), idx.type));
  g = b.select(b.broadcast_in_dim(keep, {m, dim}, {0}), g, b.full(0, g.type));
  if (n.flag(4)) {
    Value counts = index_counts(b, idx, num_weights, acc);
    g = b.binary(Binary::Divide, g, b.broadcast_in_dim(counts, {m, dim}, {0}));
  }
  Value grad = scatter(b, b.full(0, {acc, out.shape}), b.reshape(idx, {m, 1}), g, {1}, {0}, {0},
                       Combine::Add);
  return {b.convert(grad, out.dtype)};
}

enum BagMode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

struct Bags {
  Value idx;    // s64 [m]
  Value bag;    // s64 [m]: each index's bag, or num_bags where it takes no part
  Value count;  // acc [num_bags]: the indices in each bag
};

// Bag membership from offsets: index i is in bag j when offsets[j] <= i < offsets[j+1].
Bags make_bags(hlo::Builder& b, const Value& indices, const Value& offsets, int64_t num_bags,
               bool include_last_offset, int64_t padding_idx, DType acc) {
  const int64_t m = indices.type.numel();
  Bags g;
  g.idx = b.reshape(b.convert(indices, DType::S64), {m});
  Value off = b.convert(offsets, DType::S64);
  Value starts = b.slice(off, {0}, {num_bags}, {1});
  // One mark per bag start, then a running count gives each position's bag.
  Value marks = scatter(
      b, b.full(0, {DType::S64, {m + 1}}),
      b.reshape(b.binary(Binary::Minimum, starts, b.full(static_cast<double>(m), starts.type)),
                {num_bags, 1}),
      b.full(1, {DType::S64, {num_bags}}), {}, {0}, {0}, Combine::Add);
  Value bag = b.binary(Binary::Subtract, b.slice(cumsum_1d(b, marks), {0}, {m}, {1}),
                       b.full(1, {DType::S64, {m}}));
  Value valid =
      b.binary(Binary::And, b.compare(Compare::GE, bag, b.full(0, bag.type)),
               b.compare(Compare::NE, g.idx, b.full(static_cast<double>(padding_idx), g.idx.type)));
  if (include_last_offset) {
    Value end =
        b.broadcast_in_dim(b.reshape(b.slice(off, {num_bags}, {num_bags + 1}, {1}), {}), {m}, {});
    valid = b.binary(Binary::And, valid, b.compare(Compare::LT, b.iota({DType::S64, {m}}, 0), end));
  }
  g.bag = b.select(valid, bag, b.full(static_cast<double>(num_bags), bag.type));
  g.count = scatter(b, b.full(0, {acc, {num_bags}}), b.reshape(g.bag, {m, 1}),
                    b.full(1, {acc, {m}}), {}, {0}, {0}, Combine::Add);
  return g;
}

// weight(0), indices(1), offsets(2), scale_grad_by_freq(3), mode(4), sparse(5),
// per_sample_weights(6), include_last_offset(7), padding_idx(8)
// -> output, offset2bag, bag_size, max_indices
V lower_embedding_bag(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out(0);
  const int64_t num_bags = out.shape[0], dim = out.shape[1];
  const int64_t m = n.in(1).type.numel();
  const int64_t mode = n.i64(4);
  DType acc = math_dtype(out.dtype);
  V zeros;
  for (size_t i = 0; i < 4; ++i) zeros.push_back(b.full(0, n.out(i)));
  if (m == 0 || num_bags == 0) return zeros;
  Bags g = make_bags(b, n.in(1), n.in(2), num_bags, n.flag(7), n.i64(8), acc);
  Value rows = b.convert(select_along(b, n.in(0), 0, g.idx), acc);
  if (n.has(6))
    rows = b.binary(Binary::Multiply, rows,
                    b.broadcast_in_dim(b.convert(n.in(6), acc), {m, dim}, {0}));
  Value target = b.reshape(g.bag, {m, 1});
  Value bag_size = b.convert(g.count, n.out(2).dtype);
  bag_size = b.concatenate(
      {bag_size, b.full(0, {bag_size.type.dtype, {n.out(2).shape[0] - num_bags}})}, 0);
  Value offset2bag = b.convert(g.bag, n.out(1).dtype);
  Value empty = b.broadcast_in_dim(b.compare(Compare::EQ, g.count, b.full(0, g.count.type)),
                                   {num_bags, dim}, {0});
  TensorType otype{acc, out.shape};
  if (mode != kMax) {
    Value sum = scatter(b, b.full(0, otype), target, rows, {1}, {0}, {0}, Combine::Add);
    if (mode == kMean) {
      Value count = b.broadcast_in_dim(b.binary(Binary::Maximum, g.count, b.full(1, g.count.type)),
                                       out.shape, {0});
      sum = b.binary(Binary::Divide, sum, count);
    }
    return {b.convert(sum, out.dtype), offset2bag, bag_size, zeros[3]};
  }
  Value best = scatter(b, b.full(-INFINITY, otype), target, rows, {1}, {0}, {0}, Combine::Max);
  best = b.select(empty, b.full(0, otype), best);
  // The first index reaching each maximum, as CPU picks it.
  Value picked =
      gather(b, best,
             b.reshape(b.binary(Binary::Minimum, g.bag, b.full(num_bags - 1, g.bag.type)), {m, 1}),
             {1}, {0}, {0}, {1, dim}, {m, dim});
  Value pos = b.iota({DType::S64, {m, dim}}, 0);
  Value hit = b.compare(Compare::EQ, rows, picked);
  Value first = scatter(b, b.full(static_cast<double>(m), {DType::S64, out.shape}), target,
                        b.select(hit, pos, b.full(static_cast<double>(m), pos.type)), {1}, {0}, {0},
                        Combine::Min);
  Value idx_ext = b.concatenate({g.idx, b.full(-1, {DType::S64, {1}})}, 0);
  Value max_indices =
      b.reshape(b.gather_flat(idx_ext, b.reshape(first, {num_bags * dim})), out.shape);
  return {b.convert(best, out.dtype), offset2bag, bag_size, b.convert(max_indices, n.out(3).dtype)};
}

// The weight gradient of an embedding bag; `a` maps the schema's arguments.
struct BagBackwardArgs {
  size_t grad, indices, offset2bag, bag_size, max_indices, num_weights, scale, mode, psw, padding;
};

Value embedding_bag_backward(Node& n, const BagBackwardArgs& a) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const int64_t num_weights = out.shape[0], dim = out.shape[1];
  const int64_t m = n.in(a.indices).type.numel();
  const Value& grad = n.in(a.grad);
  const int64_t num_bags = grad.type.shape[0];
  if (m == 0 || num_bags == 0 || out.numel() == 0) return b.full(0, out);
  DType acc = math_dtype(out.dtype);
  TensorType wtype{acc, out.shape};
  Value g = b.convert(grad, acc);
  if (n.i64(a.mode) == kMax) {
    Value mi = b.convert(n.in(a.max_indices), DType::S64);
    mi = b.select(b.compare(Compare::LT, mi, b.full(0, mi.type)),
                  b.full(static_cast<double>(num_weights), mi.type), mi);
    Value coords = b.concatenate(
        {b.reshape(mi, {num_bags, dim, 1}), b.iota({DType::S64, {num_bags, dim, 1}}, 1)}, 2);
    return b.convert(point_scatter(b, b.full(0, wtype), coords, g, Combine::Add), out.dtype);
  }
  Value idx = b.reshape(b.convert(n.in(a.indices), DType::S64), {m});
  Value bag = b.convert(n.in(a.offset2bag), DType::S64);
  Value valid = b.binary(
      Binary::And, b.compare(Compare::LT, bag, b.full(num_bags, bag.type)),
      b.compare(Compare::NE, idx, b.full(static_cast<double>(n.i64(a.padding)), idx.type)));
  Value safe_bag = b.binary(Binary::Minimum, bag, b.full(num_bags - 1, bag.type));
  Value rows = select_along(b, g, 0, safe_bag);
  if (n.i64(a.mode) == kMean) {
    Value size = b.convert(b.gather_flat(n.in(a.bag_size), safe_bag), acc);
    size = b.binary(Binary::Maximum, size, b.full(1, size.type));
    rows = b.binary(Binary::Divide, rows, b.broadcast_in_dim(size, {m, dim}, {0}));
  }
  if (n.has(a.psw))
    rows = b.binary(Binary::Multiply, rows,
                    b.broadcast_in_dim(b.convert(n.in(a.psw), acc), {m, dim}, {0}));
  if (n.flag(a.scale))
    rows = b.binary(Binary::Divide, rows,
                    b.broadcast_in_dim(index_counts(b, idx, num_weights, acc), {m, dim}, {0}));
  rows = b.select(b.broadcast_in_dim(valid, {m, dim}, {0}), rows, b.full(0, rows.type));
  Value r = scatter(b, b.full(0, wtype), b.reshape(idx, {m, 1}), rows, {1}, {0}, {0}, Combine::Add);
  return b.convert(r, out.dtype);
}

// grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
// scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx
V lower_embedding_bag_backward(Node& n) {
  return {embedding_bag_backward(n, {0, 1, 3, 4, 5, 6, 7, 8, 10, 11})};
}
// grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
// mode, per_sample_weights, padding_idx
V lower_embedding_bag_dense_backward(Node& n) {
  return {embedding_bag_backward(n, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})};
}

// grad, weight, indices, offsets, offset2bag, mode, padding_idx: d(out)/d(per_sample_weights)
V lower_embedding_bag_psw_backward(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const int64_t m = out.numel();
  const Value& grad = n.in(0);
  const int64_t num_bags = grad.type.shape[0];
  if (m == 0 || num_bags == 0) return {b.full(0, out)};
  DType acc = math_dtype(out.dtype);
  Value idx = b.reshape(b.convert(n.in(2), DType::S64), {m});
  Value bag = b.convert(n.in(4), DType::S64);
  Value valid =
      b.binary(Binary::And, b.compare(Compare::LT, bag, b.full(num_bags, bag.type)),
               b.compare(Compare::NE, idx, b.full(static_cast<double>(n.i64(6)), idx.type)));
  Value safe_bag = b.binary(Binary::Minimum, bag, b.full(num_bags - 1, bag.type));
  Value g = select_along(b, b.convert(grad, acc), 0, safe_bag);
  Value w = select_along(b, b.convert(n.in(1), acc), 0, idx);
  Value dot = lower_sum(b, b.binary(Binary::Multiply, g, w), {1}, false, acc);
  return {b.convert(b.select(valid, dot, b.full(0, dot.type)), out.dtype)};
}

// Inclusive prefix sums along dim 1 of a 2-d value: out[r, j] = sum over k <= j of
// x[r, k], as one reduction over a masked [rows, cols, cols] broadcast. A reduction is
// a fusion root, so XLA materialises it instead of recomputing it in its consumers.
Value scan_rows(hlo::Builder& b, const Value& x) {
  const int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  std::vector<int64_t> cube{rows, cols, cols};
  Value wide = b.broadcast_in_dim(x, cube, {0, 2});
  TensorType it{DType::S32, cube};
  Value keep = b.compare(Compare::LE, b.iota(it, 2), b.iota(it, 1));
  Value masked = b.select(keep, wide, b.full(0, wide.type));
  return b.reduce(masked, b.constant(0, x.type.dtype), {2}, hlo::Binary::Add);
}

}  // namespace

Value select_along(hlo::Builder& b, const Value& x, int64_t dim, const Value& index) {
  const int64_t n = index.type.numel();
  Value idx = b.reshape(wrap(b, index, x.type.shape[dim]), {n, 1});
  std::vector<int64_t> offset, slice = x.type.shape, shape = x.type.shape;
  for (int64_t d = 0; d < x.type.rank(); ++d)
    if (d != dim) offset.push_back(d);
  slice[dim] = 1;
  shape[dim] = n;
  return gather(b, x, idx, offset, {dim}, {dim}, slice, shape);
}

Value add_along(hlo::Builder& b, const Value& x, int64_t dim, const Value& index,
                const Value& updates) {
  return scatter_along(b, x, dim, index, updates, Combine::Add);
}

Value cumsum_1d(hlo::Builder& b, const Value& x) {
  // Blocks of kBlock scanned in place, then the block totals scanned recursively and
  // added back: O(n * kBlock) work in log_kBlock(n) levels. (A Hillis-Steele scan's
  // log2(n) shifted adds get fused by XLA:CPU into loops that recompute earlier steps:
  // 0.7 s for 1M elements.)
  constexpr int64_t kBlock = 32;
  const int64_t n = x.type.shape.at(0);
  if (n <= kBlock) return b.reshape(scan_rows(b, b.reshape(x, {1, n})), {n});
  const int64_t rows = (n + kBlock - 1) / kBlock;
  Value zero = b.constant(0, x.type.dtype);
  Value padded = b.reshape(b.pad(x, zero, {0}, {rows * kBlock - n}, {0}), {rows, kBlock});
  Value inner = scan_rows(b, padded);
  Value totals = b.reshape(b.slice(inner, {0, kBlock - 1}, {rows, kBlock}, {1, 1}), {rows});
  Value before = b.binary(Binary::Subtract, cumsum_1d(b, totals), totals);
  Value r = b.binary(Binary::Add, inner, b.broadcast_in_dim(before, {rows, kBlock}, {0}));
  return b.slice(b.reshape(r, {rows * kBlock}), {0}, {n}, {1});
}

std::vector<Value> lower_nonzero_flat(hlo::Builder& b, const Value& x) {
  const int64_t n = x.type.numel();
  Value mask = b.convert(b.reshape(x, {n}), DType::Pred);
  Value count =
      b.reduce(b.convert(mask, DType::S64), b.constant(0, DType::S64), {0}, hlo::Binary::Add);
  // True elements go to their rank; the others to n, which the scatter drops.
  Value target =
      b.select(mask, mask_rank(b, mask), b.full(static_cast<double>(n), {DType::S64, {n}}));
  Value positions = scatter(b, b.full(0, {DType::S64, {n}}), b.reshape(target, {n, 1}),
                            b.iota({DType::S64, {n}}, 0), {}, {0}, {0}, Combine::Replace);
  return {count, positions};
}

Value unravel(hlo::Builder& b, const Value& flat, const std::vector<int64_t>& shape) {
  const int64_t n = flat.type.numel();
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) return b.full(0, {DType::S64, {n, 0}});
  int64_t stride = 1;
  std::vector<Value> coords(rank);
  for (int64_t d = rank - 1; d >= 0; --d) {
    Value c = b.binary(Binary::Divide, flat, b.full(static_cast<double>(stride), flat.type));
    c = b.binary(Binary::Remainder, c, b.full(static_cast<double>(shape[d]), flat.type));
    coords[d] = b.reshape(c, {n, 1});
    stride *= shape[d];
  }
  return b.concatenate(coords, 1);
}

Value lower_index(hlo::Builder& b, const Value& self,
                  const std::vector<std::optional<Value>>& indices) {
  bool any = false;
  for (const auto& i : indices) any |= i.has_value();
  if (!any) return self;
  Advanced a = advanced(b, self, indices);
  TensorType out{self.type.dtype, a.shape};
  if (out.numel() == 0) return b.full(0, out);
  return gather(b, self, a.coords, a.offset_dims, a.dims, a.dims, slice_sizes(self, a.dims),
                a.shape);
}

Value lower_index_put(hlo::Builder& b, const Value& self,
                      const std::vector<std::optional<Value>>& indices, const Value& values,
                      bool accumulate) {
  bool any = false;
  for (const auto& i : indices) any |= i.has_value();
  if (!any) {
    Value v = broadcast_to(b, b.convert(values, self.type.dtype), self.type.shape);
    return accumulate ? lower_add(b, self, v, b.constant(1, self.type.dtype), self.type.dtype) : v;
  }
  Advanced a = advanced(b, self, indices);
  if (TensorType{self.type.dtype, a.shape}.numel() == 0 || self.type.numel() == 0) return self;
  DType acc = accumulate ? math_dtype(self.type.dtype) : self.type.dtype;
  Value updates = broadcast_to(b, b.convert(values, acc), a.shape);
  Value r = scatter(b, b.convert(self, acc), a.coords, updates, a.offset_dims, a.dims, a.dims,
                    accumulate ? Combine::Add : Combine::Replace);
  return b.convert(r, self.type.dtype);
}

Value lower_repeat_interleave(hlo::Builder& b, const Value& repeats, int64_t total) {
  const int64_t n = repeats.type.numel();
  TensorType out{DType::S64, {total}};
  if (n == 0 || total == 0) return b.full(0, out);
  // Each element's end in the output marks where the next element starts.
  Value ends = cumsum_1d(b, b.reshape(b.convert(repeats, DType::S64), {n}));
  ends = b.binary(Binary::Minimum, ends, b.full(static_cast<double>(total), ends.type));
  Value marks = scatter(b, b.full(0, {DType::S64, {total + 1}}), b.reshape(ends, {n, 1}),
                        b.full(1, {DType::S64, {n}}), {}, {0}, {0}, Combine::Add);
  return b.slice(cumsum_1d(b, marks), {0}, {total}, {1});
}

// ---- compiled graphs ----------------------------------------------------------------------
// Eager mode runs embedding as index_select (a composite) and index / index_put through
// csrc/aten/indexing_kernels.cpp, which turns bool masks into integer indices by reading
// the count; a graph has static shapes, so its masks stay masks.

namespace {

bool is_mask(const Value& index) {
  return index.type.dtype == DType::Pred || index.type.dtype == DType::U8;
}

// self[mask] = values (+= with `accumulate`) for a bool mask covering self's dims
// [d, d + mask.rank): a select over the masked elements, each taking the row of `values`
// (broadcast to the indexing result, the true elements in dim d) that its rank among the
// true elements gives.
Value mask_put(hlo::Builder& b, const Value& self, int64_t d, const Value& mask,
               const Value& values, bool accumulate) {
  const std::vector<int64_t>& shape = self.type.shape;
  const int64_t k = mask.type.rank();
  if (k == 0) throw Unsupported("index_put: a 0-d mask index is not supported");
  // values against the indexing result's shape (the mask's elements collapse to dim d).
  std::vector<int64_t> vshape(shape.begin(), shape.begin() + d);
  vshape.push_back(1);
  vshape.insert(vshape.end(), shape.begin() + d + k, shape.end());
  std::vector<int64_t> padded(vshape.size() - std::min(vshape.size(), values.type.shape.size()), 1);
  padded.insert(padded.end(), values.type.shape.begin(), values.type.shape.end());
  vshape[d] = padded[d];
  DType dtype = accumulate ? math_dtype(self.type.dtype) : self.type.dtype;
  Value v = broadcast_to(b, b.convert(b.reshape(values, padded), dtype), vshape);
  Value m = b.convert(mask, DType::Pred);
  if (vshape[d] == 1) {
    std::vector<int64_t> spread = shape;
    for (int64_t i = d; i < d + k; ++i) spread[i] = 1;
    v = broadcast_to(b, b.reshape(v, spread), shape);
  } else {
    // One row per true element, in row-major order; rows past the count are unused.
    Value r = mask_rank(b, b.reshape(m, {mask.type.numel()}));
    r = b.binary(Binary::Maximum,
                 b.binary(Binary::Minimum, r, b.full(static_cast<double>(vshape[d] - 1), r.type)),
                 b.full(0, r.type));
    v = b.reshape(select_along(b, v, d, r), shape);
  }
  std::vector<int64_t> mask_dims;
  for (int64_t i = d; i < d + k; ++i) mask_dims.push_back(i);
  Value where = b.broadcast_in_dim(m, shape, mask_dims);
  Value x = b.convert(self, dtype);
  if (accumulate) v = b.binary(Binary::Add, x, v);
  return b.convert(b.select(where, v, x), self.type.dtype);
}

V graph_index(Node& n) {
  for (const auto& i : n.list(1))
    if (i && is_mask(*i)) throw Unsupported("index: a bool mask index has a data-dependent shape");
  return {lower_index(n.b, n.in(0), n.list(1))};
}

V graph_index_put(Node& n) {
  const auto& indices = n.list(1);
  int64_t present = 0, mask_at = -1;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (!indices[i]) continue;
    ++present;
    if (is_mask(*indices[i])) mask_at = static_cast<int64_t>(i);
  }
  if (mask_at < 0) return {lower_index_put(n.b, n.in(0), indices, n.in(2), n.flag(3))};
  if (present > 1)
    throw Unsupported(
        "index_put: a bool mask index with other indices has a "
        "data-dependent shape");
  return {mask_put(n.b, n.in(0), mask_at, *indices[mask_at], n.in(2), n.flag(3))};
}

// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): rows of weight.
V graph_embedding(Node& n) {
  if (n.out().numel() == 0) return {n.b.full(0, n.out())};
  return {n.b.reshape(select_along(n.b, n.in(0), 0, n.in(1)), n.out().shape)};
}

// _jagged_to_padded_dense_forward(values [total, ...], offsets [B + 1], max_lengths [L],
// padding_value): out[b, l] = values[offsets[b] + l] for l below batch b's length, else
// padding_value (a nested jagged tensor's to_padded_tensor). One jagged dim, as on CPU.
V lower_jagged_to_padded(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const std::vector<std::optional<Value>>& offsets = n.list(1);
  if (offsets.size() != 1 || !offsets[0])
    throw Refused("_jagged_to_padded_dense_forward(): only a single jagged dim is supported");
  const Value& values = n.in(0);
  const int64_t batch = out.shape[0], length = out.shape[1];
  if (out.numel() == 0) return {b.full(0, out)};
  Value off = b.convert(*offsets[0], DType::S64);
  auto part = [&](int64_t from) {
    return b.broadcast_in_dim(b.slice(off, {from}, {from + batch}, {1}), {batch, length}, {0});
  };
  Value start = part(0), stop = part(1);
  Value pos = b.binary(Binary::Add, start, b.iota({DType::S64, {batch, length}}, 1));
  Value valid = b.compare(Compare::LT, pos, stop);
  const int64_t total = values.type.shape[0];
  if (total == 0) return {b.full(n.f64(3), out)};
  pos = b.select(valid, pos, b.full(0, pos.type));
  Value rows = b.reshape(select_along(b, values, 0, b.reshape(pos, {batch * length})), out.shape);
  std::vector<int64_t> mask_dims{0, 1};
  Value mask = b.broadcast_in_dim(valid, out.shape, mask_dims);
  return {b.select(mask, rows, b.full(n.f64(3), out))};
}

// _assert_async(cond, msg), as graphs check index ranges (one_hot's decomposition): not
// checked, for the reason out-of-range indices are not (see the top of this file). It
// has no results; the graph may still ask for placeholders.
V graph_assert_async(Node& n) {
  V out;
  for (const TensorType& t : n.outputs) out.push_back(n.b.full(0, t));
  return out;
}

}  // namespace

TORCH_TPU_GRAPH_LOWERING(index, {"index.Tensor", "_unsafe_index.Tensor"}, graph_index);
TORCH_TPU_GRAPH_LOWERING(index_put, {"index_put", "_unsafe_index_put"}, graph_index_put);
TORCH_TPU_GRAPH_LOWERING(embedding, {"embedding"}, graph_embedding);
TORCH_TPU_GRAPH_LOWERING(assert_async, {"_assert_async", "_assert_async.msg"}, graph_assert_async);

TORCH_TPU_LOWERING(gather, {"gather", "gather.out"}, lower_gather);
TORCH_TPU_LOWERING(scatter,
                   {"scatter.src", "scatter_.src", "scatter.src_out", "scatter.value",
                    "scatter_.value", "scatter.value_out"},
                   lower_scatter);
TORCH_TPU_LOWERING(scatter_reduce_legacy,
                   {"scatter.reduce", "scatter_.reduce", "scatter.reduce_out",
                    "scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out"},
                   lower_scatter_reduce_legacy);
TORCH_TPU_LOWERING(scatter_add, {"scatter_add", "scatter_add_", "scatter_add.out"},
                   lower_scatter_add);
TORCH_TPU_LOWERING(scatter_reduce,
                   {"scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out"},
                   lower_scatter_reduce);
TORCH_TPU_LOWERING(index_select, {"index_select", "index_select.out"}, lower_index_select);
TORCH_TPU_LOWERING(jagged_to_padded, {"_jagged_to_padded_dense_forward"}, lower_jagged_to_padded);
TORCH_TPU_LOWERING(index_add, {"index_add", "index_add_", "index_add.out"}, lower_index_add);
TORCH_TPU_LOWERING(nonzero_static, {"nonzero_static", "nonzero_static.out"}, lower_nonzero_static);
TORCH_TPU_LOWERING(index_reduce, {"index_reduce", "index_reduce_", "index_reduce.out"},
                   lower_index_reduce);
TORCH_TPU_LOWERING(index_copy, {"index_copy", "index_copy_", "index_copy.out"}, lower_index_copy);
TORCH_TPU_LOWERING(index_fill,
                   {"index_fill.int_Scalar", "index_fill_.int_Scalar", "index_fill.int_Tensor",
                    "index_fill_.int_Tensor"},
                   lower_index_fill);
TORCH_TPU_LOWERING(take, {"take", "take.out"}, lower_take);
TORCH_TPU_LOWERING(put, {"put_"}, lower_put);
TORCH_TPU_LOWERING(masked_fill,
                   {"masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor",
                    "masked_fill_.Tensor"},
                   lower_masked_fill);
TORCH_TPU_LOWERING(masked_scatter, {"masked_scatter", "masked_scatter_"}, lower_masked_scatter);
TORCH_TPU_LOWERING(embedding_dense_backward,
                   {"embedding_dense_backward", "embedding_dense_backward.out"},
                   lower_embedding_dense_backward);
TORCH_TPU_LOWERING(embedding_renorm,
                   {"embedding_renorm", "embedding_renorm_", "embedding_renorm.out"},
                   lower_embedding_renorm);
TORCH_TPU_LOWERING(embedding_bag, {"_embedding_bag", "_embedding_bag_forward_only"},
                   lower_embedding_bag);
TORCH_TPU_LOWERING(embedding_bag_backward, {"_embedding_bag_backward"},
                   lower_embedding_bag_backward);
TORCH_TPU_LOWERING(embedding_bag_dense_backward, {"_embedding_bag_dense_backward"},
                   lower_embedding_bag_dense_backward);
TORCH_TPU_LOWERING(embedding_bag_psw_backward, {"_embedding_bag_per_sample_weights_backward"},
                   lower_embedding_bag_psw_backward);

}  // namespace torch_tpu::ops
