// Shape ops that copy: concatenation, padding, repeat, flip, roll, triangles, and the
// backward of unfold. Views (split, narrow, diagonal, unfold) need no lowering.
#include <string>

#include "ops/common.h"
#include "ops/indexing.h"
#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

V lower_cat(Node& n) {
  const TensorType& out = n.out();
  if (out.numel() == 0) return {n.b.full(0, out)};
  const int64_t dim = wrap_dim(n.i64(1), out.rank());
  V parts;
  // Empty inputs add nothing, including the legacy 1-d [0] tensors of any rank.
  for (const auto& t : n.list(0))
    if (t && t->type.numel() > 0) parts.push_back(n.b.convert(*t, out.dtype));
  return {parts.size() == 1 ? parts[0] : n.b.concatenate(parts, dim)};
}

V lower_flip(Node& n) {
  const Value& x = n.in(0);
  if (x.type.rank() == 0) return {x};
  std::vector<int64_t> dims;
  for (int64_t d : n.ints(1)) dims.push_back(wrap_dim(d, x.type.rank()));
  if (dims.empty() || x.type.numel() == 0) return {x};
  return {n.b.emit("stablehlo.reverse", {x}, "dimensions = " + hlo::i64_array(dims), x.type)};
}

Value roll_dim(hlo::Builder& b, const Value& x, int64_t shift, int64_t dim) {
  const int64_t size = x.type.shape[dim];
  if (size == 0) return x;
  shift = ((shift % size) + size) % size;
  if (shift == 0) return x;
  std::vector<int64_t> start(x.type.rank(), 0), limit = x.type.shape, strides(x.type.rank(), 1);
  limit[dim] = size - shift;
  Value head = b.slice(x, start, limit, strides);
  start[dim] = size - shift;
  limit[dim] = size;
  Value tail = b.slice(x, start, limit, strides);
  return b.concatenate({tail, head}, dim);
}

V lower_roll(Node& n) {
  Value x = n.in(0);
  const std::vector<int64_t>& shifts = n.ints(1);
  const std::vector<int64_t>& dims = n.ints(2);
  if (dims.empty()) {
    Value flat = n.b.reshape(x, {x.type.numel()});
    return {n.b.reshape(roll_dim(n.b, flat, shifts.at(0), 0), x.type.shape)};
  }
  for (size_t i = 0; i < dims.size(); ++i)
    x = roll_dim(n.b, x, shifts.at(i), wrap_dim(dims[i], x.type.rank()));
  return {x};
}

// tril keeps col - row <= k; triu keeps col - row >= k.
LowerFn triangle(bool lower) {
  return [lower](Node& n) {
    hlo::Builder& b = n.b;
    Value x = b.convert(n.in(0), n.out().dtype);
    const int64_t rank = x.type.rank();
    TensorType it{DType::S64, x.type.shape};
    Value diff = b.binary(Binary::Subtract, b.iota(it, rank - 1), b.iota(it, rank - 2));
    Value k = b.full(static_cast<double>(n.i64(1)), it);
    Value keep = b.compare(lower ? Compare::LE : Compare::GE, diff, k);
    return V{b.select(keep, x, b.full(0, x.type))};
  };
}

V lower_repeat(Node& n) {
  hlo::Builder& b = n.b;
  const std::vector<int64_t>& repeats = n.ints(1);
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  Value x = n.in(0);
  std::vector<int64_t> padded(repeats.size() - x.type.rank(), 1);
  padded.insert(padded.end(), x.type.shape.begin(), x.type.shape.end());
  x = b.reshape(x, padded);
  std::vector<int64_t> wide, dims;
  for (size_t d = 0; d < repeats.size(); ++d) {
    wide.push_back(repeats[d]);
    wide.push_back(padded[d]);
    dims.push_back(static_cast<int64_t>(2 * d + 1));
  }
  return {b.reshape(b.broadcast_in_dim(x, wide, dims), out.shape)};
}

// self(0), pad(1), value(2). Negative pads crop, which stablehlo.pad allows.
V lower_constant_pad(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  Value x = b.convert(n.in(0), out.dtype);
  const std::vector<int64_t>& pad = n.ints(1);
  const int64_t rank = x.type.rank();
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  for (size_t i = 0; 2 * i + 1 < pad.size(); ++i) {
    low[rank - 1 - i] = pad[2 * i];
    high[rank - 1 - i] = pad[2 * i + 1];
  }
  return {b.pad(x, b.convert(n.in(2), out.dtype), low, high, interior)};
}

