// Linear algebra: trace, linalg_cross, cdist / pdist (the forward distance ops) and
// renorm from elementwise math, reductions and dot_general; Cholesky, triangular solves
// and LU with what follows from them; Householder QR, Jacobi eigh and SVD, and the
// matrix exponential (below). Shapes, dtypes and argument checks come
// from PyTorch's meta kernels.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/elementwise.h"
#include "ops/reduction.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::Reducer;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

// trace(self): the sum of the main diagonal of a matrix, accumulated as sum() does
// (integers in int64, bf16/f16 in f32).
V lower_trace(Node& n) {
  hlo::Builder& b = n.b;
  const Value& x = n.in(0);
  if (x.type.rank() != 2) throw std::invalid_argument("trace: expected a matrix, but got tensor with dim " +
                                                      std::to_string(x.type.rank()));
  const DType out = n.out().dtype;
  if (x.type.dtype == DType::Pred) not_implemented("trace", DType::Pred);
  const DType acc = math_dtype(out);
  TensorType it{DType::S64, x.type.shape};
  Value diag = b.compare(Compare::EQ, b.iota(it, 0), b.iota(it, 1));
  Value v = b.convert(x, acc);
  v = b.select(diag, v, b.full(0, v.type));
  Value sum = b.reduce(v, b.constant(0, acc), {0, 1}, acc == DType::Pred ? Reducer::Or : Reducer::Add);
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
  Value x = cast_to(b, n.in(0), out.dtype, out.shape), y = cast_to(b, n.in(1), out.dtype, out.shape);
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
  auto sum = [&](const Value& v) { return b.reduce(v, b.constant(0, t), {dim}, Reducer::Add); };
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
  const int64_t rows1 = x1.type.shape[batch], rows2 = x2.type.shape[batch], cols = x1.type.shape[batch + 1];
  std::vector<int64_t> bdims;
  for (int64_t d = 0; d < batch; ++d) bdims.push_back(d);
  if (cols == 0) return {b.full(0, out)};
  const bool use_mm = p == 2 && (mode == 1 || (mode == 0 && (rows1 > 25 || rows2 > 25)));
  if (use_mm) {
    // [-2 x1, |x1|^2, 1] . [x2, 1, |x2|^2], one product as PyTorch's _euclidean_dist.
    auto padded = [&](const Value& x, bool first) {
      std::vector<int64_t> col = x.type.shape;
      col.back() = 1;
      Value norm = b.reshape(b.reduce(m.mul(x, x), b.constant(0, t), {batch + 1}, Reducer::Add), col);
      Value ones = b.full(1, {t, col});
      if (first) return b.concatenate({m.mul(m.k(-2, x), x), norm, ones}, batch + 1);
      return b.concatenate({x, ones, norm}, batch + 1);
    };
    Value g = b.dot_general(padded(x1, true), padded(x2, false), bdims, bdims, {batch + 1}, {batch + 1}, t);
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

// renorm(self, p, dim, maxnorm): each slice along dim whose p-norm exceeds maxnorm scaled
// by maxnorm / (norm + 1e-7). The norm accumulates in f32 for bf16/f16 and the factor is
// rounded to self's dtype before the product, as in PyTorch's kernel.
V lower_renorm(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const Value& self = n.in(0);
  if (!hlo::is_float(out.dtype)) not_implemented("renorm", out.dtype);
  if (self.type.rank() == 0) throw std::invalid_argument("renorm: input needs at least 1 dimension, got 0 dimensions");
  const DType acc = math_dtype(out.dtype);
  const int64_t dim = wrap_dim(n.i64(2), self.type.rank());
  Math m{b};
  Value x = b.convert(self, acc);
  std::vector<int64_t> rdims = other_dims(self.type.rank(), dim);
  Value p = b.convert(n.in(1), acc), maxnorm = b.convert(n.in(3), acc);
  Value a = m.abs(x);
  auto sum = [&](const Value& v) { return b.reduce(v, b.constant(0, acc), rdims, Reducer::Add); };
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
  Value r = b.binary("multiply", b.convert(self, out.dtype), b.broadcast_in_dim(factor, out.shape, {dim}));
  return {r};
}

// ---- factorizations and solves ---------------------------------------------------------
//
// Cholesky and triangular solves are StableHLO ops (XLA:CPU expands them); LU with
// partial pivoting (LAPACK's getrf: the first largest magnitude of the column below the
// diagonal is the pivot) runs as a stablehlo.while over the columns. det, slogdet, inv,
// solve and lu_solve follow from it. Float32 and float64 only, as PyTorch's CPU kernels
// (the meta kernels reject the rest).

// x [..., r, c] broadcast to batch dims `batch`.
Value to_batch(hlo::Builder& b, const Value& x, const std::vector<int64_t>& batch) {
  std::vector<int64_t> shape = batch;
  shape.push_back(x.type.shape[x.type.rank() - 2]);
  shape.push_back(x.type.shape[x.type.rank() - 1]);
  return broadcast_to(b, x, shape);
}

std::vector<int64_t> batch_of(const TensorType& t, int64_t trailing = 2) {
  return std::vector<int64_t>(t.shape.begin(), t.shape.end() - trailing);
}

Value mT(hlo::Builder& b, const Value& x) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.type.rank(); ++d) perm.push_back(d);
  std::swap(perm[x.type.rank() - 1], perm[x.type.rank() - 2]);
  return b.transpose(x, perm);
}

