// Views, copies and scatters-into-slices as compiled graphs see them. Eager mode runs views
// as metadata on a shared storage; a functional graph has only values, so a view is the
// copy it reads (a reshape, transpose, slice...) and XLA removes what it can. Graph only.
#include <algorithm>

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

// PyTorch's clamping of a slice bound on a dim of `size`.
int64_t slice_bound(std::optional<int64_t> v, int64_t fallback, int64_t size) {
  int64_t x = v.value_or(fallback);
  if (x < 0) x += size;
  return std::clamp<int64_t>(x, 0, size);
}

// The elements start, start + step, ... of `x` along `dim`: `len` of them.
Value take_slice(hlo::Builder& b, const Value& x, int64_t dim, int64_t start, int64_t step,
                 int64_t len) {
  std::vector<int64_t> lo(x.type.rank(), 0), hi = x.type.shape, st(x.type.rank(), 1);
  lo[dim] = start;
  hi[dim] = start + (len - 1) * step + 1;
  st[dim] = step;
  return b.slice(x, lo, hi, st);
}

V reshape(Node& n) { return {n.b.reshape(n.in(0), n.out().shape)}; }
V identity(Node& n) { return {n.in(0)}; }
V convert(Node& n) { return {n.b.convert(n.in(0), n.out().dtype)}; }

V lower_permute(Node& n) {
  std::vector<int64_t> perm = n.ints(1);
  for (int64_t& d : perm) d = wrap_dim(d, n.in(0).type.rank());
  return {n.b.transpose(n.in(0), perm)};
}

V lower_transpose(Node& n) {
  const Value& x = n.in(0);
  std::vector<int64_t> perm(x.type.rank());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  if (perm.size() >= 2) {
    int64_t a = n.args.size() > 1 ? wrap_dim(n.i64(1), x.type.rank()) : 0;
    int64_t c = n.args.size() > 1 ? wrap_dim(n.i64(2), x.type.rank()) : 1;
    std::swap(perm[a], perm[c]);
  }
  return {n.b.transpose(x, perm)};
}

V lower_expand(Node& n) { return {broadcast_to(n.b, n.in(0), n.out().shape)}; }

V lower_slice(Node& n) {
  const Value& x = n.in(0);
  const TensorType& out = n.out();
  if (out.numel() == 0) return {n.b.full(0, out)};
  int64_t dim = wrap_dim(n.i64(1), x.type.rank());
  int64_t start = slice_bound(n.opt_i64(2), 0, x.type.shape[dim]);
  return {take_slice(n.b, x, dim, start, n.i64(4), out.shape[dim])};
}

V lower_select(Node& n) {
  const Value& x = n.in(0);
  int64_t dim = wrap_dim(n.i64(1), x.type.rank());
  int64_t index = n.i64(2);
  if (index < 0) index += x.type.shape[dim];
  return {n.b.reshape(take_slice(n.b, x, dim, index, 1, 1), n.out().shape)};
}

// aten::copy(self, src): src converted to self's dtype and broadcast to its shape.
V lower_copy(Node& n) { return {cast_to(n.b, n.in(1), n.out().dtype, n.out().shape)}; }

// split / split_with_sizes / unbind: consecutive pieces along `dim`.
LowerFn pieces(bool squeeze) {
  return [squeeze](Node& n) {
    const Value& x = n.in(0);
    int64_t dim = wrap_dim(n.i64(squeeze ? 1 : 2), x.type.rank());
    V out;
    int64_t start = 0;
    for (const TensorType& t : n.outputs) {
      int64_t len = squeeze ? 1 : t.shape[dim];
      if (t.numel() == 0) {
        out.push_back(n.b.full(0, t));
      } else {
        Value piece = take_slice(n.b, x, dim, start, 1, len);
        out.push_back(squeeze ? n.b.reshape(piece, t.shape) : piece);
      }
      start += len;
    }
    return out;
  };
}

