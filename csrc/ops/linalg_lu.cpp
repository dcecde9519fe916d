// Cholesky, triangular solves and LU (with det, slogdet, inv, solve, lu_solve, lu_unpack).

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/common.h"
#include "ops/linalg.h"
#include "ops/reduction.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;
using linalg::batch_of;
using linalg::diagonal;
using linalg::eye_like;
using linalg::float_only;
using linalg::to_batch;
using linalg::triangle;
using linalg::trisolve;

// ---- factorizations and solves ---------------------------------------------------------
//
// Cholesky and triangular solves are StableHLO ops (XLA:CPU expands them); LU with
// partial pivoting (LAPACK's getrf: the first largest magnitude of the column below the
// diagonal is the pivot) runs as a stablehlo.while over the columns. det, slogdet, inv,
// solve and lu_solve follow from it. Float32 and float64 only, as PyTorch's CPU kernels
// (the meta kernels reject the rest).

Value mT(hlo::Builder& b, const Value& x) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.type.rank(); ++d) perm.push_back(d);
  std::swap(perm[x.type.rank() - 1], perm[x.type.rank() - 2]);
  return b.transpose(x, perm);
}

Value cholesky(hlo::Builder& b, const Value& a, bool upper) {
  Value l = b.emit("stablehlo.cholesky", {a}, std::string("lower = ") + (upper ? "false" : "true"),
                   a.type);
  return triangle(b, l, !upper);
}

Value cholesky_info(hlo::Builder& b, const Value& a, const TensorType& out);

V lower_cholesky_ex(Node& n) {
  float_only("linalg_cholesky_ex", n.in(0).type.dtype);
  if (n.out(0).numel() == 0) return {n.b.full(0, n.out(0)), n.b.full(0, n.out(1))};
  // The minors of the symmetric matrix the used triangle stands for.
  const bool upper = n.flag(1);
  Value half = triangle(n.b, n.in(0), !upper), strict = triangle(n.b, n.in(0), !upper, true);
  Value sym = n.b.binary(Binary::Add, half, mT(n.b, strict));
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
  Value lu;    // [..., m, n]
  Value perm;  // s64 [..., m]: row i of P A is row perm[i] of A
  Value piv;   // s32 [..., min(m, n)], 1-based as LAPACK's
  Value info;  // s32 [...]
};