// x with the other triangle zeroed (lower: row >= col).
Value triangle(hlo::Builder& b, const Value& x, bool lower, bool strict = false) {
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

Value cholesky(hlo::Builder& b, const Value& a, bool upper) {
  Value l = b.emit("stablehlo.cholesky", {a}, std::string("lower = ") + (upper ? "false" : "true"), a.type);
  return triangle(b, l, !upper);
}

// op(a) x = rhs (left) or x op(a) = rhs, a triangular; batch dims already equal.
Value trisolve(hlo::Builder& b, const Value& a, const Value& rhs, bool left, bool lower, bool unit,
               bool transpose) {
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " +
                      (lower ? "true" : "false") + ", unit_diagonal = " + (unit ? "true" : "false") +
                      ", transpose_a = #stablehlo<transpose " + (transpose ? "TRANSPOSE" : "NO_TRANSPOSE") + ">";
  return b.emit("stablehlo.triangular_solve", {a, rhs}, attrs, rhs.type);
}

void float_only(const char* name, DType t) {
  if (t != DType::F32 && t != DType::F64) not_implemented(name, t);
}

Value cholesky_info(hlo::Builder& b, const Value& a, const TensorType& out);

V lower_cholesky_ex(Node& n) {
  float_only("linalg_cholesky_ex", n.in(0).type.dtype);
  if (n.out(0).numel() == 0) return {n.b.full(0, n.out(0)), n.b.full(0, n.out(1))};
  // The minors of the symmetric matrix the used triangle stands for.
  const bool upper = n.flag(1);
  Value half = triangle(n.b, n.in(0), !upper), strict = triangle(n.b, n.in(0), !upper, true);
  Value sym = n.b.binary("add", half, mT(n.b, strict));
  return {cholesky(n.b, n.in(0), upper), cholesky_info(n.b, sym, n.out(1))};
}

V lower_cholesky(Node& n) {
  float_only("cholesky", n.in(0).type.dtype);
  if (n.out().numel() == 0) return {n.b.full(0, n.out())};
  return {cholesky(n.b, n.in(0), n.flag(1))};
}

// _cholesky_solve_helper(B, factor, upper): A x = B with A = L L^T (or U^T U).
V lower_cholesky_solve(Node& n) {
  hlo::Builder& b = n.b;
  float_only("cholesky_solve", n.in(0).type.dtype);
  if (n.out().numel() == 0) return {b.full(0, n.out())};
  std::vector<int64_t> batch = batch_of(n.out());
  Value rhs = to_batch(b, n.in(0), batch), f = to_batch(b, n.in(1), batch);
  const bool upper = n.flag(2);
  // lower: L y = B, L^T x = y; upper: U^T y = B, U x = y.
  Value y = trisolve(b, f, rhs, true, !upper, false, upper);
  return {trisolve(b, f, y, true, !upper, false, !upper)};
}

// cholesky_inverse(factor, upper): (L L^T)^-1 = L^-T L^-1, (U^T U)^-1 = U^-1 U^-T.
V lower_cholesky_inverse(Node& n) {
  hlo::Builder& b = n.b;
  float_only("cholesky_inverse", n.in(0).type.dtype);
  if (n.out().numel() == 0) return {b.full(0, n.out())};
  const Value& f = n.in(0);
  const bool upper = n.flag(1);
  Value inv = trisolve(b, f, eye_like(b, f.type), true, !upper, false, false);
  const int64_t r = f.type.rank();
  std::vector<int64_t> bd;
  for (int64_t d = 0; d < r - 2; ++d) bd.push_back(d);
  // lower: inv^T inv; upper: inv inv^T.
  Value out = upper ? b.dot_general(inv, inv, bd, bd, {r - 1}, {r - 1}, f.type.dtype)
                    : b.dot_general(inv, inv, bd, bd, {r - 2}, {r - 2}, f.type.dtype);
  return {out};
}

// linalg_solve_triangular(A, B, upper, left, unitriangular).
V lower_solve_triangular(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg_solve_triangular", n.in(0).type.dtype);
  if (n.out().numel() == 0) return {b.full(0, n.out())};
  std::vector<int64_t> batch = batch_of(n.out());
  Value a = to_batch(b, b.convert(n.in(0), n.out().dtype), batch);
  Value rhs = to_batch(b, b.convert(n.in(1), n.out().dtype), batch);
  return {trisolve(b, a, rhs, n.flag(3), !n.flag(2), n.flag(4), false)};
}

// triangular_solve(b, A, upper, transpose, unitriangular) -> (x, A's copy).
V lower_triangular_solve(Node& n) {
  hlo::Builder& b = n.b;
  float_only("triangular_solve", n.in(0).type.dtype);
  Value copy = to_batch(b, n.in(1), batch_of(n.out(1)));
  if (n.out(0).numel() == 0) return {b.full(0, n.out(0)), copy};
  std::vector<int64_t> batch = batch_of(n.out(0));
  Value a = to_batch(b, n.in(1), batch), rhs = to_batch(b, n.in(0), batch);
  return {trisolve(b, a, rhs, true, !n.flag(2), n.flag(4), n.flag(3)), copy};
}

// ---- LU ----

struct Lu {
  Value lu;     // [..., m, n]
  Value perm;   // s64 [..., m]: row i of P A is row perm[i] of A
  Value piv;    // s32 [..., min(m, n)], 1-based as LAPACK's
  Value info;   // s32 [...]
};

Lu lu_factor(hlo::Builder& b, const Value& a_in, bool pivot = true) {
  const TensorType& t = a_in.type;
  const int64_t r = t.rank(), m = t.shape[r - 2], n = t.shape[r - 1], k = std::min(m, n);
  std::vector<int64_t> batch = batch_of(t);
  int64_t bt = 1;
  for (int64_t d : batch) bt *= d;
  Value a = b.reshape(a_in, {bt, m, n});
  const TensorType at = a.type, pt{DType::S64, {bt, m}}, vt{DType::S32, {bt, std::max<int64_t>(k, 1)}},
                   it{DType::S32, {bt}}, s{DType::S64, {}};
  const DType dt = t.dtype;
  std::string cond = b.region({s, at, pt, vt, it}, [k](hlo::Builder& rb, const V& x) {
    return V{rb.compare(Compare::LT, x[0], rb.constant_int(k, DType::S64))};
  });
  std::string body = b.region({s, at, pt, vt, it}, [=](hlo::Builder& rb, const V& x) {
    Math mm{rb};
    const Value &step = x[0], &A = x[1], &perm = x[2], &piv = x[3], &info = x[4];
    TensorType ai{DType::S64, at.shape};
    Value rows = rb.iota(ai, 1), cols = rb.iota(ai, 2);
    Value k3 = rb.broadcast_in_dim(step, at.shape, {}), k2 = rb.broadcast_in_dim(step, pt.shape, {});
    Value zero = rb.full(0, at);
    Value col = rb.reduce(rb.select(rb.compare(Compare::EQ, cols, k3), A, zero), rb.constant(0, dt), {2}, Reducer::Add);
    Value r2 = rb.iota(pt, 1);
    Value below = rb.compare(Compare::GE, r2, k2);
    Value mag = rb.select(below, mm.abs(col), rb.full(-1, col.type));
    Value top = rb.reduce(mag, rb.constant(-1, dt), {1}, Reducer::Max);
    Value hit = rb.compare(Compare::EQ, mag, rb.broadcast_in_dim(top, pt.shape, {0}));
    Value p = rb.reduce(rb.select(hit, r2, rb.full(static_cast<double>(m), pt)), rb.constant_int(m, DType::S64), {1},
                        Reducer::Min);  // [bt]
    if (!pivot) p = rb.broadcast_in_dim(step, {bt}, {});
    Value p3 = rb.broadcast_in_dim(p, at.shape, {0}), p2 = rb.broadcast_in_dim(p, pt.shape, {0});
    auto row_of = [&](const Value& which) {  // [bt, n]
      return rb.reduce(rb.select(rb.compare(Compare::EQ, rows, which), A, zero), rb.constant(0, dt), {1}, Reducer::Add);
    };
    Value row_k = row_of(k3), row_p = row_of(p3);
    auto rows_b = [&](const Value& v) { return rb.broadcast_in_dim(v, at.shape, {0, 2}); };
    Value is_k = rb.compare(Compare::EQ, rows, k3), is_p = rb.compare(Compare::EQ, rows, p3);
    Value swapped = rb.select(is_k, rows_b(row_p), rb.select(is_p, rows_b(row_k), A));
    Value pk = rb.reduce(rb.select(rb.compare(Compare::EQ, r2, k2), perm, rb.full(0, pt)), rb.constant_int(0, DType::S64), {1}, Reducer::Add);
    Value pp = rb.reduce(rb.select(rb.compare(Compare::EQ, r2, p2), perm, rb.full(0, pt)), rb.constant_int(0, DType::S64), {1}, Reducer::Add);
    Value perm1 = rb.select(rb.compare(Compare::EQ, r2, k2), rb.broadcast_in_dim(pp, pt.shape, {0}),
                            rb.select(rb.compare(Compare::EQ, r2, p2), rb.broadcast_in_dim(pk, pt.shape, {0}), perm));
    Value vi = rb.iota(vt, 1);
    Value piv1 = rb.select(rb.compare(Compare::EQ, vi, rb.broadcast_in_dim(rb.convert(step, DType::S32), vt.shape, {})),
                           rb.broadcast_in_dim(rb.convert(rb.binary("add", p, rb.full(1, p.type)), DType::S32), vt.shape, {0}), piv);
    // The pivot, the multipliers below it, and the trailing update.
    Value pivot = rb.reduce(rb.select(rb.compare(Compare::EQ, rb.iota({DType::S64, {bt, n}}, 1),
                                                 rb.broadcast_in_dim(step, {bt, n}, {})), row_p, rb.full(0, row_p.type)),
                            rb.constant(0, dt), {1}, Reducer::Add);  // [bt]
    Value singular = rb.compare(Compare::EQ, pivot, rb.full(0, pivot.type));
    Value info1 = rb.select(rb.binary("and", singular, rb.compare(Compare::EQ, info, rb.full(0, info.type))),
                            rb.binary("add", rb.broadcast_in_dim(rb.convert(step, DType::S32), it.shape, {}), rb.full(1, it)), info);
    Value col1 = rb.reduce(rb.select(rb.compare(Compare::EQ, cols, k3), swapped, zero), rb.constant(0, dt), {2}, Reducer::Add);
    Value safe = rb.select(singular, rb.full(1, pivot.type), pivot);
    Value l = rb.binary("divide", col1, rb.broadcast_in_dim(safe, pt.shape, {0}));
    Value use = rb.binary("and", rb.compare(Compare::GT, r2, k2), rb.unary("not", rb.broadcast_in_dim(singular, pt.shape, {0})));
    l = rb.select(use, l, rb.full(0, l.type));
    Value lb = rb.broadcast_in_dim(l, at.shape, {0, 1});
    Value update = rb.select(rb.compare(Compare::GT, cols, k3), rb.binary("multiply", lb, rows_b(row_p)), zero);
    Value out = rb.binary("subtract", swapped, update);
    Value store = rb.binary("and", rb.compare(Compare::EQ, cols, k3), rb.broadcast_in_dim(use, at.shape, {0, 1}));
    out = rb.select(store, lb, out);
    return V{rb.binary("add", step, rb.constant_int(1, DType::S64)), out, perm1, piv1, info1};
  });
  V res = b.emit_multi("stablehlo.while",
                       {b.constant_int(0, DType::S64), a, b.iota(pt, 1), b.full(0, vt), b.full(0, it)}, "",
                       {s, at, pt, vt, it}, {cond, body});
  std::vector<int64_t> pshape = batch, vshape = batch;
  pshape.push_back(m);
  vshape.push_back(k);
  Value piv = k == 0 ? b.full(0, {DType::S32, vshape}) : b.reshape(res[3], vshape);
  return {b.reshape(res[1], t.shape), b.reshape(res[2], pshape), piv, b.reshape(res[4], batch)};
}

// P A as a product with the permutation's one-hot matrix (exact).
Value permute_rows(hlo::Builder& b, const Value& perm, const Value& x) {
  const int64_t r = x.type.rank(), m = x.type.shape[r - 2];
  std::vector<int64_t> shape = x.type.shape;
  shape[r - 1] = m;
  std::vector<int64_t> pd;
  for (int64_t d = 0; d < r - 1; ++d) pd.push_back(d);
  Value onehot = b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(perm, shape, pd), b.iota({DType::S64, shape}, r - 1)),
                           x.type.dtype);
  std::vector<int64_t> bd;
  for (int64_t d = 0; d < r - 2; ++d) bd.push_back(d);
  return b.dot_general(onehot, x, bd, bd, {r - 1}, {r - 2}, x.type.dtype);
}

