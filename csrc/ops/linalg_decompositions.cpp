// Householder QR, Jacobi eigh and SVD, least squares and the matrix exponential.

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

Value sum_where(hlo::Builder& b, const Value& mask, const Value& x,
                const std::vector<int64_t>& dims) {
  return b.reduce(b.select(mask, x, b.full(0, x.type)), b.constant(0, x.type.dtype), dims,
                  Binary::Add);
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
  Value w = b.reduce(m.mul(vb, C), b.constant(0, C.type.dtype), {1}, Binary::Add);  // [bt, c]
  return m.sub(C,
               m.mul(b.broadcast_in_dim(t, sh, {0}), m.mul(vb, b.broadcast_in_dim(w, sh, {0, 2}))));
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
    Value xnorm2 = rb.reduce(mm.mul(tail, tail), rb.constant(0, dt), {1}, Binary::Add);
    Value norm = mm.sqrt(mm.add(mm.mul(alpha, alpha), xnorm2));
    Value beta = mm.sel(mm.ge(alpha, mm.k(0, alpha)), mm.neg(norm), norm);
    // Nothing below the diagonal: H = I (tau = 0), as LAPACK's dlarfg.
    Value trivial = mm.eq(xnorm2, mm.k(0, xnorm2));
    Value t = mm.sel(trivial, mm.k(0, beta),
                     mm.div(mm.sub(beta, alpha), mm.sel(trivial, mm.k(1, beta), beta)));
    Value scale = mm.div(mm.k(1, beta), mm.sel(trivial, mm.k(1, beta), mm.sub(alpha, beta)));
    Value v =
        rb.select(diag, rb.full(1, col.type), mm.mul(tail, rb.broadcast_in_dim(scale, vs, {0})));
    Value out = rb.select(at_index(rb, at.shape, 2, j, Compare::GT), reflect(rb, v, t, A),
                          A);  // columns > j
    Value newcol = rb.select(diag, rb.broadcast_in_dim(mm.sel(trivial, alpha, beta), vs, {0}),
                             rb.select(below, v, col));
    out =
        rb.select(at_index(rb, at.shape, 2, j), rb.broadcast_in_dim(newcol, at.shape, {0, 1}), out);
    Value tau1 =
        rb.select(at_index(rb, tt.shape, 1, j), rb.broadcast_in_dim(t, tt.shape, {0}), tau);
    return V{rb.binary(Binary::Add, j, s64(rb, 1)), out, tau1};
  });
  V res = b.emit_multi("stablehlo.while", {s64(b, 0), a0, b.full(0, tt)}, "", {s, at, tt},
                       {cond, body});
  return {res[1], res[2]};
}