Lu lu_factor(hlo::Builder& b, const Value& a_in, bool pivot = true) {
  const TensorType& t = a_in.type;
  const int64_t r = t.rank(), m = t.shape[r - 2], n = t.shape[r - 1], k = std::min(m, n);
  std::vector<int64_t> batch = batch_of(t);
  int64_t bt = 1;
  for (int64_t d : batch) bt *= d;
  Value a = b.reshape(a_in, {bt, m, n});
  const TensorType at = a.type, pt{DType::S64, {bt, m}},
                   vt{DType::S32, {bt, std::max<int64_t>(k, 1)}}, it{DType::S32, {bt}},
                   s{DType::S64, {}};
  const DType dt = t.dtype;
  std::string cond = b.region({s, at, pt, vt, it}, [k](hlo::Builder& rb, const V& x) {
    return V{rb.compare(Compare::LT, x[0], rb.constant_int(k, DType::S64))};
  });
  std::string body = b.region({s, at, pt, vt, it}, [=](hlo::Builder& rb, const V& x) {
    Math mm{rb};
    const Value &step = x[0], &A = x[1], &perm = x[2], &piv = x[3], &info = x[4];
    TensorType ai{DType::S64, at.shape};
    Value rows = rb.iota(ai, 1), cols = rb.iota(ai, 2);
    Value k3 = rb.broadcast_in_dim(step, at.shape, {}),
          k2 = rb.broadcast_in_dim(step, pt.shape, {});
    Value zero = rb.full(0, at);
    Value col = rb.reduce(rb.select(rb.compare(Compare::EQ, cols, k3), A, zero), rb.constant(0, dt),
                          {2}, Binary::Add);
    Value r2 = rb.iota(pt, 1);
    Value below = rb.compare(Compare::GE, r2, k2);
    Value mag = rb.select(below, mm.abs(col), rb.full(-1, col.type));
    Value top = rb.reduce(mag, rb.constant(-1, dt), {1}, Binary::Maximum);
    Value hit = rb.compare(Compare::EQ, mag, rb.broadcast_in_dim(top, pt.shape, {0}));
    Value p = rb.reduce(rb.select(hit, r2, rb.full(static_cast<double>(m), pt)),
                        rb.constant_int(m, DType::S64), {1},
                        Binary::Minimum);  // [bt]
    if (!pivot) p = rb.broadcast_in_dim(step, {bt}, {});
    Value p3 = rb.broadcast_in_dim(p, at.shape, {0}), p2 = rb.broadcast_in_dim(p, pt.shape, {0});
    auto row_of = [&](const Value& which) {  // [bt, n]
      return rb.reduce(rb.select(rb.compare(Compare::EQ, rows, which), A, zero), rb.constant(0, dt),
                       {1}, Binary::Add);
    };
    Value row_k = row_of(k3), row_p = row_of(p3);
    auto rows_b = [&](const Value& v) { return rb.broadcast_in_dim(v, at.shape, {0, 2}); };
    Value is_k = rb.compare(Compare::EQ, rows, k3), is_p = rb.compare(Compare::EQ, rows, p3);
    Value swapped = rb.select(is_k, rows_b(row_p), rb.select(is_p, rows_b(row_k), A));
    Value pk = rb.reduce(rb.select(rb.compare(Compare::EQ, r2, k2), perm, rb.full(0, pt)),
                         rb.constant_int(0, DType::S64), {1}, Binary::Add);
    Value pp = rb.reduce(rb.select(rb.compare(Compare::EQ, r2, p2), perm, rb.full(0, pt)),
                         rb.constant_int(0, DType::S64), {1}, Binary::Add);
    Value perm1 = rb.select(
        rb.compare(Compare::EQ, r2, k2), rb.broadcast_in_dim(pp, pt.shape, {0}),
        rb.select(rb.compare(Compare::EQ, r2, p2), rb.broadcast_in_dim(pk, pt.shape, {0}), perm));
    Value vi = rb.iota(vt, 1);
    Value piv1 = rb.select(
        rb.compare(Compare::EQ, vi,
                   rb.broadcast_in_dim(rb.convert(step, DType::S32), vt.shape, {})),
        rb.broadcast_in_dim(rb.convert(rb.binary(Binary::Add, p, rb.full(1, p.type)), DType::S32),
                            vt.shape, {0}),
        piv);
    // The pivot, the multipliers below it, and the trailing update.
    Value pivot = rb.reduce(rb.select(rb.compare(Compare::EQ, rb.iota({DType::S64, {bt, n}}, 1),
                                                 rb.broadcast_in_dim(step, {bt, n}, {})),
                                      row_p, rb.full(0, row_p.type)),
                            rb.constant(0, dt), {1}, Binary::Add);  // [bt]
    Value singular = rb.compare(Compare::EQ, pivot, rb.full(0, pivot.type));
    Value info1 = rb.select(
        rb.binary(Binary::And, singular, rb.compare(Compare::EQ, info, rb.full(0, info.type))),
        rb.binary(Binary::Add, rb.broadcast_in_dim(rb.convert(step, DType::S32), it.shape, {}),
                  rb.full(1, it)),
        info);
    Value col1 = rb.reduce(rb.select(rb.compare(Compare::EQ, cols, k3), swapped, zero),
                           rb.constant(0, dt), {2}, Binary::Add);
    Value safe = rb.select(singular, rb.full(1, pivot.type), pivot);
    Value l = rb.binary(Binary::Divide, col1, rb.broadcast_in_dim(safe, pt.shape, {0}));
    Value use = rb.binary(Binary::And, rb.compare(Compare::GT, r2, k2),
                          rb.unary(Unary::Not, rb.broadcast_in_dim(singular, pt.shape, {0})));
    l = rb.select(use, l, rb.full(0, l.type));
    Value lb = rb.broadcast_in_dim(l, at.shape, {0, 1});
    Value update = rb.select(rb.compare(Compare::GT, cols, k3),
                             rb.binary(Binary::Multiply, lb, rows_b(row_p)), zero);
    Value out = rb.binary(Binary::Subtract, swapped, update);
    Value store = rb.binary(Binary::And, rb.compare(Compare::EQ, cols, k3),
                            rb.broadcast_in_dim(use, at.shape, {0, 1}));
    out = rb.select(store, lb, out);
    return V{rb.binary(Binary::Add, step, rb.constant_int(1, DType::S64)), out, perm1, piv1, info1};
  });
  V res =
      b.emit_multi("stablehlo.while",
                   {b.constant_int(0, DType::S64), a, b.iota(pt, 1), b.full(0, vt), b.full(0, it)},
                   "", {s, at, pt, vt, it}, {cond, body});
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
  Value onehot = b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(perm, shape, pd),
                                     b.iota({DType::S64, shape}, r - 1)),
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
  Value p64 = b.binary(Binary::Subtract, b.convert(piv, DType::S64),
                       b.full(1, {DType::S64, piv.type.shape}));
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
    Value vi = b.reduce(b.select(at_i, perm, b.full(0, pt)), b.constant_int(0, DType::S64), {r - 1},
                        Binary::Add);
    Value vt = b.reduce(b.select(at_t, perm, b.full(0, pt)), b.constant_int(0, DType::S64), {r - 1},
                        Binary::Add);
    perm = b.select(at_i, b.broadcast_in_dim(vt, shape, bd),
                    b.select(at_t, b.broadcast_in_dim(vi, shape, bd), perm));
  }
  return perm;
}