// A x = rhs from A's LU: L y = P rhs, U x = y.
Value lu_solve(hlo::Builder& b, const Lu& f, const Value& rhs) {
  Value y = trisolve(b, f.lu, permute_rows(b, f.perm, rhs), true, true, true, false);
  return trisolve(b, f.lu, y, true, false, false, false);
}

// The row order the 1-based LAPACK pivots give (swap i with piv[i] - 1, in order).
Value perm_from_pivots(hlo::Builder& b, const Value& piv, int64_t m) {
  std::vector<int64_t> batch = batch_of(piv.type, 1);
  std::vector<int64_t> shape = batch;
  shape.push_back(m);
  TensorType pt{DType::S64, shape};
  const int64_t k = piv.type.shape.back(), r = pt.rank();
  Value perm = b.iota(pt, r - 1);
  Value p64 = b.binary("subtract", b.convert(piv, DType::S64), b.full(1, {DType::S64, piv.type.shape}));
  std::vector<int64_t> bd;
  for (int64_t d = 0; d < r - 1; ++d) bd.push_back(d);
  Value idx = b.iota(pt, r - 1);
  for (int64_t i = 0; i < k; ++i) {
    std::vector<int64_t> lo(r, 0), hi = piv.type.shape, st(r, 1);
    lo[r - 1] = i;
    hi[r - 1] = i + 1;
    Value target = b.reshape(b.slice(p64, lo, hi, st), batch);  // [...]
    Value tb = b.broadcast_in_dim(target, shape, bd);
    Value at_i = b.compare(Compare::EQ, idx, b.full(static_cast<double>(i), pt));
    Value at_t = b.compare(Compare::EQ, idx, tb);
    Value vi = b.reduce(b.select(at_i, perm, b.full(0, pt)), b.constant_int(0, DType::S64), {r - 1}, Reducer::Add);
    Value vt = b.reduce(b.select(at_t, perm, b.full(0, pt)), b.constant_int(0, DType::S64), {r - 1}, Reducer::Add);
    perm = b.select(at_i, b.broadcast_in_dim(vt, shape, bd), b.select(at_t, b.broadcast_in_dim(vi, shape, bd), perm));
  }
  return perm;
}

Value diagonal(hlo::Builder& b, const Value& x) {
  const int64_t r = x.type.rank();
  TensorType it{DType::S64, x.type.shape};
  Value d = b.compare(Compare::EQ, b.iota(it, r - 2), b.iota(it, r - 1));
  return b.reduce(b.select(d, x, b.full(0, x.type)), b.constant(0, x.type.dtype), {r - 1}, Reducer::Add);
}

// (-1)^(rows moved by the pivots).
Value pivot_sign(hlo::Builder& b, const Value& piv, DType dtype) {
  const int64_t r = piv.type.rank();
  TensorType it{DType::S32, piv.type.shape};
  Value moved = b.compare(Compare::NE, piv, b.binary("add", b.iota(it, r - 1), b.full(1, it)));
  Value count = b.reduce(b.convert(moved, DType::S64), b.constant_int(0, DType::S64), {r - 1}, Reducer::Add);
  Value odd = b.compare(Compare::EQ, b.binary("remainder", count, b.full(2, count.type)), b.full(1, count.type));
  return b.select(odd, b.full(-1, {dtype, count.type.shape}), b.full(1, {dtype, count.type.shape}));
}

// Per matrix: 1 + the order of the first leading minor that is not positive, or 0 (the
// factor is NaN then, so the minors come from elimination without pivoting, whose k-th
// pivot is the ratio of the k-th leading minor to the one before).
Value cholesky_info(hlo::Builder& b, const Value& a, const TensorType& out) {
  const int64_t r = a.type.rank(), n = a.type.shape[r - 1];
  if (n == 0 || a.type.numel() == 0) return b.full(0, out);
  Value d = diagonal(b, lu_factor(b, a, false).lu);  // [..., n]
  Value bad = b.unary("not", b.compare(Compare::GT, d, b.full(0, d.type)));  // <= 0 or NaN
  TensorType pt{DType::S64, d.type.shape};
  Value pos = b.select(bad, b.binary("add", b.iota(pt, r - 2), b.full(1, pt)), b.full(static_cast<double>(n + 1), pt));
  Value first = b.reduce(pos, b.constant_int(n + 1, DType::S64), {r - 2}, Reducer::Min);
  Value info = b.select(b.compare(Compare::EQ, first, b.full(static_cast<double>(n + 1), first.type)),
                        b.full(0, first.type), first);
  return b.reshape(b.convert(info, out.dtype), out.shape);
}