// Which input element each output position of a padded dim reads.
Value pad_source(hlo::Builder& b, int64_t size, int64_t low, int64_t high, bool reflect) {
  const int64_t m = size + low + high;
  TensorType t{DType::S64, {m}};
  Value j = b.binary(Binary::Subtract, b.iota(t, 0), b.full(static_cast<double>(low), t));
  Value zero = b.full(0, t), last = b.full(static_cast<double>(size - 1), t);
  if (!reflect) return b.binary(Binary::Minimum, b.binary(Binary::Maximum, j, zero), last);
  j = b.select(b.compare(Compare::LT, j, zero), b.unary(Unary::Negate, j), j);
  Value over = b.binary(Binary::Subtract, b.binary(Binary::Add, last, last), j);
  return b.select(b.compare(Compare::GT, j, last), over, j);
}

// reflection_pad{1,2,3}d / replication_pad{1,2,3}d over the last `k` dims.
LowerFn pad_forward(int64_t k, bool reflect) {
  return [k, reflect](Node& n) {
    hlo::Builder& b = n.b;
    if (n.out().numel() == 0) return V{b.full(0, n.out())};
    Value x = n.in(0);
    const std::vector<int64_t>& pad = n.ints(1);
    const int64_t rank = x.type.rank();
    for (int64_t i = 0; i < k; ++i) {
      const int64_t dim = rank - 1 - i;
      x = select_along(b, x, dim,
                       pad_source(b, x.type.shape[dim], pad[2 * i], pad[2 * i + 1], reflect));
    }
    return V{x};
  };
}

// grad_output(0), self(1), padding(2): each output's gradient goes back to its source.
LowerFn pad_backward(int64_t k, bool reflect) {
  return [k, reflect](Node& n) {
    hlo::Builder& b = n.b;
    const TensorType& out = n.out();
    if (out.numel() == 0) return V{b.full(0, out)};
    DType acc = math_dtype(out.dtype);
    Value g = b.convert(n.in(0), acc);
    const std::vector<int64_t>& pad = n.ints(2);
    const int64_t rank = g.type.rank();
    for (int64_t i = 0; i < k; ++i) {
      const int64_t dim = rank - 1 - i;
      std::vector<int64_t> shape = g.type.shape;
      shape[dim] = out.shape[dim];
      Value src = pad_source(b, out.shape[dim], pad[2 * i], pad[2 * i + 1], reflect);
      g = add_along(b, b.full(0, {acc, shape}), dim, src, g);
    }
    return V{b.convert(g, out.dtype)};
  };
}

// grad_in(0) [..., windows, ..., size], input_sizes(1), dim(2), size(3), step(4).
V lower_unfold_backward(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  DType acc = math_dtype(out.dtype);
  Value g = b.convert(n.in(0), acc);
  const int64_t rank = out.rank();
  if (rank == 0) return {b.convert(b.reshape(g, {}), out.dtype)};
  const int64_t dim = wrap_dim(n.i64(2), rank), size = n.i64(3), step = n.i64(4);
  const int64_t windows = g.type.shape[dim];
  if (windows == 0 || size == 0) return {b.full(0, out)};
  // Bring each window's elements next to the window dim, then flatten the two.
  std::vector<int64_t> perm;
  for (int64_t d = 0; d <= dim; ++d) perm.push_back(d);
  perm.push_back(rank);
  for (int64_t d = dim + 1; d < rank; ++d) perm.push_back(d);
  g = b.transpose(g, perm);
  std::vector<int64_t> merged = out.shape;
  merged[dim] = windows * size;
  g = b.reshape(g, merged);
  TensorType it{DType::S64, {windows, size}};
  Value src = b.binary(
      Binary::Add, b.binary(Binary::Multiply, b.iota(it, 0), b.full(static_cast<double>(step), it)),
      b.iota(it, 1));
  return {b.convert(add_along(b, b.full(0, {acc, out.shape}), dim, src, g), out.dtype)};
}