// (-1)^(rows moved by the pivots).
Value pivot_sign(hlo::Builder& b, const Value& piv, DType dtype) {
  const int64_t r = piv.type.rank();
  TensorType it{DType::S32, piv.type.shape};
  Value moved =
      b.compare(Compare::NE, piv, b.binary(Binary::Add, b.iota(it, r - 1), b.full(1, it)));
  Value count =
      b.reduce(b.convert(moved, DType::S64), b.constant_int(0, DType::S64), {r - 1}, Binary::Add);
  Value odd = b.compare(Compare::EQ, b.binary(Binary::Remainder, count, b.full(2, count.type)),
                        b.full(1, count.type));
  return b.select(odd, b.full(-1, {dtype, count.type.shape}), b.full(1, {dtype, count.type.shape}));
}

// Per matrix: 1 + the order of the first leading minor that is not positive, or 0 (the
// factor is NaN then, so the minors come from elimination without pivoting, whose k-th
// pivot is the ratio of the k-th leading minor to the one before).
Value cholesky_info(hlo::Builder& b, const Value& a, const TensorType& out) {
  const int64_t r = a.type.rank(), n = a.type.shape[r - 1];
  if (n == 0 || a.type.numel() == 0) return b.full(0, out);
  Value d = diagonal(b, lu_factor(b, a, false).lu);                               // [..., n]
  Value bad = b.unary(Unary::Not, b.compare(Compare::GT, d, b.full(0, d.type)));  // <= 0 or NaN
  TensorType pt{DType::S64, d.type.shape};
  Value pos = b.select(bad, b.binary(Binary::Add, b.iota(pt, r - 2), b.full(1, pt)),
                       b.full(static_cast<double>(n + 1), pt));
  Value first = b.reduce(pos, b.constant_int(n + 1, DType::S64), {r - 2}, Binary::Minimum);
  Value info =
      b.select(b.compare(Compare::EQ, first, b.full(static_cast<double>(n + 1), first.type)),
               b.full(0, first.type), first);
  return b.reshape(b.convert(info, out.dtype), out.shape);
}