V lower_lu_factor_ex(Node& n) {
  float_only("linalg_lu_factor_ex", n.in(0).type.dtype);
  if (!n.flag(1)) throw std::invalid_argument("linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  if (n.in(0).type.numel() == 0) return {n.b.full(0, n.out(0)), n.b.full(1, n.out(1)), n.b.full(0, n.out(2))};
  Lu f = lu_factor(n.b, n.in(0));
  return {f.lu, f.piv, f.info};
}

// det and slogdet factor A^T, as PyTorch does for a row-major A (their backward solves
// with that factor).
V lower_det(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.det", n.in(0).type.dtype);
  if (n.in(0).type.numel() == 0) return {b.full(1, n.out(0)), b.full(0, n.out(1)), b.full(1, n.out(2))};
  Lu f = lu_factor(b, mT(b, n.in(0)));
  const int64_t r = f.lu.type.rank();
  Value d = b.reduce(diagonal(b, f.lu), b.constant(1, f.lu.type.dtype), {r - 2}, Reducer::Mul);
  return {b.binary("multiply", d, pivot_sign(b, f.piv, d.type.dtype)), f.lu, f.piv};
}

V lower_slogdet(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.slogdet", n.in(0).type.dtype);
  if (n.in(0).type.numel() == 0)
    return {b.full(1, n.out(0)), b.full(0, n.out(1)), b.full(0, n.out(2)), b.full(1, n.out(3))};
  Lu f = lu_factor(b, mT(b, n.in(0)));
  const int64_t r = f.lu.type.rank();
  Value diag = diagonal(b, f.lu);
  Math m{b};
  Value neg = b.reduce(b.convert(m.lt(diag, m.k(0, diag)), DType::S64), b.constant_int(0, DType::S64), {r - 2}, Reducer::Add);
  Value sign = pivot_sign(b, f.piv, diag.type.dtype);
  Value odd = b.compare(Compare::EQ, b.binary("remainder", neg, b.full(2, neg.type)), b.full(1, neg.type));
  sign = b.select(odd, b.unary("negate", sign), sign);
  Value zero = b.reduce(b.convert(m.eq(diag, m.k(0, diag)), DType::S64), b.constant_int(0, DType::S64), {r - 2}, Reducer::Add);
  sign = b.select(b.compare(Compare::GT, zero, b.full(0, zero.type)), b.full(0, sign.type), sign);
  Value logabs = b.reduce(m.log(m.abs(diag)), b.constant(0, diag.type.dtype), {r - 2}, Reducer::Add);
  return {sign, logabs, f.lu, f.piv};
}

V lower_inv_ex(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.inv", n.in(0).type.dtype);
  if (n.in(0).type.numel() == 0) return {b.full(0, n.out(0)), b.full(0, n.out(1))};
  Lu f = lu_factor(b, n.in(0));
  return {lu_solve(b, f, eye_like(b, n.in(0).type)), f.info};
}

// _linalg_solve_ex(A, B, left, check_errors) -> (X, LU, pivots, info). B is a batch of
// vectors when the meta kernel's result has one dim less than A. The LU and pivots
// returned are A's, as PyTorch's for a row-major A (its backward relies on that).
V lower_solve_ex(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.solve", n.in(0).type.dtype);
  const TensorType& out = n.out(0);
  if (out.numel() == 0 || n.in(0).type.numel() == 0)
    return {b.full(0, out), b.full(0, n.out(1)), b.full(1, n.out(2)), b.full(0, n.out(3))};
  const bool left = n.flag(2);
  const Value &a = n.in(0), &rhs = n.in(1);
  const bool vector = out.rank() == a.type.rank() - 1 || rhs.type.rank() == 1;
  std::vector<int64_t> batch = vector ? batch_of(out, 1) : batch_of(out);
  Value af = to_batch(b, a, batch);
  if (!left) af = mT(b, af);
  Value r;
  if (vector) {
    std::vector<int64_t> shape = batch;
    shape.push_back(rhs.type.shape.back());
    r = broadcast_to(b, rhs, shape);
    shape.push_back(1);
    r = b.reshape(r, shape);
  } else {
    r = to_batch(b, rhs, batch);
    if (!left) r = mT(b, r);
  }
  Value x = lu_solve(b, lu_factor(b, af), r);
  if (!vector && !left) x = mT(b, x);
  Lu own = lu_factor(b, to_batch(b, a, batch_of(n.out(1))));
  return {b.reshape(x, out.shape), own.lu, own.piv, own.info};
}

// linalg_lu_solve(LU, pivots, B, left, adjoint).
V lower_lu_solve(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.lu_solve", n.in(0).type.dtype);
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  std::vector<int64_t> batch = batch_of(out);
  Value lu = to_batch(b, n.in(0), batch);
  const int64_t m = lu.type.shape.back();
  std::vector<int64_t> pshape = batch;
  pshape.push_back(n.in(1).type.shape.back());
  Value piv = broadcast_to(b, n.in(1), pshape);
  Value perm = perm_from_pivots(b, piv, m);
  Value rhs = to_batch(b, n.in(2), batch);
  const bool left = n.flag(3), adjoint = n.flag(4);
  if (!left) rhs = mT(b, rhs);
  // left: A X = B; right: X A = B, i.e. A^T X^T = B^T. The transposed systems solve with
  // U^T then L^T, then undo the permutation.
  const bool trans = left ? adjoint : !adjoint;
  Value x;
  if (!trans) {
    x = lu_solve(b, {lu, perm, piv, {}}, rhs);
  } else {
    Value y = trisolve(b, lu, rhs, true, false, false, true);
    y = trisolve(b, lu, y, true, true, true, true);
    // x = P^T y: x[perm[i]] = y[i], the inverse permutation's rows.
    const int64_t r = y.type.rank();
    std::vector<int64_t> shape = y.type.shape;
    shape[r - 1] = m;
    std::vector<int64_t> pd;
    for (int64_t d = 0; d < r - 2; ++d) pd.push_back(d);
    pd.push_back(r - 1);
    Value onehot = b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(perm, shape, pd), b.iota({DType::S64, shape}, r - 2)),
                             y.type.dtype);
    std::vector<int64_t> bd;
    for (int64_t d = 0; d < r - 2; ++d) bd.push_back(d);
    x = b.dot_general(onehot, y, bd, bd, {r - 1}, {r - 2}, y.type.dtype);
  }
  if (!left) x = mT(b, x);
  return {x};
}

// lu_unpack(LU, pivots, unpack_data, unpack_pivots) -> (P, L, U), A = P L U.
V lower_lu_unpack(Node& n) {
  hlo::Builder& b = n.b;
  const Value& lu = n.in(0);
  const int64_t r = lu.type.rank(), m = lu.type.shape[r - 2], c = lu.type.shape[r - 1], k = std::min(m, c);
  V out;
  if (n.flag(3) && n.out(0).numel() > 0) {
    Value perm = perm_from_pivots(b, n.in(1), m);  // [..., m]
    std::vector<int64_t> shape = n.out(0).shape, pd;
    for (int64_t d = 0; d < r - 2; ++d) pd.push_back(d);
    pd.push_back(r - 1);
    // P[perm[i], i] = 1.
    out.push_back(b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(perm, shape, pd), b.iota({DType::S64, shape}, r - 2)),
                            n.out(0).dtype));
  } else {
    out.push_back(b.full(0, n.out(0)));
  }
  if (n.flag(2) && n.out(1).numel() > 0) {
    std::vector<int64_t> lo(r, 0), hi = lu.type.shape, st(r, 1);
    hi[r - 1] = k;
    Value l = triangle(b, b.slice(lu, lo, hi, st), true, true);
    out.push_back(b.binary("add", l, eye_like(b, l.type)));
    hi = lu.type.shape;
    hi[r - 2] = k;
    out.push_back(triangle(b, b.slice(lu, lo, hi, st), false));
  } else {
    out.push_back(b.full(0, n.out(1)));
    out.push_back(b.full(0, n.out(2)));
  }
  return out;
}

// linalg_lu(A, pivot) -> (P, L, U).
V lower_linalg_lu(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.lu", n.in(0).type.dtype);
  if (!n.flag(1)) throw std::invalid_argument("linalg.lu: LU without pivoting is not implemented on the CPU");
  if (n.in(0).type.numel() == 0) return {b.full(0, n.out(0)), b.full(0, n.out(1)), b.full(0, n.out(2))};
  Lu f = lu_factor(b, n.in(0));
  const int64_t r = f.lu.type.rank(), m = f.lu.type.shape[r - 2], c = f.lu.type.shape[r - 1], k = std::min(m, c);
  std::vector<int64_t> shape = n.out(0).shape, pd;
  for (int64_t d = 0; d < r - 2; ++d) pd.push_back(d);
  pd.push_back(r - 1);
  Value p = b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(f.perm, shape, pd), b.iota({DType::S64, shape}, r - 2)),
                      n.out(0).dtype);
  std::vector<int64_t> lo(r, 0), hi = f.lu.type.shape, st(r, 1);
  hi[r - 1] = k;
  Value l = triangle(b, b.slice(f.lu, lo, hi, st), true, true);
  l = b.binary("add", l, eye_like(b, l.type));
  hi = f.lu.type.shape;
  hi[r - 2] = k;
  return {p, l, triangle(b, b.slice(f.lu, lo, hi, st), false)};
}

// ---- QR, symmetric eigendecomposition, SVD, matrix exponential ----------------------------
//
// Householder QR as LAPACK's geqr2 (beta = -sign(alpha) * norm, so R and the reflectors
// carry LAPACK's signs), Q by applying the reflectors to the identity in reverse (org2r).
// eigh by cyclic two-sided Jacobi and the SVD by one-sided (Hestenes) Jacobi on the taller
// orientation, each a stablehlo.while over the (p, q) pairs that stops after a sweep that
// found every pair already at rounding level (at most 40 sweeps). Eigenvalues ascend and
// singular values descend as LAPACK's; eigen- and singular vectors are unique only up to
// sign, and theirs need not have LAPACK's. The matrix exponential is a degree-18 Taylor
// polynomial after scaling the 1-norm under PyTorch's bound, then as many squarings.
// All work on the batch flattened to [bt, rows, cols].

struct Flat {
  Value x;  // [bt, r, c]
  int64_t bt;
};

Flat flatten(hlo::Builder& b, const Value& x) {
  int64_t bt = 1;
  for (int64_t d : batch_of(x.type)) bt *= d;
  const int64_t r = x.type.rank();
  return {b.reshape(x, {bt, x.type.shape[r - 2], x.type.shape[r - 1]}), bt};
}

Value bmm(hlo::Builder& b, const Value& x, const Value& y) {
  return b.dot_general(x, y, {0}, {0}, {2}, {1}, x.type.dtype);
}

Value bmT(hlo::Builder& b, const Value& x) { return b.transpose(x, {0, 2, 1}); }

// iota along `dim` of `shape` compared with the runtime s64 scalar `i`.
Value at_index(hlo::Builder& b, const std::vector<int64_t>& shape, int64_t dim, const Value& i,
               Compare c = Compare::EQ) {
  return b.compare(c, b.iota({DType::S64, shape}, dim), b.broadcast_in_dim(i, shape, {}));
}

Value sum_where(hlo::Builder& b, const Value& mask, const Value& x, const std::vector<int64_t>& dims) {
  return b.reduce(b.select(mask, x, b.full(0, x.type)), b.constant(0, x.type.dtype), dims, Reducer::Add);
}