// channel_shuffle(self [N, C, *], groups): channel g * (C / groups) + i goes to
// i * groups + g, a reshape, a transpose and a reshape.
V lower_channel_shuffle(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  const int64_t groups = n.i64(1);
  if (x.type.rank() < 3 || groups <= 0 || x.type.shape[1] % groups != 0 || x.type.numel() == 0)
    return {b.reshape(x, n.out().shape)};
  std::vector<int64_t> split{x.type.shape[0], groups, x.type.shape[1] / groups};
  split.insert(split.end(), x.type.shape.begin() + 2, x.type.shape.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (int64_t d = 3; d < static_cast<int64_t>(split.size()); ++d) perm.push_back(d);
  return {b.reshape(b.transpose(b.reshape(x, split), perm), n.out().shape)};
}

// narrow_copy(self, dim, start, length): a copy of the slice [start, start + length)
// along dim (start may count from the end, as narrow's does).
V lower_narrow_copy(Node& n) {
  const Value& x = n.in(0);
  int64_t rank = x.type.rank();
  int64_t dim = wrap_dim(n.i64(1), rank), size = x.type.shape[dim];
  int64_t start = n.i64(2) < 0 ? n.i64(2) + size : n.i64(2);
  std::vector<int64_t> lo(rank, 0), hi = x.type.shape, step(rank, 1);
  lo[dim] = start, hi[dim] = start + n.i64(3);
  return {n.b.slice(x, lo, hi, step)};
}

}  // namespace

TORCH_TPU_LOWERING(cat, {"cat", "cat.out"}, lower_cat);
TORCH_TPU_LOWERING(narrow_copy, {"narrow_copy.out"}, lower_narrow_copy);
TORCH_TPU_LOWERING(channel_shuffle, {"channel_shuffle", "channel_shuffle.out"},
                   lower_channel_shuffle);
TORCH_TPU_LOWERING(flip, {"flip", "flip.out"}, lower_flip);
TORCH_TPU_LOWERING(roll, {"roll", "roll.out"}, lower_roll);
TORCH_TPU_LOWERING(tril, {"tril", "tril_", "tril.out"}, triangle(true));
TORCH_TPU_LOWERING(triu, {"triu", "triu_", "triu.out"}, triangle(false));
TORCH_TPU_LOWERING(repeat, {"repeat", "repeat.out"}, lower_repeat);
TORCH_TPU_LOWERING(constant_pad_nd, {"constant_pad_nd", "constant_pad_nd.out"}, lower_constant_pad);
TORCH_TPU_LOWERING(reflection_pad1d, {"reflection_pad1d", "reflection_pad1d.out"},
                   pad_forward(1, true));
TORCH_TPU_LOWERING(reflection_pad2d, {"reflection_pad2d", "reflection_pad2d.out"},
                   pad_forward(2, true));
TORCH_TPU_LOWERING(reflection_pad3d, {"reflection_pad3d", "reflection_pad3d.out"},
                   pad_forward(3, true));
TORCH_TPU_LOWERING(replication_pad1d, {"replication_pad1d", "replication_pad1d.out"},
                   pad_forward(1, false));
TORCH_TPU_LOWERING(replication_pad2d, {"replication_pad2d", "replication_pad2d.out"},
                   pad_forward(2, false));
TORCH_TPU_LOWERING(replication_pad3d, {"replication_pad3d", "replication_pad3d.out"},
                   pad_forward(3, false));
TORCH_TPU_LOWERING(reflection_pad1d_backward,
                   {"reflection_pad1d_backward", "reflection_pad1d_backward.grad_input"},
                   pad_backward(1, true));
TORCH_TPU_LOWERING(reflection_pad2d_backward,
                   {"reflection_pad2d_backward", "reflection_pad2d_backward.grad_input"},
                   pad_backward(2, true));
TORCH_TPU_LOWERING(reflection_pad3d_backward,
                   {"reflection_pad3d_backward", "reflection_pad3d_backward.grad_input"},
                   pad_backward(3, true));
TORCH_TPU_LOWERING(replication_pad1d_backward,
                   {"replication_pad1d_backward", "replication_pad1d_backward.grad_input"},
                   pad_backward(1, false));
TORCH_TPU_LOWERING(replication_pad2d_backward,
                   {"replication_pad2d_backward", "replication_pad2d_backward.grad_input"},
                   pad_backward(2, false));
TORCH_TPU_LOWERING(replication_pad3d_backward,
                   {"replication_pad3d_backward", "replication_pad3d_backward.grad_input"},
                   pad_backward(3, false));
TORCH_TPU_LOWERING(unfold_backward, {"unfold_backward", "unfold_backward.out"},
                   lower_unfold_backward);

}  // namespace torch_tpu::ops