V lower_lu_factor_ex(Node& n) {
  float_only("linalg_lu_factor_ex", n.in(0).type.dtype);
  if (!n.flag(1))
    throw std::invalid_argument(
        "linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  if (n.in(0).type.numel() == 0)
    return {n.b.full(0, n.out(0)), n.b.full(1, n.out(1)), n.b.full(0, n.out(2))};
  Lu f = lu_factor(n.b, n.in(0));
  return {f.lu, f.piv, f.info};
}

// det and slogdet factor A^T, as PyTorch does for a row-major A (their backward solves
// with that factor).
V lower_det(Node& n) {
  hlo::Builder& b = n.b;
  float_only("linalg.det", n.in(0).type.dtype);
  if (n.in(0).type.numel() == 0)
    return {b.full(1, n.out(0)), b.full(0, n.out(1)), b.full(1, n.out(2))};
  Lu f = lu_factor(b, mT(b, n.in(0)));
  const int64_t r = f.lu.type.rank();
  Value d = b.reduce(diagonal(b, f.lu), b.constant(1, f.lu.type.dtype), {r - 2}, Binary::Multiply);
  return {b.binary(Binary::Multiply, d, pivot_sign(b, f.piv, d.type.dtype)), f.lu, f.piv};
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
  Value neg = b.reduce(b.convert(m.lt(diag, m.k(0, diag)), DType::S64),
                       b.constant_int(0, DType::S64), {r - 2}, Binary::Add);
  Value sign = pivot_sign(b, f.piv, diag.type.dtype);
  Value odd = b.compare(Compare::EQ, b.binary(Binary::Remainder, neg, b.full(2, neg.type)),
                        b.full(1, neg.type));
  sign = b.select(odd, b.unary(Unary::Negate, sign), sign);
  Value zero = b.reduce(b.convert(m.eq(diag, m.k(0, diag)), DType::S64),
                        b.constant_int(0, DType::S64), {r - 2}, Binary::Add);
  sign = b.select(b.compare(Compare::GT, zero, b.full(0, zero.type)), b.full(0, sign.type), sign);
  Value logabs = b.reduce(m.log(m.abs(diag)), b.constant(0, diag.type.dtype), {r - 2}, Binary::Add);
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
    Value onehot = b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(perm, shape, pd),
                                       b.iota({DType::S64, shape}, r - 2)),
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
  const int64_t r = lu.type.rank(), m = lu.type.shape[r - 2], c = lu.type.shape[r - 1],
                k = std::min(m, c);
  V out;
  if (n.flag(3) && n.out(0).numel() > 0) {
    Value perm = perm_from_pivots(b, n.in(1), m);  // [..., m]
    std::vector<int64_t> shape = n.out(0).shape, pd;
    for (int64_t d = 0; d < r - 2; ++d) pd.push_back(d);
    pd.push_back(r - 1);
    // P[perm[i], i] = 1.
    out.push_back(b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(perm, shape, pd),
                                      b.iota({DType::S64, shape}, r - 2)),
                            n.out(0).dtype));
  } else {
    out.push_back(b.full(0, n.out(0)));
  }
  if (n.flag(2) && n.out(1).numel() > 0) {
    std::vector<int64_t> lo(r, 0), hi = lu.type.shape, st(r, 1);
    hi[r - 1] = k;
    Value l = triangle(b, b.slice(lu, lo, hi, st), true, true);
    out.push_back(b.binary(Binary::Add, l, eye_like(b, l.type)));
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
  if (!n.flag(1))
    throw std::invalid_argument("linalg.lu: LU without pivoting is not implemented on the CPU");
  if (n.in(0).type.numel() == 0)
    return {b.full(0, n.out(0)), b.full(0, n.out(1)), b.full(0, n.out(2))};
  Lu f = lu_factor(b, n.in(0));
  const int64_t r = f.lu.type.rank(), m = f.lu.type.shape[r - 2], c = f.lu.type.shape[r - 1],
                k = std::min(m, c);
  std::vector<int64_t> shape = n.out(0).shape, pd;
  for (int64_t d = 0; d < r - 2; ++d) pd.push_back(d);
  pd.push_back(r - 1);
  Value p = b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(f.perm, shape, pd),
                                b.iota({DType::S64, shape}, r - 2)),
                      n.out(0).dtype);
  std::vector<int64_t> lo(r, 0), hi = f.lu.type.shape, st(r, 1);
  hi[r - 1] = k;
  Value l = triangle(b, b.slice(f.lu, lo, hi, st), true, true);
  l = b.binary(Binary::Add, l, eye_like(b, l.type));
  hi = f.lu.type.shape;
  hi[r - 2] = k;
  return {p, l, triangle(b, b.slice(f.lu, lo, hi, st), false)};
}

}  // namespace

TORCH_TPU_LOWERING(cholesky_ex, {"linalg_cholesky_ex", "linalg_cholesky_ex.L"}, lower_cholesky_ex);
TORCH_TPU_LOWERING(cholesky, {"cholesky", "cholesky.out"}, lower_cholesky);
TORCH_TPU_LOWERING(cholesky_solve, {"_cholesky_solve_helper", "_cholesky_solve_helper.out"},
                   lower_cholesky_solve);
TORCH_TPU_GRAPH_LOWERING(cholesky_solve_graph, {"cholesky_solve"}, lower_cholesky_solve);
TORCH_TPU_LOWERING(cholesky_inverse, {"cholesky_inverse", "cholesky_inverse.out"},
                   lower_cholesky_inverse);
TORCH_TPU_LOWERING(solve_triangular, {"linalg_solve_triangular", "linalg_solve_triangular.out"},
                   lower_solve_triangular);
TORCH_TPU_LOWERING(triangular_solve, {"triangular_solve", "triangular_solve.X"},
                   lower_triangular_solve);
TORCH_TPU_LOWERING(lu_factor_ex, {"linalg_lu_factor_ex", "linalg_lu_factor_ex.out"},
                   lower_lu_factor_ex);
TORCH_TPU_LOWERING(linalg_det, {"_linalg_det", "_linalg_det.result"}, lower_det);
TORCH_TPU_LOWERING(linalg_slogdet, {"_linalg_slogdet", "_linalg_slogdet.sign"}, lower_slogdet);
TORCH_TPU_LOWERING(inv_ex, {"linalg_inv_ex", "linalg_inv_ex.inverse"}, lower_inv_ex);
TORCH_TPU_LOWERING(solve_ex, {"_linalg_solve_ex", "_linalg_solve_ex.result"}, lower_solve_ex);
TORCH_TPU_LOWERING(lu_solve, {"linalg_lu_solve", "linalg_lu_solve.out"}, lower_lu_solve);
TORCH_TPU_LOWERING(lu_unpack, {"lu_unpack", "lu_unpack.out"}, lower_lu_unpack);
TORCH_TPU_LOWERING(linalg_lu, {"linalg_lu", "linalg_lu.out"}, lower_linalg_lu);

}  // namespace torch_tpu::ops