// Column j of X [bt, r, c] as [bt, r]; element j of x [bt, r] as [bt].
Value column_at(hlo::Builder& b, const Value& X, const Value& j) {
  return sum_where(b, at_index(b, X.type.shape, 2, j), X, {2});
}
Value element_at(hlo::Builder& b, const Value& x, const Value& j) {
  return sum_where(b, at_index(b, x.type.shape, 1, j), x, {1});
}

Value s64(hlo::Builder& b, int64_t v) { return b.constant_int(v, DType::S64); }

double epsilon(DType t) { return t == DType::F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07; }

// (I - t v v^T) C for v [bt, m], t [bt], C [bt, m, c].
Value reflect(hlo::Builder& b, const Value& v, const Value& t, const Value& C) {
  Math m{b};
  const std::vector<int64_t>& sh = C.type.shape;
  Value vb = b.broadcast_in_dim(v, sh, {0, 1});
  Value w = b.reduce(m.mul(vb, C), b.constant(0, C.type.dtype), {1}, Reducer::Add);  // [bt, c]
  return m.sub(C, m.mul(b.broadcast_in_dim(t, sh, {0}), m.mul(vb, b.broadcast_in_dim(w, sh, {0, 2}))));
}

struct Qr {
  Value a;    // [bt, m, n]: R on and above the diagonal, the reflectors below it
  Value tau;  // [bt, max(k, 1)]
};

Qr householder_qr(hlo::Builder& b, const Value& a0) {
  const TensorType at = a0.type;
  const int64_t bt = at.shape[0], m = at.shape[1], k = std::min(m, at.shape[2]);
  const DType dt = at.dtype;
  const TensorType tt{dt, {bt, std::max<int64_t>(k, 1)}}, s{DType::S64, {}};
  std::string cond = b.region({s, at, tt}, [k](hlo::Builder& rb, const V& x) {
    return V{rb.compare(Compare::LT, x[0], s64(rb, k))};
  });
  std::string body = b.region({s, at, tt}, [=](hlo::Builder& rb, const V& x) {
    Math mm{rb};
    const Value &j = x[0], &A = x[1], &tau = x[2];
    const std::vector<int64_t> vs{bt, m};
    Value col = column_at(rb, A, j);  // [bt, m]
    Value diag = at_index(rb, vs, 1, j), below = at_index(rb, vs, 1, j, Compare::GT);
    Value alpha = sum_where(rb, diag, col, {1});  // [bt]
    Value tail = rb.select(below, col, rb.full(0, col.type));
    Value xnorm2 = rb.reduce(mm.mul(tail, tail), rb.constant(0, dt), {1}, Reducer::Add);
    Value norm = mm.sqrt(mm.add(mm.mul(alpha, alpha), xnorm2));
    Value beta = mm.sel(mm.ge(alpha, mm.k(0, alpha)), mm.neg(norm), norm);
    // Nothing below the diagonal: H = I (tau = 0), as LAPACK's dlarfg.
    Value trivial = mm.eq(xnorm2, mm.k(0, xnorm2));
    Value t = mm.sel(trivial, mm.k(0, beta), mm.div(mm.sub(beta, alpha), mm.sel(trivial, mm.k(1, beta), beta)));
    Value scale = mm.div(mm.k(1, beta), mm.sel(trivial, mm.k(1, beta), mm.sub(alpha, beta)));
    Value v = rb.select(diag, rb.full(1, col.type), mm.mul(tail, rb.broadcast_in_dim(scale, vs, {0})));
    Value out = rb.select(at_index(rb, at.shape, 2, j, Compare::GT), reflect(rb, v, t, A), A);  // columns > j
    Value newcol = rb.select(diag, rb.broadcast_in_dim(mm.sel(trivial, alpha, beta), vs, {0}), rb.select(below, v, col));
    out = rb.select(at_index(rb, at.shape, 2, j), rb.broadcast_in_dim(newcol, at.shape, {0, 1}), out);
    Value tau1 = rb.select(at_index(rb, tt.shape, 1, j), rb.broadcast_in_dim(t, tt.shape, {0}), tau);
    return V{rb.binary("add", j, s64(rb, 1)), out, tau1};
  });
  V res = b.emit_multi("stablehlo.while", {s64(b, 0), a0, b.full(0, tt)}, "", {s, at, tt}, {cond, body});
  return {res[1], res[2]};
}

// Q C (or Q^T C with `transpose`) for Q = H_0 ... H_{k-1}, the reflectors in the columns of
// R [bt, m, >= k] below the diagonal (unit diagonal implied), factors tau [bt, >= k], and
// C [bt, m, c].
Value apply_reflectors(hlo::Builder& b, const Value& R, const Value& tau, int64_t k, const Value& C, bool transpose) {
  const TensorType rt = R.type, tt = tau.type, ct = C.type, s{DType::S64, {}};
  const int64_t bt = ct.shape[0], m = ct.shape[1];
  std::string cond = b.region({s, rt, tt, ct}, [k](hlo::Builder& rb, const V& x) {
    return V{rb.compare(Compare::LT, x[0], s64(rb, k))};
  });
  std::string body = b.region({s, rt, tt, ct}, [=](hlo::Builder& rb, const V& x) {
    const Value &i = x[0], &Rr = x[1], &T = x[2], &Cc = x[3];
    Value j = transpose ? i : rb.binary("subtract", s64(rb, k - 1), i);
    const std::vector<int64_t> vs{bt, m};
    Value col = column_at(rb, Rr, j);
    Value v = rb.select(at_index(rb, vs, 1, j), rb.full(1, col.type),
                        rb.select(at_index(rb, vs, 1, j, Compare::GT), col, rb.full(0, col.type)));
    return V{rb.binary("add", i, s64(rb, 1)), Rr, T, reflect(rb, v, element_at(rb, T, j), Cc)};
  });
  V res = b.emit_multi("stablehlo.while", {s64(b, 0), R, tau, C}, "", {s, rt, tt, ct}, {cond, body});
  return res[3];
}

V lower_geqrf(Node& n) {
  hlo::Builder& b = n.b;
  float_only("geqrf", n.in(0).type.dtype);
  if (n.in(0).type.numel() == 0) return {b.full(0, n.out(0)), b.full(0, n.out(1))};
  Flat f = flatten(b, n.in(0));
  Qr qr = householder_qr(b, f.x);
  const int64_t k = n.out(1).shape.back();
  Value tau = b.slice(qr.tau, {0, 0}, {f.bt, k}, {1, 1});
  return {b.reshape(qr.a, n.out(0).shape), b.reshape(tau, n.out(1).shape)};
}

// linalg_qr(A, mode): "reduced" (Q [m, k], R [k, n]), "complete" (Q [m, m], R [m, n]) or
// "r" (R only).
V lower_linalg_qr(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.qr", n.in(0).type.dtype);
  const std::string& mode = n.str(1);
  const TensorType &qt = n.out(0), &rt = n.out(1);
  const Value& a = n.in(0);
  const DType dt = a.type.dtype;
  if (a.type.numel() == 0) return {mode == "complete" && qt.numel() > 0 ? eye_like(b, qt) : b.full(0, qt), b.full(0, rt)};
  Flat f = flatten(b, a);
  const int64_t m = f.x.type.shape[1], c = f.x.type.shape[2], k = std::min(m, c);
  Qr qr = householder_qr(b, f.x);
  const int64_t rrows = rt.shape[rt.rank() - 2];
  Value r = triangle(b, b.slice(qr.a, {0, 0, 0}, {f.bt, rrows, c}, {1, 1, 1}), false);
  Value q = b.full(0, qt);
  if (mode != "r") {
    Value eye = eye_like(b, {dt, {f.bt, m, qt.shape.back()}});
    q = b.reshape(apply_reflectors(b, qr.a, qr.tau, k, eye, false), qt.shape);
  }
  return {q, b.reshape(r, rt.shape)};
}

// linalg_householder_product(A [m, n], tau [k]): the first n columns of H_0 ... H_{k-1}.
V lower_householder_product(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.householder_product", n.in(0).type.dtype);
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  Flat f = flatten(b, n.in(0));
  Value eye = eye_like(b, f.x.type);
  const int64_t k = n.in(1).type.shape.back();
  if (k == 0) return {b.reshape(eye, out.shape)};
  Value tau = b.reshape(b.convert(n.in(1), out.dtype), {f.bt, k});
  return {b.reshape(apply_reflectors(b, f.x, tau, k, eye, false), out.shape)};
}