// `self` with the elements start, start + step, ... along `dim` replaced by `src`.
Value scatter_slice(hlo::Builder& b, const Value& self, const Value& src, int64_t dim,
                    int64_t start, int64_t step) {
  const int64_t len = src.type.shape[dim];
  if (len == 0) return self;
  const int64_t size = self.type.shape[dim];
  const int64_t rank = self.type.rank();
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  low[dim] = start;
  high[dim] = size - (start + (len - 1) * step + 1);
  interior[dim] = step - 1;
  Value spread =
      b.pad(b.convert(src, self.type.dtype), b.constant(0, self.type.dtype), low, high, interior);
  // Positions along dim that the slice covers.
  TensorType index_type{DType::S64, self.type.shape};
  Value i = b.iota(index_type, dim);
  Value from = b.binary(Binary::Subtract, i, b.full(static_cast<double>(start), index_type));
  Value in_range = b.binary(
      Binary::And, b.compare(Compare::GE, from, b.full(0, index_type)),
      b.compare(Compare::LE, from, b.full(static_cast<double>((len - 1) * step), index_type)));
  Value on_step = b.compare(
      Compare::EQ, b.binary(Binary::Remainder, from, b.full(static_cast<double>(step), index_type)),
      b.full(0, index_type));
  return b.select(b.binary(Binary::And, in_range, on_step), spread, self);
}

V lower_slice_scatter(Node& n) {
  const Value& self = n.in(0);
  int64_t dim = wrap_dim(n.i64(2), self.type.rank());
  int64_t start = slice_bound(n.opt_i64(3), 0, self.type.shape[dim]);
  return {scatter_slice(n.b, self, n.in(1), dim, start, n.i64(5))};
}

V lower_select_scatter(Node& n) {
  const Value& self = n.in(0);
  int64_t dim = wrap_dim(n.i64(2), self.type.rank());
  int64_t index = n.i64(3);
  if (index < 0) index += self.type.shape[dim];
  std::vector<int64_t> shape = self.type.shape;
  shape[dim] = 1;
  return {scatter_slice(n.b, self, n.b.reshape(n.in(1), shape), dim, index, 1)};
}

// diagonal(self, offset, dim1, dim2): with dim1 and dim2 moved last and merged, the
// diagonal is every (n2 + 1)-th element from the first one on it.
struct Diagonal {
  std::vector<int64_t> perm;    // dim1 and dim2 moved last
  std::vector<int64_t> merged;  // the permuted shape with those two merged
  int64_t start = 0, step = 1;  // of the diagonal along the merged dim

  Diagonal(const TensorType& x, int64_t offset, int64_t dim1, int64_t dim2) {
    const int64_t rank = x.rank();
    const int64_t d1 = wrap_dim(dim1, rank), d2 = wrap_dim(dim2, rank);
    for (int64_t d = 0; d < rank; ++d)
      if (d != d1 && d != d2) {
        perm.push_back(d);
        merged.push_back(x.shape[d]);
      }
    perm.push_back(d1);
    perm.push_back(d2);
    const int64_t n2 = x.shape[d2];
    merged.push_back(x.shape[d1] * n2);
    start = offset >= 0 ? offset : -offset * n2;
    step = n2 + 1;
  }
  Value flat(hlo::Builder& b, const Value& x) const {
    return b.reshape(b.transpose(x, perm), merged);
  }
};

V lower_diagonal(Node& n) {
  const TensorType& out = n.out();
  if (out.numel() == 0) return {n.b.full(0, out)};
  Diagonal d(n.in(0).type, n.i64(1), n.i64(2), n.i64(3));
  return {take_slice(n.b, d.flat(n.b, n.in(0)), out.rank() - 1, d.start, d.step, out.shape.back())};
}