// Q C (or Q^T C with `transpose`) for Q = H_0 ... H_{k-1}, the reflectors in the columns of
// R [bt, m, >= k] below the diagonal (unit diagonal implied), factors tau [bt, >= k], and
// C [bt, m, c].
Value apply_reflectors(hlo::Builder& b, const Value& R, const Value& tau, int64_t k, const Value& C,
                       bool transpose) {
  const TensorType rt = R.type, tt = tau.type, ct = C.type, s{DType::S64, {}};
  const int64_t bt = ct.shape[0], m = ct.shape[1];
  std::string cond = b.region({s, rt, tt, ct}, [k](hlo::Builder& rb, const V& x) {
    return V{rb.compare(Compare::LT, x[0], s64(rb, k))};
  });
  std::string body = b.region({s, rt, tt, ct}, [=](hlo::Builder& rb, const V& x) {
    const Value &i = x[0], &Rr = x[1], &T = x[2], &Cc = x[3];
    Value j = transpose ? i : rb.binary(Binary::Subtract, s64(rb, k - 1), i);
    const std::vector<int64_t> vs{bt, m};
    Value col = column_at(rb, Rr, j);
    Value v = rb.select(at_index(rb, vs, 1, j), rb.full(1, col.type),
                        rb.select(at_index(rb, vs, 1, j, Compare::GT), col, rb.full(0, col.type)));
    return V{rb.binary(Binary::Add, i, s64(rb, 1)), Rr, T,
             reflect(rb, v, element_at(rb, T, j), Cc)};
  });
  V res =
      b.emit_multi("stablehlo.while", {s64(b, 0), R, tau, C}, "", {s, rt, tt, ct}, {cond, body});
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
  if (a.type.numel() == 0)
    return {mode == "complete" && qt.numel() > 0 ? eye_like(b, qt) : b.full(0, qt), b.full(0, rt)};
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
std::pair<Value, Value> jacobi_rotation(const Math& m, const Value& app, const Value& aqq,
                                        const Value& apq) {
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
Value rotate(hlo::Builder& b, const Value& X, const Value& p, const Value& q, const Value& c,
             const Value& s, bool rows) {
  Math m{b};
  const std::vector<int64_t>& sh = X.type.shape;
  const int64_t dim = rows ? 1 : 2;
  auto line = [&](const Value& i) {
    return sum_where(b, at_index(b, sh, dim, i), X, {dim});
  };  // [bt, other]
  Value xp = line(p), xq = line(q);
  Value cb = b.broadcast_in_dim(c, xp.type.shape, {0}),
        sb = b.broadcast_in_dim(s, xp.type.shape, {0});
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
                          : b.reduce(b.binary(Binary::Multiply, X, X), b.constant(0, dt), {1, 2},
                                     Binary::Add);
  const std::vector<TensorType> types{s, s, s, pr, pr, xt, vt, nt};
  std::string cond = b.region(types, [](hlo::Builder& rb, const V& x) {
    return V{rb.binary(Binary::And, rb.compare(Compare::LT, x[2], s64(rb, max_sweeps)),
                       rb.unary(Unary::Not, x[3]))};
  });
  std::string body = b.region(types, [=](hlo::Builder& rb, const V& x) {
    Math mm{rb};
    const Value &p = x[0], &q = x[1], &sweep = x[2], &done = x[3], &clean = x[4], &A = x[5],
                &Vv = x[6], &sc = x[7];
    Value app, aqq, apq, small;
    if (one_sided) {
      Value cp = column_at(rb, A, p), cq = column_at(rb, A, q);
      auto dot = [&](const Value& u, const Value& w) {
        return rb.reduce(mm.mul(u, w), rb.constant(0, dt), {1}, Binary::Add);
      };
      app = dot(cp, cp), aqq = dot(cq, cq), apq = dot(cp, cq);
      small = mm.le(mm.mul(apq, apq), mm.mul(mm.k(tol2, apq), mm.mul(app, aqq)));
    } else {
      const std::vector<int64_t> sq{bt, n, n};
      auto entry = [&](const Value& i, const Value& j) {
        return sum_where(rb, rb.binary(Binary::And, at_index(rb, sq, 1, i), at_index(rb, sq, 2, j)),
                         A, {1, 2});
      };
      app = entry(p, p), aqq = entry(q, q), apq = entry(p, q);
      small = mm.le(mm.mul(apq, apq), mm.mul(mm.k(tol2, apq), sc));
    }
    auto [c, sn] = jacobi_rotation(mm, app, aqq, apq);
    Value An = rotate(rb, A, p, q, c, sn, false);
    if (!one_sided) {
      An = rotate(rb, An, p, q, c, sn, true);
      const std::vector<int64_t> sq{bt, n, n};
      Value pq = rb.binary(Binary::Or,
                           rb.binary(Binary::And, at_index(rb, sq, 1, p), at_index(rb, sq, 2, q)),
                           rb.binary(Binary::And, at_index(rb, sq, 1, q), at_index(rb, sq, 2, p)));
      An = rb.select(pq, rb.full(0, An.type), An);
    }
    Value Vn = rotate(rb, Vv, p, q, c, sn, false);
    Value clean1 = rb.binary(Binary::And, clean,
                             rb.reduce(small, rb.constant(1, DType::Pred), {0}, Binary::And));
    // The next pair in row order; a new sweep after (n - 2, n - 1).
    Value one = s64(rb, 1);
    Value q1 = rb.binary(Binary::Add, q, one);
    Value wrap = rb.compare(Compare::EQ, q1, s64(rb, n));
    Value p1 = rb.select(wrap, rb.binary(Binary::Add, p, one), p);
    q1 = rb.select(wrap, rb.binary(Binary::Add, p1, one), q1);
    Value fresh = rb.compare(Compare::EQ, p1, s64(rb, n - 1));
    return V{rb.select(fresh, s64(rb, 0), p1),
             rb.select(fresh, one, q1),
             rb.select(fresh, rb.binary(Binary::Add, sweep, one), sweep),
             rb.select(fresh, clean1, done),
             rb.select(fresh, rb.constant(1, DType::Pred), clean1),
             An,
             Vn,
             sc};
  });
  V res = b.emit_multi("stablehlo.while",
                       {s64(b, 0), s64(b, 1), s64(b, 0), b.constant(0, DType::Pred),
                        b.constant(1, DType::Pred), X, v0, scale},
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
  Value before = b.binary(
      Binary::Or, b.compare(descending ? Compare::GT : Compare::LT, xj, xi),
      b.binary(Binary::And, b.compare(Compare::EQ, xj, xi), b.compare(Compare::LT, jj, ii)));
  Value rank = b.reduce(b.convert(before, DType::S64), b.constant_int(0, DType::S64), {2},
                        Binary::Add);  // [bt, n]
  return b.convert(b.compare(Compare::EQ, b.broadcast_in_dim(rank, sh, {0, 1}), jj), x.type.dtype);
}

Value sort_by(hlo::Builder& b, const Value& x, const Value& P) {
  Value y = b.binary(Binary::Multiply, b.broadcast_in_dim(x, P.type.shape, {0, 1}), P);
  return b.reduce(y, b.constant(0, x.type.dtype), {1}, Binary::Add);
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
    throw std::invalid_argument("linalg.eigh: UPLO argument must be either 'L' or 'U', but got " +
                                uplo);
  const bool lower = uplo == "L" || uplo == "l";
  Flat f = flatten(b, n.in(0));
  Value sym = b.binary(Binary::Add, triangle(b, f.x, lower), bmT(b, triangle(b, f.x, lower, true)));
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
  Value norms =
      m.sqrt(b.reduce(m.mul(w, w), b.constant(0, x.type.dtype), {1}, Binary::Add));  // [bt, K]
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
    auto fill = [&](const TensorType& t) {
      return uv && full && t.numel() > 0 ? eye_like(b, t) : b.full(0, t);
    };
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
      Value top = b.broadcast_in_dim(b.reduce(s, b.constant(0, dt), {1}, Binary::Maximum),
                                     s.type.shape, {0});
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
    out.push_back(
        b.reshape(b.reduce(mm.mul(e, e), b.constant(0, dt), {1}, Binary::Add), rest.shape));
  } else {
    out.push_back(b.full(0, rest));
  }
  if (rkt.numel() > 0) {
    Value top =
        b.broadcast_in_dim(b.reduce(s, b.constant(0, dt), {1}, Binary::Maximum), s.type.shape, {0});
    Value above = b.convert(mm.gt(s, mm.mul(top, mm.k(rcond, top))), DType::S64);
    out.push_back(b.reshape(
        b.convert(b.reduce(above, b.constant_int(0, DType::S64), {1}, Binary::Add), rkt.dtype),
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
  Value norm1 =
      b.reduce(b.reduce(m.abs(f.x), b.constant(0, dt), {1}, Binary::Add), b.constant(0, dt), {1},
               Binary::Maximum);  // [bt]
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
  Value most = b.reduce(counts, b.constant_int(0, DType::S64), {0}, Binary::Maximum);
  const std::vector<TensorType> types{s, s, ct, at};
  std::string cond = b.region(
      types, [](hlo::Builder& rb, const V& v) { return V{rb.compare(Compare::LT, v[0], v[1])}; });
  std::string body = b.region(types, [=](hlo::Builder& rb, const V& v) {
    Value more = rb.compare(Compare::LT, rb.broadcast_in_dim(v[0], ct.shape, {}), v[2]);
    Value e2 = rb.select(rb.broadcast_in_dim(more, at.shape, {0}), bmm(rb, v[3], v[3]), v[3]);
    return V{rb.binary(Binary::Add, v[0], s64(rb, 1)), v[1], v[2], e2};
  });
  V res = b.emit_multi("stablehlo.while", {s64(b, 0), most, counts, e}, "", types, {cond, body});
  return {b.convert(b.reshape(res[3], out.shape), out.dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(geqrf, {"geqrf", "geqrf.a"}, lower_geqrf);
TORCH_TPU_LOWERING(linalg_qr, {"linalg_qr", "linalg_qr.out"}, lower_linalg_qr);
TORCH_TPU_LOWERING(householder_product,
                   {"linalg_householder_product", "linalg_householder_product.out"},
                   lower_householder_product);
TORCH_TPU_LOWERING(ormqr, {"ormqr", "ormqr.out"}, lower_ormqr);
TORCH_TPU_LOWERING(linalg_eigh, {"_linalg_eigh", "_linalg_eigh.eigenvalues"}, lower_linalg_eigh);
TORCH_TPU_LOWERING(linalg_svd, {"_linalg_svd", "_linalg_svd.U"}, lower_linalg_svd);
TORCH_TPU_LOWERING(lstsq, {"linalg_lstsq", "linalg_lstsq.out"}, lower_lstsq);
TORCH_TPU_LOWERING(matrix_exp, {"linalg_matrix_exp", "linalg_matrix_exp.out"}, lower_matrix_exp);

}  // namespace torch_tpu::ops