// ormqr(A, tau, C, left, transpose): Q C, Q^T C, C Q or C Q^T for A's reflectors.
V lower_ormqr(Node& n) {
  hlo::Builder& b = n.b;
  float_only("ormqr", n.in(0).type.dtype);
  const TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  const int64_t k = n.in(1).type.shape.back();
  const bool left = n.flag(3), transpose = n.flag(4);
  Flat c = flatten(b, n.in(2));
  if (k == 0) return {b.reshape(c.x, out.shape)};
  Flat f = flatten(b, n.in(0));
  Value tau = b.reshape(n.in(1), {f.bt, k});
  // C Q = (Q^T C^T)^T and C Q^T = (Q C^T)^T.
  if (left) return {b.reshape(apply_reflectors(b, f.x, tau, k, c.x, transpose), out.shape)};
  return {b.reshape(bmT(b, apply_reflectors(b, f.x, tau, k, bmT(b, c.x), !transpose)), out.shape)};
}

// c, s of the rotation J (J_pp = J_qq = c, J_pq = s, J_qp = -s) for which J^T [[app, apq],
// [apq, aqq]] J is diagonal (Golub & Van Loan's sym.schur2).
std::pair<Value, Value> jacobi_rotation(const Math& m, const Value& app, const Value& aqq, const Value& apq) {
  Value zero = m.eq(apq, m.k(0, apq));
  Value safe = m.sel(zero, m.k(1, apq), apq);
  Value tau = m.div(m.sub(aqq, app), m.mul(m.k(2, safe), safe));
  Value sign = m.sel(m.ge(tau, m.k(0, tau)), m.k(1, tau), m.k(-1, tau));
  Value t = m.div(sign, m.add(m.abs(tau), m.sqrt(m.add(m.k(1, tau), m.mul(tau, tau)))));
  t = m.sel(zero, m.k(0, t), t);
  Value c = m.div(m.k(1, t), m.sqrt(m.add(m.k(1, t), m.mul(t, t))));
  return {c, m.mul(t, c)};
}

// X with columns p and q replaced by c x_p - s x_q and s x_p + c x_q (X J for the rotation
// J of jacobi_rotation); with `rows`, the same on rows (J^T X). c, s: [bt].
Value rotate(hlo::Builder& b, const Value& X, const Value& p, const Value& q, const Value& c, const Value& s,
             bool rows) {
  Math m{b};
  const std::vector<int64_t>& sh = X.type.shape;
  const int64_t dim = rows ? 1 : 2;
  auto line = [&](const Value& i) { return sum_where(b, at_index(b, sh, dim, i), X, {dim}); };  // [bt, other]
  Value xp = line(p), xq = line(q);
  Value cb = b.broadcast_in_dim(c, xp.type.shape, {0}), sb = b.broadcast_in_dim(s, xp.type.shape, {0});
  Value np = m.sub(m.mul(cb, xp), m.mul(sb, xq)), nq = m.add(m.mul(sb, xp), m.mul(cb, xq));
  const std::vector<int64_t> keep{0, rows ? int64_t{2} : int64_t{1}};
  return b.select(at_index(b, sh, dim, p), b.broadcast_in_dim(np, sh, keep),
                  b.select(at_index(b, sh, dim, q), b.broadcast_in_dim(nq, sh, keep), X));
}

// Cyclic Jacobi on X [bt, r, n]. Two-sided: X symmetric (r = n), rotated to diagonal form
// J^T X J. One-sided: X J, whose columns end orthogonal. Each step rotates one (p, q) pair
// (its two rows / columns); the loop ends after a sweep in which no pair of any matrix
// needed a rotation: two-sided, x_pq^2 <= eps^2 |X|_F^2 (the norm rotations keep);
// one-sided, (x_p . x_q)^2 <= r eps^2 |x_p|^2 |x_q|^2 (LAPACK's gesvj criterion); or after
// 40 sweeps. Returns the rotated X and the accumulated rotations V [bt, n, n].
std::pair<Value, Value> jacobi(hlo::Builder& b, const Value& X, bool one_sided) {
  const TensorType xt = X.type;
  const int64_t bt = xt.shape[0], r = xt.shape[1], n = xt.shape[2];
  const DType dt = xt.dtype;
  const TensorType vt{dt, {bt, n, n}}, s{DType::S64, {}}, pr{DType::Pred, {}}, nt{dt, {bt}};
  Value v0 = eye_like(b, vt);
  if (n < 2) return {X, v0};
  const double eps = epsilon(dt);
  const double tol2 = (one_sided ? static_cast<double>(r) : 1.0) * eps * eps;
  constexpr int64_t max_sweeps = 40;
  // Two-sided: |X|_F^2 per matrix, the scale of the test.
  Value scale = one_sided ? b.full(1, nt)
                          : b.reduce(b.binary("multiply", X, X), b.constant(0, dt), {1, 2}, Reducer::Add);
  const std::vector<TensorType> types{s, s, s, pr, pr, xt, vt, nt};
  std::string cond = b.region(types, [](hlo::Builder& rb, const V& x) {
    return V{rb.binary("and", rb.compare(Compare::LT, x[2], s64(rb, max_sweeps)), rb.unary("not", x[3]))};
  });
  std::string body = b.region(types, [=](hlo::Builder& rb, const V& x) {
    Math mm{rb};
    const Value &p = x[0], &q = x[1], &sweep = x[2], &done = x[3], &clean = x[4], &A = x[5], &Vv = x[6],
                &sc = x[7];
    Value app, aqq, apq, small;
    if (one_sided) {
      Value cp = column_at(rb, A, p), cq = column_at(rb, A, q);
      auto dot = [&](const Value& u, const Value& w) { return rb.reduce(mm.mul(u, w), rb.constant(0, dt), {1}, Reducer::Add); };
      app = dot(cp, cp), aqq = dot(cq, cq), apq = dot(cp, cq);
      small = mm.le(mm.mul(apq, apq), mm.mul(mm.k(tol2, apq), mm.mul(app, aqq)));
    } else {
      const std::vector<int64_t> sq{bt, n, n};
      auto entry = [&](const Value& i, const Value& j) {
        return sum_where(rb, rb.binary("and", at_index(rb, sq, 1, i), at_index(rb, sq, 2, j)), A, {1, 2});
      };
      app = entry(p, p), aqq = entry(q, q), apq = entry(p, q);
      small = mm.le(mm.mul(apq, apq), mm.mul(mm.k(tol2, apq), sc));
    }
    auto [c, sn] = jacobi_rotation(mm, app, aqq, apq);
    Value An = rotate(rb, A, p, q, c, sn, false);
    if (!one_sided) {
      An = rotate(rb, An, p, q, c, sn, true);
      const std::vector<int64_t> sq{bt, n, n};
      Value pq = rb.binary("or", rb.binary("and", at_index(rb, sq, 1, p), at_index(rb, sq, 2, q)),
                           rb.binary("and", at_index(rb, sq, 1, q), at_index(rb, sq, 2, p)));
      An = rb.select(pq, rb.full(0, An.type), An);
    }
    Value Vn = rotate(rb, Vv, p, q, c, sn, false);
    Value clean1 = rb.binary("and", clean, rb.reduce(small, rb.constant(1, DType::Pred), {0}, Reducer::And));
    // The next pair in row order; a new sweep after (n - 2, n - 1).
    Value one = s64(rb, 1);
    Value q1 = rb.binary("add", q, one);
    Value wrap = rb.compare(Compare::EQ, q1, s64(rb, n));
    Value p1 = rb.select(wrap, rb.binary("add", p, one), p);
    q1 = rb.select(wrap, rb.binary("add", p1, one), q1);
    Value fresh = rb.compare(Compare::EQ, p1, s64(rb, n - 1));
    return V{rb.select(fresh, s64(rb, 0), p1), rb.select(fresh, one, q1),
             rb.select(fresh, rb.binary("add", sweep, one), sweep), rb.select(fresh, clean1, done),
             rb.select(fresh, rb.constant(1, DType::Pred), clean1), An, Vn, sc};
  });
  V res = b.emit_multi("stablehlo.while",
                       {s64(b, 0), s64(b, 1), s64(b, 0), b.constant(0, DType::Pred), b.constant(1, DType::Pred), X, v0,
                        scale},
                       "", types, {cond, body});
  return {res[5], res[6]};
}