// diagonal_scatter(self, src, offset, dim1, dim2): self with that diagonal replaced by src.
V lower_diagonal_scatter(Node& n) {
  const Value& self = n.in(0);
  const Value& src = n.in(1);
  if (src.type.numel() == 0) return {self};
  Diagonal d(self.type, n.i64(2), n.i64(3), n.i64(4));
  Value flat = scatter_slice(n.b, d.flat(n.b, self), src, src.type.rank() - 1, d.start, d.step);
  std::vector<int64_t> permuted, inverse(d.perm.size());
  for (size_t i = 0; i < d.perm.size(); ++i) {
    permuted.push_back(self.type.shape[d.perm[i]]);
    inverse[d.perm[i]] = static_cast<int64_t>(i);
  }
  return {n.b.transpose(n.b.reshape(flat, permuted), inverse)};
}

// unfold(self, dimension, size, step): windows of `size` along `dimension`, `step` apart,
// as a new last dim.
V lower_unfold(Node& n) {
  const Value& x = n.in(0);
  const TensorType& out = n.out();
  if (out.numel() == 0) return {n.b.full(0, out)};
  const int64_t dim = wrap_dim(n.i64(1), std::max<int64_t>(x.type.rank(), 1));
  const int64_t size = n.i64(2), step = n.i64(3);
  if (x.type.rank() == 0) return {n.b.reshape(x, out.shape)};
  const int64_t count = out.shape[dim];
  std::vector<int64_t> piece_shape = out.shape;
  piece_shape.back() = 1;
  V pieces;
  for (int64_t j = 0; j < size; ++j)
    pieces.push_back(n.b.reshape(take_slice(n.b, x, dim, j, step, count), piece_shape));
  return {pieces.size() == 1 ? pieces[0] : n.b.concatenate(pieces, out.rank() - 1)};
}

}  // namespace

TORCH_TPU_GRAPH_LOWERING(diagonal, {"diagonal", "diagonal_copy"}, lower_diagonal);
TORCH_TPU_GRAPH_LOWERING(diagonal_scatter, {"diagonal_scatter"}, lower_diagonal_scatter);
TORCH_TPU_GRAPH_LOWERING(unfold, {"unfold", "unfold_copy"}, lower_unfold);
TORCH_TPU_GRAPH_LOWERING(view,
                         {"view", "_unsafe_view", "view_copy", "unsqueeze", "unsqueeze_copy",
                          "squeeze", "squeeze.dim", "squeeze.dims", "squeeze_copy",
                          "squeeze_copy.dim", "squeeze_copy.dims"},
                         reshape);
TORCH_TPU_GRAPH_LOWERING(alias,
                         {"alias", "alias_copy", "detach", "detach_copy", "clone",
                          "lift_fresh_copy", "lift_fresh"},
                         identity);
TORCH_TPU_GRAPH_LOWERING(to_copy, {"_to_copy"}, convert);
TORCH_TPU_GRAPH_LOWERING(copy, {"copy"}, lower_copy);
TORCH_TPU_GRAPH_LOWERING(permute, {"permute", "permute_copy"}, lower_permute);
TORCH_TPU_GRAPH_LOWERING(transpose, {"t", "t_copy", "transpose.int", "transpose_copy.int"},
                         lower_transpose);
TORCH_TPU_GRAPH_LOWERING(expand, {"expand", "expand_copy"}, lower_expand);
TORCH_TPU_GRAPH_LOWERING(slice, {"slice.Tensor", "slice_copy.Tensor"}, lower_slice);
TORCH_TPU_GRAPH_LOWERING(select, {"select.int", "select_copy.int"}, lower_select);
TORCH_TPU_GRAPH_LOWERING(split,
                         {"split.Tensor", "split_with_sizes", "split_copy.Tensor",
                          "split_with_sizes_copy"},
                         pieces(false));
TORCH_TPU_GRAPH_LOWERING(unbind, {"unbind.int", "unbind_copy.int"}, pieces(true));
TORCH_TPU_GRAPH_LOWERING(slice_scatter, {"slice_scatter"}, lower_slice_scatter);
TORCH_TPU_GRAPH_LOWERING(select_scatter, {"select_scatter"}, lower_select_scatter);

}  // namespace torch_tpu::ops
