// Linear algebra: trace, linalg_cross, cdist / pdist (the forward distance ops) and
// renorm from elementwise math, reductions and dot_general, and the helpers the
// factorizations share (ops/linalg.h). The factorizations are in linalg_lu.cpp and
// linalg_decompositions.cpp. Shapes, dtypes and argument checks come from PyTorch's
// meta kernels.

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/linalg.h"
#include "ops/common.h"
#include "ops/reduction.h"

namespace torch_tpu::ops {

namespace linalg {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;

Value to_batch(hlo::Builder& b, const Value& x, const std::vector<int64_t>& batch) {
  std::vector<int64_t> shape = batch;
  shape.push_back(x.type.shape[x.type.rank() - 2]);
  shape.push_back(x.type.shape[x.type.rank() - 1]);
  return broadcast_to(b, x, shape);
}

std::vector<int64_t> batch_of(const TensorType& t, int64_t trailing) {
  return std::vector<int64_t>(t.shape.begin(), t.shape.end() - trailing);
}

Value triangle(hlo::Builder& b, const Value& x, bool lower, bool strict) {
  TensorType it{DType::S64, x.type.shape};
  Value rows = b.iota(it, x.type.rank() - 2), cols = b.iota(it, x.type.rank() - 1);
  Compare c = lower ? (strict ? Compare::GT : Compare::GE) : (strict ? Compare::LT : Compare::LE);
  return b.select(b.compare(c, rows, cols), x, b.full(0, x.type));
}

Value eye_like(hlo::Builder& b, const TensorType& t) {
  TensorType it{DType::S64, t.shape};
  Value eq = b.compare(Compare::EQ, b.iota(it, t.rank() - 2), b.iota(it, t.rank() - 1));
  return b.convert(eq, t.dtype);
}

Value trisolve(hlo::Builder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit,
               bool transpose) {
  std::string attrs =
      std::string("left_side = ") + (left ? "true" : "false") +
      ", lower = " + (lower ? "true" : "false") + ", unit_diagonal = " + (unit ? "true" : "false") +
      ", transpose_a = #stablehlo<transpose " + (transpose ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.emit("stablehlo.triangular_solve", {a, rhs}, attrs, rhs.type);
}

void float_only(const char* name, DType t) {
  if (t != DType::F32 && t != DType::F64) not_implemented(name, t);
}

Value diagonal(hlo::Builder& b, const Value& x) {
  const int64_t r = x.type.rank();
  TensorType it{DType::S64, x.type.shape};
  Value d = b.compare(Compare::EQ, b.iota(it, r - 2), b.iota(it, r - 1));
  return b.reduce(b.select(d, x, b.full(0, x.type)), b.constant(0, x.type.dtype), {r - 1},
                  Binary::Add);
}

}  // namespace linalg

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

// trace(self): the sum of the main diagonal of a matrix, accumulated as sum() does
// (integers in int64, bf16/f16 in f32).
V lower_trace(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  if (x.type.rank() != 2)
    throw std::invalid_argument("trace: expected a matrix, but got tensor with dim " +
                                std::to_string(x.type.rank()));
  const DType out = n.out().dtype;
  if (x.type.dtype == DType::Pred) not_implemented("trace", DType::Pred);
  const DType acc = math_dtype(out);
  TensorType it{DType::S64, x.type.shape};
  Value diag = b.compare(Compare::EQ, b.iota(it, 0), b.iota(it, 1));
  Value v = b.convert(x, acc);
  v = b.select(diag, v, b.full(0, v.type));
  Value sum =
      b.reduce(v, b.constant(0, acc), {0, 1}, acc == DType::Pred ? Binary::Or : Binary::Add);
  return {b.reshape(b.convert(sum, out), n.out().shape)};
}

Value take_one(hlo::Builder& b, const Value& x, int64_t dim, int64_t i) {
  std::vector<int64_t> lo(x.type.rank(), 0), hi = x.type.shape, step(x.type.rank(), 1);
  lo[dim] = i;
  hi[dim] = i + 1;
  return b.slice(x, lo, hi, step);
}

// linalg_cross(self, other, dim): both broadcast to the result's shape, size 3 along dim.
V lower_linalg_cross(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  Value x = cast_to(b, n.in(0), out.dtype, out.shape),
        y = cast_to(b, n.in(1), out.dtype, out.shape);
  const int64_t dim = wrap_dim(n.i64(2), out.rank());
  if (out.shape[dim] != 3)
    throw std::invalid_argument("linalg.cross: inputs dimension " + std::to_string(n.i64(2)) +
                                " must have length 3. Got " + std::to_string(out.shape[dim]));
  Math m{b};
  auto c = [&](int i, int j) {
    return m.sub(m.mul(take_one(b, x, dim, i), take_one(b, y, dim, j)),
                 m.mul(take_one(b, x, dim, j), take_one(b, y, dim, i)));
  };
  return {b.concatenate({c(1, 2), c(2, 0), c(0, 1)}, dim)};
}

// The p-norm of `d` over `dim` (p a static float): the count of nonzeros for p = 0, the
// largest magnitude for inf, sum |d| for 1, sqrt(sum d^2) for 2, else (sum |d|^p)^(1/p).
Value p_norm(const Math& m, const Value& d, int64_t dim, double p) {
  hlo::Builder& b = m.b;
  const DType t = d.type.dtype;
  Value a = m.abs(d);
  if (std::isinf(p)) return reduce_extreme(b, a, {dim}, p > 0);
  auto sum = [&](const Value& v) { return b.reduce(v, b.constant(0, t), {dim}, Binary::Add); };
  if (p == 0) return sum(b.convert(b.compare(Compare::NE, d, m.k(0, d)), t));
  if (p == 1) return sum(a);
  if (p == 2) return m.sqrt(sum(m.mul(d, d)));
  Value s = sum(m.pow(a, m.k(p, a)));
  return m.pow(s, b.full(1.0 / p, s.type));
}

// x1 [..., P, M] and x2 [..., R, M] broadcast over the batch dims of the result [..., P, R].
std::pair<Value, Value> batch_operands(Node& n, DType t) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const int64_t batch = out.rank() - 2;
  auto bcast = [&](const Value& x) {
    std::vector<int64_t> shape(out.shape.begin(), out.shape.begin() + batch);
    shape.push_back(x.type.shape[x.type.rank() - 2]);
    shape.push_back(x.type.shape[x.type.rank() - 1]);
    return broadcast_to(b, b.convert(x, t), shape);
  };
  return {bcast(n.in(0)), bcast(n.in(1))};
}

// _cdist_forward(x1, x2, p, compute_mode): the p-norm distance of every row pair. For
// p = 2 PyTorch uses the matrix-product form |a|^2 + |b|^2 - 2 a.b when compute_mode is
// 1, or None / 0 with more than 25 rows on either side; the direct form otherwise.
V lower_cdist(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  const double p = n.f64(2);
  const int64_t mode = n.is_none(3) ? 0 : n.i64(3);
  const DType t = math_dtype(out.dtype);
  auto [x1, x2] = batch_operands(n, t);
  Math m{b};
  const int64_t batch = out.rank() - 2;
  const int64_t rows1 = x1.type.shape[batch], rows2 = x2.type.shape[batch],
                cols = x1.type.shape[batch + 1];
  std::vector<int64_t> bdims;
  for (int64_t d = 0; d < batch; ++d) bdims.push_back(d);
  if (cols == 0) return {b.full(0, out)};
  const bool use_mm = p == 2 && (mode == 1 || (mode == 0 && (rows1 > 25 || rows2 > 25)));
  if (use_mm) {
    // [-2 x1, |x1|^2, 1] . [x2, 1, |x2|^2], one product as PyTorch's _euclidean_dist.
    auto padded = [&](const Value& x, bool first) {
      std::vector<int64_t> col = x.type.shape;
      col.back() = 1;
      Value norm =
          b.reshape(b.reduce(m.mul(x, x), b.constant(0, t), {batch + 1}, Binary::Add), col);
      Value ones = b.full(1, {t, col});
      if (first) return b.concatenate({m.mul(m.k(-2, x), x), norm, ones}, batch + 1);
      return b.concatenate({x, ones, norm}, batch + 1);
    };
    Value g = b.dot_general(padded(x1, true), padded(x2, false), bdims, bdims, {batch + 1},
                            {batch + 1}, t);
    Value r = m.sqrt(m.max(g, m.k(0, g)));
    return {b.convert(r, out.dtype)};
  }
  // [..., P, R, M] differences.
  std::vector<int64_t> shape(out.shape.begin(), out.shape.end());
  shape.push_back(cols);
  std::vector<int64_t> e1 = bdims, e2 = bdims;
  e1.insert(e1.end(), {batch, batch + 2});
  e2.insert(e2.end(), {batch + 1, batch + 2});
  Value d = m.sub(b.broadcast_in_dim(x1, shape, e1), b.broadcast_in_dim(x2, shape, e2));
  return {b.convert(p_norm(m, d, batch + 2, p), out.dtype)};
}

// _pdist_forward(self [N, M], p): the distances of rows i < j, row-major.
V lower_pdist(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  const double p = n.f64(1);
  const DType t = math_dtype(out.dtype);
  Value x = b.convert(n.in(0), t);
  const int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  Math m{b};
  std::vector<int64_t> shape{rows, rows, cols};
  Value d = m.sub(b.broadcast_in_dim(x, shape, {0, 2}), b.broadcast_in_dim(x, shape, {1, 2}));
  Value all = p_norm(m, d, 2, p);  // [N, N]
  V parts;
  for (int64_t i = 0; i + 1 < rows; ++i)
    parts.push_back(b.reshape(b.slice(all, {i, i + 1}, {i + 1, rows}, {1, 1}), {rows - i - 1}));
  Value r = parts.size() == 1 ? parts[0] : b.concatenate(parts, 0);
  return {b.convert(r, out.dtype)};
}

// d dist / d x for dist = ||diff||_p, elementwise on diff (broadcast to its shape) and
// dist, as CPU's cdist/pdist backward kernels take it: 0 where dist is 0, and for p = 0.
Value p_norm_grad(const Math& m, const Value& diff, const Value& dist, double p) {
  hlo::Builder& b = m.b;
  Value zero = m.k(0, diff);
  Value sign = b.unary(Unary::Sign, diff);
  Value a = m.abs(diff);
  Value g;
  if (p == 0) return zero;
  if (p == 1) {
    g = sign;
  } else if (std::isinf(p)) {
    g = b.select(b.compare(Compare::EQ, a, dist), sign, zero);
  } else if (p == 2) {
    g = m.div(diff, dist);
  } else if (p < 2) {
    g = m.div(m.mul(sign, m.pow(a, m.k(p - 1, a))), m.pow(dist, m.k(p - 1, dist)));
    if (p < 1) g = b.select(b.compare(Compare::EQ, diff, zero), zero, g);
  } else {
    g = m.div(m.mul(diff, m.pow(a, m.k(p - 2, a))), m.pow(dist, m.k(p - 1, dist)));
  }
  return b.select(b.compare(Compare::EQ, dist, zero), zero, g);
}

// _cdist_backward(grad [..., P, R], x1 [..., P, M], x2 [..., R, M], p, cdist): the gradient
// for x1, sum over r of grad * d cdist / d x1.
V lower_cdist_backward(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const DType t = math_dtype(out.dtype);
  Math m{b};
  Value x1 = b.convert(n.in(1), t), x2 = b.convert(n.in(2), t);
  const int64_t batch = x1.type.rank() - 2;
  const int64_t rows1 = x1.type.shape[batch], rows2 = x2.type.shape[batch],
                cols = x1.type.shape[batch + 1];
  std::vector<int64_t> shape(x1.type.shape.begin(), x1.type.shape.begin() + batch), bdims;
  for (int64_t d = 0; d < batch; ++d) bdims.push_back(d);
  shape.insert(shape.end(), {rows1, rows2, cols});
  auto spread = [&](const Value& v, std::vector<int64_t> dims) {
    std::vector<int64_t> all = bdims;
    all.insert(all.end(), dims.begin(), dims.end());
    return b.broadcast_in_dim(v, shape, all);
  };
  Value diff = m.sub(spread(x1, {batch, batch + 2}), spread(x2, {batch + 1, batch + 2}));
  Value dist = spread(b.convert(n.in(4), t), {batch, batch + 1});
  Value grad = spread(b.convert(n.in(0), t), {batch, batch + 1});
  Value g = m.mul(grad, p_norm_grad(m, diff, dist, n.f64(3)));
  return {b.convert(b.reduce(g, b.constant(0, t), {batch + 1}, Binary::Add), out.dtype)};
}

// _pdist_backward(grad [N (N - 1) / 2], self [N, M], p, pdist): the pairs i < j in row-major
// order spread to a symmetric [N, N] (0 on the diagonal), then as cdist's backward of self
// with itself (each pair's term reaches both rows, with opposite signs).
V lower_pdist_backward(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const DType t = math_dtype(out.dtype);
  Math m{b};
  Value x = b.convert(n.in(1), t);
  const int64_t rows = x.type.shape[0], cols = x.type.shape[1];
  if (rows < 2 || cols == 0) return {b.full(0, out)};
  const TensorType square{DType::S64, {rows, rows}};
  Value i = b.iota(square, 0), j = b.iota(square, 1);
  Value lo = b.binary(Binary::Minimum, i, j), hi = b.binary(Binary::Maximum, i, j);
  auto k = [&](double v) { return b.full(v, square); };
  // index of (lo, hi): lo * N - lo (lo + 1) / 2 + hi - lo - 1
  Value index = b.binary(
      Binary::Add,
      b.binary(Binary::Subtract, b.binary(Binary::Multiply, lo, k(double(rows))),
               b.binary(Binary::Divide, b.binary(Binary::Multiply, lo, b.binary(Binary::Add, lo, k(1))),
                        k(2))),
      b.binary(Binary::Subtract, b.binary(Binary::Subtract, hi, lo), k(1)));
  Value diagonal = b.compare(Compare::EQ, i, j);
  index = b.select(diagonal, k(0), index);
  auto full_matrix = [&](const Value& v) {
    Value f = b.gather_flat(b.convert(v, t), index);
    return b.select(diagonal, b.full(0, {t, {rows, rows}}), f);
  };
  const std::vector<int64_t> shape{rows, rows, cols};
  Value diff = m.sub(b.broadcast_in_dim(x, shape, {0, 2}), b.broadcast_in_dim(x, shape, {1, 2}));
  Value dist = b.broadcast_in_dim(full_matrix(n.in(3)), shape, {0, 1});
  Value grad = b.broadcast_in_dim(full_matrix(n.in(0)), shape, {0, 1});
  Value g = m.mul(grad, p_norm_grad(m, diff, dist, n.f64(2)));
  g = b.select(b.broadcast_in_dim(diagonal, {rows, rows, cols}, {0, 1}), b.full(0, {t, shape}), g);
  return {b.convert(b.reduce(g, b.constant(0, t), {1}, Binary::Add), out.dtype)};
}

// renorm(self, p, dim, maxnorm): each slice along dim whose p-norm exceeds maxnorm scaled
// by maxnorm / (norm + 1e-7). The norm accumulates in f32 for bf16/f16 and the factor is
// rounded to self's dtype before the product, as in PyTorch's kernel.
V lower_renorm(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const Value& self = n.in(0);
  if (!hlo::is_float(out.dtype)) not_implemented("renorm", out.dtype);
  if (self.type.rank() == 0)
    throw std::invalid_argument("renorm: input needs at least 1 dimension, got 0 dimensions");
  const DType acc = math_dtype(out.dtype);
  const int64_t dim = wrap_dim(n.i64(2), self.type.rank());
  Math m{b};
  Value x = b.convert(self, acc);
  std::vector<int64_t> rdims = other_dims(self.type.rank(), dim);
  Value p = b.convert(n.in(1), acc), maxnorm = b.convert(n.in(3), acc);
  Value a = m.abs(x);
  auto sum = [&](const Value& v) { return b.reduce(v, b.constant(0, acc), rdims, Binary::Add); };
  Value pb = b.broadcast_in_dim(p, x.type.shape, {});
  Value general = sum(m.pow(a, pb));
  TensorType nt = general.type;
  Value ps = b.broadcast_in_dim(p, nt.shape, {});
  Value norm = m.pow(general, m.div(m.k(1, ps), ps));
  norm = m.sel(m.eq(ps, m.k(2, ps)), m.sqrt(sum(m.mul(x, x))), norm);
  norm = m.sel(m.eq(ps, m.k(1, ps)), sum(a), norm);
  norm = m.sel(m.eq(ps, m.k(0, ps)), sum(b.convert(m.ne(x, m.k(0, x)), acc)), norm);
  norm = m.sel(m.eq(ps, m.k(INFINITY, ps)), reduce_extreme(b, a, rdims, true), norm);
  norm = m.sel(m.eq(ps, m.k(-INFINITY, ps)), reduce_extreme(b, a, rdims, false), norm);
  Value mx = b.broadcast_in_dim(maxnorm, nt.shape, {});
  Value factor = m.sel(m.gt(norm, mx), m.div(mx, m.add(norm, m.k(1e-7, norm))), m.k(1, norm));
  factor = b.convert(factor, out.dtype);
  Value r = b.binary(Binary::Multiply, b.convert(self, out.dtype),
                     b.broadcast_in_dim(factor, out.shape, {dim}));
  return {r};
}

}  // namespace

TORCH_TPU_LOWERING(trace, {"trace", "trace.out"}, lower_trace);
TORCH_TPU_LOWERING(linalg_cross, {"linalg_cross", "linalg_cross.out"}, lower_linalg_cross);
TORCH_TPU_LOWERING(cdist_forward, {"_cdist_forward", "_cdist_forward.out"}, lower_cdist);
TORCH_TPU_LOWERING(pdist_forward, {"_pdist_forward", "_pdist_forward.out"}, lower_pdist);
TORCH_TPU_LOWERING(cdist_backward, {"_cdist_backward", "_cdist_backward.out"}, lower_cdist_backward);
TORCH_TPU_LOWERING(pdist_backward, {"_pdist_backward", "_pdist_backward.out"}, lower_pdist_backward);
TORCH_TPU_LOWERING(renorm, {"renorm", "renorm_", "renorm.out"}, lower_renorm);

}  // namespace torch_tpu::ops