// The one-hot [bt, n, n] P with P[i, r] = 1 where x[i] (x [bt, n]) is r-th in ascending or
// descending order, ties by position: x P sorts x, V P sorts V's columns alike.
Value order_matrix(hlo::Builder& b, const Value& x, bool descending) {
  const int64_t bt = x.type.shape[0], n = x.type.shape[1];
  const std::vector<int64_t> sh{bt, n, n};
  Value xi = b.broadcast_in_dim(x, sh, {0, 1}), xj = b.broadcast_in_dim(x, sh, {0, 2});
  Value ii = b.iota({DType::S64, sh}, 1), jj = b.iota({DType::S64, sh}, 2);
  Value before = b.binary("or", b.compare(descending ? Compare::GT : Compare::LT, xj, xi),
                          b.binary("and", b.compare(Compare::EQ, xj, xi), b.compare(Compare::LT, jj, ii)));
  Value rank = b.reduce(b.convert(before, DType::S64), b.constant_int(0, DType::S64), {2}, Reducer::Add);  // [bt, n]
  return b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(rank, sh, {0, 1}), jj), x.type.dtype);
}

Value sort_by(hlo::Builder& b, const Value& x, const Value& P) {
  Value y = b.binary("multiply", b.broadcast_in_dim(x, P.type.shape, {0, 1}), P);
  return b.reduce(y, b.constant(0, x.type.dtype), {1}, Reducer::Add);
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues ascending, eigenvectors): from the
// triangle UPLO names.
V lower_linalg_eigh(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.eigh", n.in(0).type.dtype);
  const TensorType &wt = n.out(0), &vt = n.out(1);
  if (n.in(0).type.numel() == 0) return {b.full(0, wt), b.full(0, vt)};
  const std::string& uplo = n.str(1);
  if (uplo != "L" && uplo != "U" && uplo != "l" && uplo != "u")
    throw std::invalid_argument("linalg.eigh: UPLO argument must be either 'L' or 'U', but got " + uplo);
  const bool lower = uplo == "L" || uplo == "l";
  Flat f = flatten(b, n.in(0));
  Value sym = b.binary("add", triangle(b, f.x, lower), bmT(b, triangle(b, f.x, lower, true)));
  auto [d, v] = jacobi(b, sym, false);
  Value w = diagonal(b, d);  // [bt, n]
  Value P = order_matrix(b, w, false);
  Value ws = b.reshape(sort_by(b, w, P), wt.shape);
  if (!n.flag(2)) return {ws, b.full(0, vt)};
  return {ws, b.reshape(bmm(b, v, P), vt.shape)};
}

// x = u diag(s) v^T: u [bt, T, K] (unit columns, zero where s is), s [bt, K] descending,
// v [bt, K, K].
struct Svd {
  Value u, s, v;
};

// The thin SVD of a tall x [bt, T, K] (T >= K).
Svd svd_tall(hlo::Builder& b, const Value& x) {
  const int64_t bt = x.type.shape[0], T = x.type.shape[1], K = x.type.shape[2];
  auto [w, v] = jacobi(b, x, true);
  Math m{b};
  Value norms = m.sqrt(b.reduce(m.mul(w, w), b.constant(0, x.type.dtype), {1}, Reducer::Add));  // [bt, K]
  Value P = order_matrix(b, norms, true);
  Value s = sort_by(b, norms, P);
  Value safe = m.sel(m.eq(s, m.k(0, s)), m.k(1, s), s);
  Value u = m.div(bmm(b, w, P), b.broadcast_in_dim(safe, {bt, T, K}, {0, 2}));
  return {u, s, bmm(b, v, P)};
}

// _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S descending, Vh).
V lower_linalg_svd(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.svd", n.in(0).type.dtype);
  const bool full = n.flag(1), uv = n.flag(2);
  const TensorType &ut = n.out(0), &st = n.out(1), &vht = n.out(2);
  const Value& a = n.in(0);
  const DType dt = a.type.dtype;
  if (a.type.numel() == 0) {
    auto fill = [&](const TensorType& t) { return uv && full && t.numel() > 0 ? eye_like(b, t) : b.full(0, t); };
    return {fill(ut), b.full(0, st), fill(vht)};
  }
  Flat f = flatten(b, a);
  const bool wide = f.x.type.shape[1] < f.x.type.shape[2];
  Value x = wide ? bmT(b, f.x) : f.x;  // [bt, T, K], T >= K
  const int64_t T = x.type.shape[1], K = x.type.shape[2];
  Svd d = svd_tall(b, x);
  if (!uv) return {b.full(0, ut), b.reshape(d.s, st.shape), b.full(0, vht)};
  Value us = d.u;
  if (full && T > K) {
    // The orthogonal complement: the last columns of the Q of us's QR.
    Qr qr = householder_qr(b, us);
    Value q = apply_reflectors(b, qr.a, qr.tau, K, eye_like(b, {dt, {f.bt, T, T}}), false);
    us = b.concatenate({us, b.slice(q, {0, 0, K}, {f.bt, T, T}, {1, 1, 1})}, 2);
  }
  // Tall: A = us S v^T. Wide: A^T = us S v^T, so U = v and Vh = us^T.
  Value u = wide ? d.v : us, vh = wide ? bmT(b, us) : bmT(b, d.v);
  return {b.reshape(u, ut.shape), b.reshape(d.s, st.shape), b.reshape(vh, vht.shape)};
}

// linalg_lstsq(A, B, rcond, driver) -> (solution, residuals, rank, singular_values), as
// LAPACK's drivers: gels and gelsy by QR (A^T's QR when A is wide, the minimum-norm
// solution), which for the full-rank matrices gelsy assumes gives its solution; gelsd and
// gelss by the SVD, singular values up to rcond * the largest dropped. The rank counts the
// singular values above rcond * the largest (rcond: eps * max(m, n) by default). Residuals
// (the squared norms of A X - B's columns) where the meta kernel sizes them: m > n, not
// gelsy.
V lower_lstsq(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.lstsq", n.in(0).type.dtype);
  const std::string driver = n.is_none(3) ? "gelsy" : n.str(3);
  const TensorType &xt = n.out(0), &rest = n.out(1), &rkt = n.out(2), &svt = n.out(3);
  const Value& a = n.in(0);
  const DType dt = a.type.dtype;
  const int64_t r = a.type.rank(), m = a.type.shape[r - 2], c = a.type.shape[r - 1];
  const bool vector = n.in(1).type.rank() == r - 1;
  std::vector<int64_t> batch = vector ? batch_of(xt, 1) : batch_of(xt);
  Value rhs;
  if (vector) {
    std::vector<int64_t> shape = batch;
    shape.push_back(m);
    rhs = broadcast_to(b, n.in(1), shape);
    shape.push_back(1);
    rhs = b.reshape(rhs, shape);
  } else {
    rhs = to_batch(b, n.in(1), batch);
  }
  if (xt.numel() == 0 || m == 0 || rhs.type.numel() == 0)
    return {b.full(0, xt), b.full(0, rest), b.full(0, rkt), b.full(0, svt)};
  Flat fa = flatten(b, to_batch(b, a, batch)), fb = flatten(b, rhs);
  const int64_t bt = fa.bt, k = fb.x.type.shape[2], lo = std::min(m, c);
  const double eps = epsilon(dt);
  const double rcond = n.is_none(2) ? eps * static_cast<double>(std::max(m, c)) : n.f64(2);
  Math mm{b};
  Value x;  // [bt, c, k]
  if (driver == "gels" || driver == "gelsy") {
    if (m >= c) {
      Qr qr = householder_qr(b, fa.x);
      Value y = apply_reflectors(b, qr.a, qr.tau, c, fb.x, true);  // Q^T B
      Value rr = b.slice(qr.a, {0, 0, 0}, {bt, c, c}, {1, 1, 1});
      x = trisolve(b, rr, b.slice(y, {0, 0, 0}, {bt, c, k}, {1, 1, 1}), true, false, false, false);
    } else {
      // A^T = Q R: A X = B is R^T Q^T X = B, and X = Q [R^-T B; 0].
      Qr qr = householder_qr(b, bmT(b, fa.x));
      Value rr = b.slice(qr.a, {0, 0, 0}, {bt, m, m}, {1, 1, 1});
      Value z = trisolve(b, rr, fb.x, true, false, false, true);
      z = b.concatenate({z, b.full(0, {dt, {bt, c - m, k}})}, 1);
      x = apply_reflectors(b, qr.a, qr.tau, m, z, false);
    }
  }
  Value s;
  if (driver != "gels") {
    Svd d = svd_tall(b, m >= c ? fa.x : bmT(b, fa.x));
    s = d.s;  // [bt, lo]
    if (driver == "gelsd" || driver == "gelss") {
      Value top = b.broadcast_in_dim(b.reduce(s, b.constant(0, dt), {1}, Reducer::Max), s.type.shape, {0});
      Value keep = mm.gt(s, mm.mul(top, mm.k(rcond, top)));
      Value inv = mm.sel(keep, mm.div(mm.k(1, s), mm.sel(keep, s, mm.k(1, s))), mm.k(0, s));
      // Tall: A = u S v^T, X = v S^+ u^T B. Wide: A = v S u^T, X = u S^+ v^T B.
      const Value &out_side = m >= c ? d.v : d.u, &in_side = m >= c ? d.u : d.v;
      Value y = b.dot_general(in_side, fb.x, {0}, {0}, {1}, {1}, dt);  // [bt, lo, k]
      y = mm.mul(y, b.broadcast_in_dim(inv, {bt, lo, k}, {0, 1}));
      x = bmm(b, out_side, y);
    }
  }
  V out{b.reshape(x, xt.shape)};
  if (rest.numel() > 0) {
    Value e = mm.sub(bmm(b, fa.x, x), fb.x);
    out.push_back(b.reshape(b.reduce(mm.mul(e, e), b.constant(0, dt), {1}, Reducer::Add), rest.shape));
  } else {
    out.push_back(b.full(0, rest));
  }
  if (rkt.numel() > 0) {
    Value top = b.broadcast_in_dim(b.reduce(s, b.constant(0, dt), {1}, Reducer::Max), s.type.shape, {0});
    Value above = b.convert(mm.gt(s, mm.mul(top, mm.k(rcond, top))), DType::S64);
    out.push_back(b.reshape(b.convert(b.reduce(above, b.constant_int(0, DType::S64), {1}, Reducer::Add), rkt.dtype),
                            rkt.shape));
  } else {
    out.push_back(b.full(0, rkt));
  }
  out.push_back(svt.numel() > 0 ? b.reshape(s, svt.shape) : b.full(0, svt));
  return out;
}

// linalg_matrix_exp(A): exp(A / 2^s) by Taylor's degree-18 polynomial (Horner), squared s
// times, s per matrix from its 1-norm and the bound PyTorch uses for its degree-18
// approximant (so as many squarings as CPU's). bf16/f16 compute in f32.
V lower_matrix_exp(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  if (!hlo::is_float(out.dtype)) not_implemented("linalg.matrix_exp", out.dtype);
  if (out.numel() == 0) return {b.full(0, out)};
  const DType dt = math_dtype(out.dtype);
  Flat f = flatten(b, b.convert(n.in(0), dt));
  const TensorType at = f.x.type;
  Math m{b};
  Value norm1 = b.reduce(b.reduce(m.abs(f.x), b.constant(0, dt), {1}, Reducer::Add), b.constant(0, dt), {1},
                         Reducer::Max);  // [bt]
  const double theta = dt == DType::F64 ? 1.090863719290036 : 3.010066362817634;
  Value sq = m.ceil(m.div(m.log(m.div(norm1, m.k(theta, norm1))), m.k(std::log(2.0), norm1)));
  sq = m.min(m.max(sq, m.k(0, sq)), m.k(64, sq));
  sq = m.sel(m.is_nan(sq), m.k(0, sq), sq);
  Value scale = m.pow(m.k(2, sq), m.neg(sq));
  Value x = m.mul(f.x, b.broadcast_in_dim(scale, at.shape, {0}));
  Value eye = eye_like(b, at);
  Value e = m.add(eye, m.div(x, m.k(18, x)));
  for (int j = 17; j >= 1; --j) e = m.add(eye, m.div(bmm(b, x, e), m.k(j, x)));
  const TensorType s{DType::S64, {}}, ct{DType::S64, {f.bt}};
  Value counts = b.convert(sq, DType::S64);
  Value most = b.reduce(counts, b.constant_int(0, DType::S64), {0}, Reducer::Max);
  const std::vector<TensorType> types{s, s, ct, at};
  std::string cond = b.region(types, [](hlo::Builder& rb, const V& v) {
    return V{rb.compare(Compare::LT, v[0], v[1])};
  });
  std::string body = b.region(types, [=](hlo::Builder& rb, const V& v) {
    Value more = rb.compare(Compare::LT, rb.broadcast_in_dim(v[0], ct.shape, {}), v[2]);
    Value e2 = rb.select(rb.broadcast_in_dim(more, at.shape, {0}), bmm(rb, v[3], v[3]), v[3]);
    return V{rb.binary("add", v[0], s64(rb, 1)), v[1], v[2], e2};
  });
  V res = b.emit_multi("stablehlo.while", {s64(b, 0), most, counts, e}, "", types, {cond, body});
  return {b.convert(b.reshape(res[3], out.shape), out.dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(trace, {"trace", "trace.out"}, lower_trace);
TORCH_TPU_LOWERING(linalg_cross, {"linalg_cross", "linalg_cross.out"}, lower_linalg_cross);
TORCH_TPU_LOWERING(cdist_forward, {"_cdist_forward", "_cdist_forward.out"}, lower_cdist);
TORCH_TPU_LOWERING(pdist_forward, {"_pdist_forward", "_pdist_forward.out"}, lower_pdist);
TORCH_TPU_LOWERING(renorm, {"renorm", "renorm_", "renorm.out"}, lower_renorm);
TORCH_TPU_LOWERING(cholesky_ex, {"linalg_cholesky_ex", "linalg_cholesky_ex.L"}, lower_cholesky_ex);
TORCH_TPU_LOWERING(cholesky, {"cholesky", "cholesky.out"}, lower_cholesky);
TORCH_TPU_LOWERING(cholesky_solve, {"_cholesky_solve_helper", "_cholesky_solve_helper.out"}, lower_cholesky_solve);
// Graphs keep cholesky_solve itself (eager mode reaches the helper after broadcasting).
TORCH_TPU_GRAPH_LOWERING(cholesky_solve_graph, {"cholesky_solve"}, lower_cholesky_solve);
TORCH_TPU_LOWERING(cholesky_inverse, {"cholesky_inverse", "cholesky_inverse.out"}, lower_cholesky_inverse);
TORCH_TPU_LOWERING(solve_triangular, {"linalg_solve_triangular", "linalg_solve_triangular.out"},
                   lower_solve_triangular);
TORCH_TPU_LOWERING(triangular_solve, {"triangular_solve", "triangular_solve.X"}, lower_triangular_solve);
TORCH_TPU_LOWERING(lu_factor_ex, {"linalg_lu_factor_ex", "linalg_lu_factor_ex.out"}, lower_lu_factor_ex);
TORCH_TPU_LOWERING(linalg_det, {"_linalg_det", "_linalg_det.result"}, lower_det);
TORCH_TPU_LOWERING(linalg_slogdet, {"_linalg_slogdet", "_linalg_slogdet.sign"}, lower_slogdet);
TORCH_TPU_LOWERING(inv_ex, {"linalg_inv_ex", "linalg_inv_ex.inverse"}, lower_inv_ex);
TORCH_TPU_LOWERING(solve_ex, {"_linalg_solve_ex", "_linalg_solve_ex.result"}, lower_solve_ex);
TORCH_TPU_LOWERING(lu_solve, {"linalg_lu_solve", "linalg_lu_solve.out"}, lower_lu_solve);
TORCH_TPU_LOWERING(lu_unpack, {"lu_unpack", "lu_unpack.out"}, lower_lu_unpack);
TORCH_TPU_LOWERING(linalg_lu, {"linalg_lu", "linalg_lu.out"}, lower_linalg_lu);
TORCH_TPU_LOWERING(geqrf, {"geqrf", "geqrf.a"}, lower_geqrf);
TORCH_TPU_LOWERING(linalg_qr, {"linalg_qr", "linalg_qr.out"}, lower_linalg_qr);
TORCH_TPU_LOWERING(householder_product, {"linalg_householder_product", "linalg_householder_product.out"},
                   lower_householder_product);
TORCH_TPU_LOWERING(ormqr, {"ormqr", "ormqr.out"}, lower_ormqr);
TORCH_TPU_LOWERING(linalg_eigh, {"_linalg_eigh", "_linalg_eigh.eigenvalues"}, lower_linalg_eigh);
TORCH_TPU_LOWERING(linalg_svd, {"_linalg_svd", "_linalg_svd.U"}, lower_linalg_svd);
TORCH_TPU_LOWERING(lstsq, {"linalg_lstsq", "linalg_lstsq.out"}, lower_lstsq);
TORCH_TPU_LOWERING(matrix_exp, {"linalg_matrix_exp", "linalg_matrix_exp.out"}, lower_matrix_exp);

}  // namespace torch_tpu::ops
