// torch.special functions without a StableHLO/CHLO counterpart: the orthogonal
// polynomials (Chebyshev T/U/V/W and their shifted forms, Hermite, Laguerre, Legendre),
// erfcx, log_ndtr, spherical_bessel_j0, Airy's Ai, the Hurwitz zeta function, polygamma and the
// regularized incomplete gamma functions. Integer and bool
// inputs promote to f32 (the meta kernel gives the result dtype); the math runs in the
// promoted float dtype, as PyTorch's CPU kernels do, except where noted.
//
// The polynomials take the degree n as a float tensor truncated to an integer, as
// PyTorch's kernels do (NaN and out-of-range degrees count as negative). They follow the
// same branches as PyTorch's: special values at the ends of the interval, the closed
// trigonometric form for large degrees inside it, and the three-term recurrence
// otherwise, which runs in a stablehlo.while up to the largest degree that needs it.
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/elementwise.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

const double kPi = 3.14159265358979323846;

// One step of a three-term recurrence: P_j from j (as a float of x's type), x, P_{j-2}
// and P_{j-1}.
using Step = Value (*)(const Math&, const Value& j, const Value& x, const Value& p, const Value& q);

// P_n(x) per element for n >= 1, from P_0 = p0 and P_1 = q1, stepping j = 2..n. Elements
// whose degree is above `limit` (s64 0-d) stop there; the caller does not use them.
Value recurrence(hlo::Builder& b, const Value& x, const Value& n, const Value& limit,
                 const Value& p0, const Value& q1, Step step) {
  const TensorType s{DType::S64, {}};
  const TensorType xt = x.type, nt = n.type;
  std::string cond = b.region({s, s, xt, nt, xt, xt}, [](hlo::Builder& r, const V& a) {
    return V{r.compare(Compare::LE, a[0], a[1])};
  });
  std::string body = b.region({s, s, xt, nt, xt, xt}, [step](hlo::Builder& r, const V& a) {
    Math m{r};
    const Value &j = a[0], &x = a[2], &n = a[3], &p = a[4], &q = a[5];
    Value jf = r.broadcast_in_dim(r.convert(j, x.type.dtype), x.type.shape, {});
    Value next = step(m, jf, x, p, q);
    Value active = r.compare(Compare::LE, r.broadcast_in_dim(j, n.type.shape, {}), n);
    Value j1 = r.binary(Binary::Add, j, r.constant_int(1, DType::S64));
    return V{j1, a[1], x, n, m.sel(active, q, p), m.sel(active, next, q)};
  });
  V out = b.emit_multi("stablehlo.while", {b.constant_int(2, DType::S64), limit, x, n, p0, q1}, "",
                       {s, s, xt, nt, xt, xt}, {cond, body});
  return out[5];
}

// The degree as s64: truncated toward zero; NaN and values beyond the int64 range give
// -1 (x86's conversion gives INT64_MIN for them, which PyTorch's kernels see as negative).
Value degree(const Math& m, const Value& nf) {
  Value in_range = m.lt(m.abs(nf), m.k(9.2e18, nf));
  Value n = m.b.convert(m.sel(in_range, nf, m.k(-1, nf)), DType::S64);
  return n;
}

Value even(const Math& m, const Value& n) {
  return m.eq(m.b.binary(Binary::Remainder, n, m.k(2, n)), m.k(0, n));
}

// A polynomial family: its special cases (applied last, in order, over the recurrence)
// and its recurrence.
struct Family {
  // P_1(x) (P_0 is 1).
  Value (*first)(const Math&, const Value& x);
  Step step;
  // (where, value) pairs, the later ones winning; the recurrence need not reach them.
  std::vector<std::pair<Value, Value>> (*special)(const Math&, const Value& x, const Value& n,
                                                  const Value& nx);
};

LowerFn polynomial(Family f) {
  return [f](Node& n) {
    hlo::Builder& b = n.b;
    Math m{b};
    Value x = arg_math(n, 0);
    Value ni = degree(m, arg_math(n, 1));
    Value nx = b.convert(ni, x.type.dtype);  // the degree as a float, for closed forms
    auto cases = f.special(m, x, ni, nx);
    Value covered = m.lt(ni, m.k(2, ni));
    for (const auto& c : cases) covered = m.or_(covered, c.first);
    std::vector<int64_t> all;
    for (int64_t d = 0; d < ni.type.rank(); ++d) all.push_back(d);
    Value needed = m.sel(covered, m.k(0, ni), ni);
    Value limit = all.empty()
                      ? needed
                      : b.reduce(needed, b.constant_int(0, DType::S64), all, Binary::Maximum);
    Value r = recurrence(b, x, ni, limit, m.k(1, x), f.first(m, x), f.step);
    r = m.sel(m.eq(ni, m.k(0, ni)), m.k(1, x), r);
    r = m.sel(m.lt(ni, m.k(0, ni)), m.k(0, x), r);
    // The special cases apply to n >= 0 only (n < 0 gives 0 first in PyTorch's kernels).
    Value nonneg = m.ge(ni, m.k(0, ni));
    for (const auto& c : cases) r = m.sel(m.and_(nonneg, c.first), c.second, r);
    return V{r};
  };
}

Value shifted(const Math& m, const Value& x) { return m.sub(m.add(x, x), m.k(1, x)); }
Value acos(const Math& m, const Value& x) { return m.b.unary(Unary::Acos, x); }
Value sin(const Math& m, const Value& x) { return m.b.unary(Unary::Sine, x); }
Value cos(const Math& m, const Value& x) { return m.b.unary(Unary::Cosine, x); }
// +v or -v by the parity of n.
Value by_parity(const Math& m, const Value& n, const Value& v) {
  return m.sel(even(m, n), v, m.neg(v));
}

// Chebyshev: r = 2 y q - p, with y = x or the shifted 2x - 1.
template <bool Shifted>
Value chebyshev_step(const Math& m, const Value&, const Value& x, const Value& p, const Value& q) {
  Value y = Shifted ? shifted(m, x) : x;
  return m.sub(m.mul(m.add(y, y), q), p);
}

using Cases = std::vector<std::pair<Value, Value>>;

// The interval [-1, 1] (or [0, 1] shifted) and where the closed form takes over.
template <bool Shifted>
std::pair<Value, Value> ends(const Math& m, const Value& x) {
  if (Shifted) return {m.eq(x, m.k(1, x)), m.eq(x, m.k(0, x))};
  return {m.eq(x, m.k(1, x)), m.eq(x, m.k(-1, x))};
}

template <bool Shifted>
Value inside(const Math& m, const Value& x, const Value& n, int64_t above) {
  Value y = Shifted ? shifted(m, x) : x;
  return m.and_(m.gt(n, m.k(static_cast<double>(above), n)), m.lt(m.abs(y), m.k(1, y)));
}

template <bool Shifted>
Cases chebyshev_t(const Math& m, const Value& x, const Value& n, const Value& nx) {
  auto [hi, lo] = ends<Shifted>(m, x);
  Value y = Shifted ? shifted(m, x) : x;
  Value one = m.k(1, x);
  return {{inside<Shifted>(m, x, n, 6), cos(m, m.mul(nx, acos(m, y)))},
          {lo, by_parity(m, n, one)},
          {hi, one}};
}

template <bool Shifted>
Cases chebyshev_u(const Math& m, const Value& x, const Value& n, const Value& nx) {
  auto [hi, lo] = ends<Shifted>(m, x);
  Value y = Shifted ? shifted(m, x) : x;
  Value n1 = m.add(nx, m.k(1, x));
  Value t = acos(m, y), st = sin(m, t);
  Value closed = m.sel(m.ne(st, m.k(0, x)), m.div(sin(m, m.mul(n1, t)), st),
                       m.div(m.mul(n1, cos(m, m.mul(n1, t))), y));
  return {{inside<Shifted>(m, x, n, Shifted ? 6 : 8), closed}, {lo, by_parity(m, n, n1)}, {hi, n1}};
}

template <bool Shifted>
Cases chebyshev_v(const Math& m, const Value& x, const Value& n, const Value& nx) {
  auto [hi, lo] = ends<Shifted>(m, x);
  Value y = Shifted ? shifted(m, x) : x;
  Value odd_end = by_parity(m, n, m.add(m.add(nx, nx), m.k(1, x)));
  Value t = acos(m, y), half = m.div(t, m.k(2, x));
  Value closed = m.sel(m.ne(sin(m, half), m.k(1, x)),
                       m.div(cos(m, m.mul(m.add(nx, m.k(0.5, x)), t)), cos(m, half)), odd_end);
  return {{inside<Shifted>(m, x, n, Shifted ? 6 : 8), closed}, {lo, odd_end}, {hi, m.k(1, x)}};
}

template <bool Shifted>
Cases chebyshev_w(const Math& m, const Value& x, const Value& n, const Value& nx) {
  auto [hi, lo] = ends<Shifted>(m, x);
  Value y = Shifted ? shifted(m, x) : x;
  Value top = m.add(m.add(nx, nx), m.k(1, x));
  Value bottom = by_parity(m, n, m.k(1, x));
  Value t = acos(m, y), half = m.div(t, m.k(2, x));
  Value end = m.sel(m.gt(y, m.k(0, x)), top, bottom);
  Value closed = m.sel(m.ne(cos(m, half), m.k(1, x)),
                       m.div(sin(m, m.mul(m.add(nx, m.k(0.5, x)), t)), sin(m, half)), end);
  return {{inside<Shifted>(m, x, n, Shifted ? 6 : 8), closed}, {lo, bottom}, {hi, top}};
}

Cases no_cases(const Math&, const Value&, const Value&, const Value&) { return {}; }

// Hermite H: H_j = 2x H_{j-1} - 2(j-1) H_{j-2}.
Value hermite_h_step(const Math& m, const Value& j, const Value& x, const Value& p,
                     const Value& q) {
  Value k = m.sub(m.add(j, j), m.k(2, j));
  return m.sub(m.mul(m.add(x, x), q), m.mul(k, p));
}

// Hermite He: He_j = x He_{j-1} - (j-1) He_{j-2}.
Value hermite_he_step(const Math& m, const Value& j, const Value& x, const Value& p,
                      const Value& q) {
  return m.sub(m.mul(x, q), m.mul(m.sub(j, m.k(1, j)), p));
}

// Laguerre: L_j = ((2k + (1 - x)) L_{j-1} - k L_{j-2}) / (k + 1) with k = j - 1.
Value laguerre_step(const Math& m, const Value& j, const Value& x, const Value& p, const Value& q) {
  Value k = m.sub(j, m.k(1, j));
  Value a = m.add(m.add(k, k), m.sub(m.k(1, x), x));
  return m.div(m.sub(m.mul(a, q), m.mul(k, p)), j);
}

Cases laguerre_cases(const Math& m, const Value& x, const Value&, const Value&) {
  return {{m.eq(m.abs(x), m.k(0, x)), m.k(1, x)}};
}

// Legendre: P_j = ((2k + 1) x P_{j-1} - k P_{j-2}) / (k + 1) with k = j - 1.
Value legendre_step(const Math& m, const Value& j, const Value& x, const Value& p, const Value& q) {
  Value k = m.sub(j, m.k(1, j));
  Value a = m.mul(m.add(m.add(k, k), m.k(1, k)), x);
  return m.div(m.sub(m.mul(a, q), m.mul(k, p)), j);
}

Cases legendre_cases(const Math& m, const Value& x, const Value& n, const Value&) {
  Value one = m.k(1, x);
  return {{m.eq(x, m.k(-1, x)), by_parity(m, n, one)}, {m.eq(x, one), one}};
}

Value first_x(const Math&, const Value& x) { return x; }
Value first_2x(const Math& m, const Value& x) { return m.add(x, x); }
Value first_v(const Math& m, const Value& x) { return m.sub(m.add(x, x), m.k(1, x)); }
Value first_w(const Math& m, const Value& x) { return m.add(m.add(x, x), m.k(1, x)); }
Value first_shifted_t(const Math& m, const Value& x) { return shifted(m, x); }
Value first_shifted_u(const Math& m, const Value& x) {
  Value y = shifted(m, x);
  return m.add(y, y);
}
Value first_shifted_v(const Math& m, const Value& x) {
  Value y = shifted(m, x);
  return m.sub(m.add(y, y), m.k(1, x));
}
Value first_shifted_w(const Math& m, const Value& x) {
  Value y = shifted(m, x);
  return m.add(m.add(y, y), m.k(1, x));
}
Value first_laguerre(const Math& m, const Value& x) { return m.sub(m.k(1, x), x); }

// PyTorch's CPU kernels of these take no bf16/f16.
LowerFn full_float(const char* name, LowerFn f) {
  return [name, f](Node& n) {
    if (n.compute == DType::BF16 || n.compute == DType::F16) not_implemented(name, n.compute);
    return f(n);
  };
}

// ---- erfcx, log_ndtr, spherical_bessel_j0 ------------------------------------------------

// exp(y^2) erfc(y) for y >= 0, in f64: the product up to y = 26 (where erfc is still a
// normal f64 and y^2 rounds with a relative error below 1e-13), the asymptotic series
// 1/(y sqrt(pi)) sum (-1)^k (2k-1)!! / (2y^2)^k beyond, whose ninth term is below 1e-18.
Value erfcx_nonneg(const Math& m, const Value& y) {
  Value small = m.mul(m.exp(m.mul(y, y)), m.b.unary(Unary::Erfc, y));
  Value inv = m.div(m.k(1, y), m.mul(m.k(2, y), m.mul(y, y)));  // 1 / (2 y^2)
  Value sum = m.k(0, y);
  for (int k = 8; k >= 1; --k)
    sum = m.mul(m.mul(m.k(-(2.0 * k - 1), y), inv), m.add(m.k(1, y), sum));
  Value large = m.div(m.add(m.k(1, y), sum), m.mul(y, m.k(std::sqrt(kPi), y)));
  return m.sel(m.le(y, m.k(26, y)), small, large);
}

// erfcx for any x, in f64: erfcx(x) = 2 exp(x^2) - erfcx(-x) for negative x (inf once
// exp(x^2) overflows), NaN for NaN.
Value erfcx64(const Math& m, const Value& x) {
  Value ax = m.abs(x);
  Value pos = erfcx_nonneg(m, ax);
  Value neg = m.sub(m.mul(m.k(2, x), m.exp(m.mul(x, x))), pos);
  Value r = m.sel(m.lt(x, m.k(0, x)), neg, pos);
  return m.sel(m.is_nan(x), x, r);
}

template <typename F>
LowerFn in_f64(const char* name, F f) {
  return full_float(name, [f](Node& n) {
    Math m{n.b};
    Value x = arg_math(n, 0);
    return V{n.b.convert(f(m, n.b.convert(x, DType::F64)), x.type.dtype)};
  });
}

// log(ndtr(x)): log(erfcx(-t) / 2) - t^2 below x = -1 (erfc underflows there), else
// log1p(-erfc(t) / 2), with t = x / sqrt(2), as PyTorch computes it.
Value log_ndtr(const Math& m, const Value& x) {
  Value t = m.div(x, m.k(std::sqrt(2.0), x));
  Value low = m.sub(m.log(m.div(erfcx64(m, m.neg(t)), m.k(2, x))), m.mul(t, t));
  Value high = m.log1p(m.neg(m.div(m.b.unary(Unary::Erfc, t), m.k(2, x))));
  return m.sel(m.lt(x, m.k(-1, x)), low, high);
}

// sin(x) / x, by its Taylor series below |x| = 0.5; 0 at +-inf.
Value spherical_bessel_j0(const Math& m, const Value& x) {
  Value x2 = m.mul(x, x);
  double fact = 1;
  std::vector<double> c;  // (-1)^k / (2k+1)!
  for (int k = 0; k <= 6; ++k) {
    if (k > 0) fact *= (2.0 * k) * (2.0 * k + 1);
    c.push_back((k % 2 ? -1.0 : 1.0) / fact);
  }
  Value poly = m.k(c.back(), x);
  for (int k = static_cast<int>(c.size()) - 2; k >= 0; --k)
    poly = m.add(m.k(c[k], x), m.mul(x2, poly));
  Value r = m.sel(m.lt(m.abs(x), m.k(0.5, x)), poly, m.div(sin(m, x), x));
  return m.sel(m.eq(m.abs(x), m.k(INFINITY, x)), m.k(0, x), r);
}

// ---- Airy function Ai -----------------------------------------------------------------------
//
// PyTorch's (Cephes') branches in the promoted float dtype: 0 above x = 103.892, NaN at
// +-inf, the asymptotic forms below x = -2.09 and from x = 2.09 on (rational functions
// of 1/zeta, zeta = 2/3 x^1.5), and between them the power series f and g of the two
// solutions, summed in a stablehlo.while until each element's last term is below 2^-53
// relative to f, as CPU's loop does.

// acc = acc * z + c[i] for each coefficient, from acc = 0.
Value horner(const Math& m, const Value& z, const std::vector<double>& c) {
  Value acc = m.k(0, z);
  for (double v : c) acc = m.add(m.mul(acc, z), m.k(v, z));
  return acc;
}

Value airy_series(hlo::Builder& b, const Value& x, const Value& active) {
  Math m{b};
  const TensorType xt = x.type;
  Value one = m.k(1, x);
  // (m, n, k, f, g, t, z); elements outside the series' domain start with t = 0.
  V init{one, x, one, one, x, m.sel(active, one, m.k(0, x)), m.mul(m.mul(x, x), x)};
  std::vector<TensorType> types(init.size(), xt);
  std::vector<int64_t> all;
  for (int64_t d = 0; d < xt.rank(); ++d) all.push_back(d);
  std::string cond = b.region(types, [&](hlo::Builder& r, const V& a) {
    Math rm{r};
    Value go = rm.gt(a[5], r.full(1.11022302462515654042e-16, xt));
    return V{r.reduce(go, r.constant(0, DType::Pred), all, Binary::Or)};
  });
  std::string body = b.region(types, [&](hlo::Builder& r, const V& a) {
    Math rm{r};
    Value c1 = r.full(1, xt);
    Value go = rm.gt(a[5], r.full(1.11022302462515654042e-16, xt));
    Value mm = a[0], nn = a[1], k = a[2], f = a[3], g = a[4], z = a[6];
    mm = rm.mul(mm, z);
    k = rm.add(k, c1);
    mm = rm.div(mm, k);
    nn = rm.mul(nn, z);
    k = rm.add(k, c1);
    nn = rm.div(nn, k);
    mm = rm.div(mm, k);
    f = rm.add(f, mm);
    k = rm.add(k, c1);
    nn = rm.div(nn, k);
    g = rm.add(g, nn);
    Value t = rm.abs(rm.div(mm, f));
    V next{mm, nn, k, f, g, t};
    V out;
    for (size_t i = 0; i < next.size(); ++i) out.push_back(rm.sel(go, next[i], a[i]));
    out.push_back(z);
    return out;
  });
  V done = b.emit_multi("stablehlo.while", init, "", types, {cond, body});
  return m.sub(m.mul(m.k(0.355028053887817239260, x), done[3]),
               m.mul(m.k(0.258819403792806798405, x), done[4]));
}

Value airy_ai(hlo::Builder& b, const Value& x) {
  Math m{b};
  auto k = [&](double v) { return m.k(v, x); };
  const double c = 5.64189583547756286948e-01;
  // x < -2.09: with s = -2/3 x sqrt(-x), z = 1 / s.
  Value nx = m.sel(m.lt(x, k(-2.09)), x, k(-3));  // keeps the unused lanes finite
  Value s = m.div(m.mul(m.mul(k(-2), nx), m.sqrt(m.neg(nx))), k(3));
  Value z = m.div(k(1), s);
  Value zz = m.mul(z, z);
  Value afn = horner(
      m, zz,
      {-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
       -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
       -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08});
  Value afd = horner(
      m, zz,
      {+1.33560420706553243746e+01, +3.26825032795224613948e+01, +2.67367040941499554804e+01,
       +9.18707402907259625840e+00, +1.47529146771666414581e+00, +1.15687173795188044134e-01,
       +4.40291641615211203805e-03, +7.54720348287414296618e-05, +4.51850092970580378464e-07});
  Value agn =
      horner(m, zz,
             {+1.97339932091685679179e-02, +3.91103029615688277255e-01, +1.06579897599595591108e+00,
              +9.39169229816650230044e-01, +3.51465656105547619242e-01, +6.33888919628925490927e-02,
              +5.85804113048388458567e-03, +2.82851600836737019778e-04, +6.98793669997260967291e-06,
              +8.11789239554389293311e-08, +3.41551784765923618484e-10});
  Value agd =
      horner(m, zz,
             {+9.30892908077441974853e+00, +1.98352928718312140417e+01, +1.55646628932864612953e+01,
              +5.47686069422975497931e+00, +9.54293611618961883998e-01, +8.64580826352392193095e-02,
              +4.12656523824222607191e-03, +1.01259085116509135510e-04, +1.17166733214413521882e-06,
              +4.91834570062930015649e-09});
  Value t = m.add(s, m.mul(k(0.25), k(kPi)));
  Value osc = m.sub(m.mul(sin(m, t), m.add(k(1), m.div(m.mul(zz, afn), afd))),
                    m.mul(cos(m, t), m.div(m.mul(z, agn), agd)));
  Value negative = m.mul(m.div(k(c), m.sqrt(m.sqrt(m.neg(nx)))), osc);

  // x >= 2.09: zeta = 2/3 x sqrt(x).
  Value px = m.sel(m.ge(x, k(2.09)), x, k(3));
  Value zeta = m.div(m.mul(m.mul(k(2), px), m.sqrt(px)), k(3));
  Value inv = m.div(k(1), zeta);
  Value an =
      horner(m, inv,
             {+3.46538101525629032477e-01, +1.20075952739645805542e+01, +7.62796053615234516538e+01,
              +1.68089224934630576269e+02, +1.59756391350164413639e+02, +7.05360906840444183113e+01,
              +1.40264691163389668864e+01, +9.99999999999999995305e-01});
  Value ad =
      horner(m, inv,
             {+5.67594532638770212846e-01, +1.47562562584847203173e+01, +8.45138970141474626562e+01,
              +1.77318088145400459522e+02, +1.64234692871529701831e+02, +7.14778400825575695274e+01,
              +1.40959135607834029598e+01, +1.00000000000000000470e+00});
  Value positive =
      m.div(m.mul(k(c), m.div(an, ad)), m.mul(m.mul(k(2), m.sqrt(m.sqrt(px))), m.exp(zeta)));

  Value middle = m.and_(m.ge(x, k(-2.09)), m.lt(x, k(2.09)));
  Value series =
      airy_series(b, m.sel(middle, x, m.sel(m.is_nan(x), x, k(0))), m.or_(middle, m.is_nan(x)));
  Value r = m.sel(m.lt(x, k(-2.09)), negative, m.sel(m.ge(x, k(2.09)), positive, series));
  r = m.sel(m.gt(x, k(103.892)), k(0), r);
  return m.sel(m.eq(m.abs(x), k(INFINITY)), k(NAN), r);
}

// ---- Bessel functions of the first and second kind, modified of the second kind -------
//
// In f64 whatever the input. Up to |x| = 17 (J, Y) or 9 (K) the power series of
// DLMF 10.2.2 / 10.8.1 / 10.31.1, whose cancellation there costs under 1e-8 relative;
// beyond, Hankel's asymptotic expansions (DLMF 10.17.3-4, 10.40.2), whose terms still
// decrease at the last one used and end below 1e-8 relative.

const double kEulerGamma = 0.57721566490153286061;

// Hankel's a_k(nu) = prod_{i=1..k} (4 nu^2 - (2i - 1)^2) / (k! 8^k).
std::vector<double> hankel_coefficients(int nu, int count) {
  std::vector<double> a{1};
  for (int k = 1; k < count; ++k) {
    const double odd = 2.0 * k - 1;
    a.push_back(a.back() * (4.0 * nu * nu - odd * odd) / (8.0 * k));
  }
  return a;
}

// (P, Q) of J/Y's expansion in 1/x: P = sum (-1)^k a_2k / x^2k, Q = sum (-1)^k a_2k+1 / x^2k+1.
std::pair<Value, Value> hankel_pq(const Math& m, const Value& x, int nu) {
  std::vector<double> a = hankel_coefficients(nu, 22);
  Value inv = m.div(m.k(1, x), x), inv2 = m.mul(inv, inv);
  Value p = m.k(0, x), q = m.k(0, x);
  for (int k = 10; k >= 0; --k) {
    const double sign = k % 2 ? -1.0 : 1.0;
    p = m.add(m.mul(p, inv2), m.k(sign * a[2 * k], x));
    q = m.add(m.mul(q, inv2), m.k(sign * a[2 * k + 1], x));
  }
  return {p, m.mul(q, inv)};
}

// J_nu(x) and Y_nu(x) for x > 0 by the expansion: sqrt(2 / (pi x)) (P cos c - Q sin c) and
// (P sin c + Q cos c), c = x - (nu / 2 + 1 / 4) pi.
std::pair<Value, Value> bessel_jy_large(const Math& m, const Value& x, int nu) {
  auto [p, q] = hankel_pq(m, x, nu);
  Value c = m.sub(x, m.k((nu / 2.0 + 0.25) * kPi, x));
  Value cs = cos(m, c), sn = sin(m, c);
  Value scale = m.sqrt(m.div(m.k(2 / kPi, x), x));
  return {m.mul(scale, m.sub(m.mul(p, cs), m.mul(q, sn))),
          m.mul(scale, m.add(m.mul(p, sn), m.mul(q, cs)))};
}

// Terms t_k = (sign x^2 / 4)^k / (k! (k + nu)!) of the series, k = 0..count-1.
std::vector<Value> series_terms(const Math& m, const Value& x, int nu, double sign, int count) {
  Value z = m.mul(m.k(sign / 4, x), m.mul(x, x));
  std::vector<Value> t{m.k(1, x)};
  for (int k = 1; k < count; ++k)
    t.push_back(m.mul(t.back(), m.div(z, m.k(double(k) * (k + nu), x))));
  return t;
}

Value sum_of(const Math& m, const std::vector<Value>& t, const std::vector<double>& w) {
  Value s = m.k(0, t[0]);
  for (size_t k = t.size(); k-- > 0;) s = m.add(s, w.empty() ? t[k] : m.mul(m.k(w[k], t[k]), t[k]));
  return s;
}

// psi(k + 1) = H_k - gamma for k = 0..count.
std::vector<double> digammas(int count) {
  std::vector<double> psi{-kEulerGamma};
  for (int k = 1; k <= count; ++k) psi.push_back(psi.back() + 1.0 / k);
  return psi;
}

const int kSeriesTerms = 42;

// J_nu(x) (nu = 0, 1): the series up to |x| = 17, the expansion beyond; J0 even, J1 odd.
Value bessel_j(const Math& m, const Value& x, int nu) {
  Value ax = m.abs(x);
  std::vector<Value> t = series_terms(m, ax, nu, -1, kSeriesTerms);
  Value small = sum_of(m, t, {});
  if (nu == 1) small = m.mul(small, m.div(ax, m.k(2, x)));
  Value large = bessel_jy_large(m, ax, nu).first;
  Value r = m.sel(m.le(ax, m.k(17, x)), small, large);
  if (nu == 1) r = m.sel(m.lt(x, m.k(0, x)), m.neg(r), r);
  return r;
}

// Y_nu(x) (nu = 0, 1): -inf at 0, NaN below.
Value bessel_y(const Math& m, const Value& x, int nu) {
  std::vector<Value> t = series_terms(m, x, nu, -1, kSeriesTerms);
  std::vector<double> psi = digammas(kSeriesTerms + 1), w;
  for (int k = 0; k < kSeriesTerms; ++k) w.push_back(nu == 0 ? psi[k] : psi[k] + psi[k + 1]);
  Value log_half = m.log(m.div(x, m.k(2, x)));
  Value j = sum_of(m, t, {});
  Value small;
  if (nu == 0) {
    small = m.mul(m.k(2 / kPi, x), m.sub(m.mul(log_half, j), sum_of(m, t, w)));
  } else {
    Value half = m.div(x, m.k(2, x));
    Value j1 = m.mul(j, half);
    small = m.sub(m.add(m.div(m.k(-2 / kPi, x), x), m.mul(m.k(2 / kPi, x), m.mul(log_half, j1))),
                  m.mul(m.div(half, m.k(kPi, x)), sum_of(m, t, w)));
  }
  Value r = m.sel(m.le(x, m.k(17, x)), small, bessel_jy_large(m, x, nu).second);
  r = m.sel(m.eq(x, m.k(0, x)), m.k(-INFINITY, x), r);
  return m.sel(m.lt(x, m.k(0, x)), m.k(NAN, x), r);
}

// K_nu(x) (nu = 0, 1), times exp(x) when `scaled`: inf at 0, NaN below.
Value bessel_k(const Math& m, const Value& x, int nu, bool scaled) {
  std::vector<Value> t = series_terms(m, x, nu, 1, 32);
  std::vector<double> psi = digammas(33), w;
  for (int k = 0; k < 32; ++k) w.push_back(nu == 0 ? psi[k] : psi[k] + psi[k + 1]);
  Value log_half = m.log(m.div(x, m.k(2, x)));
  Value i = sum_of(m, t, {});
  Value small;
  if (nu == 0) {
    small = m.sub(sum_of(m, t, w), m.mul(log_half, i));
  } else {
    Value half = m.div(x, m.k(2, x));
    small = m.sub(m.add(m.div(m.k(1, x), x), m.mul(log_half, m.mul(i, half))),
                  m.mul(m.div(half, m.k(2, x)), sum_of(m, t, w)));
  }
  if (scaled) small = m.mul(small, m.exp(x));
  std::vector<double> a = hankel_coefficients(nu, 18);
  Value inv = m.div(m.k(1, x), x);
  Value poly = m.k(0, x);
  for (int k = static_cast<int>(a.size()) - 1; k >= 0; --k)
    poly = m.add(m.mul(poly, inv), m.k(a[k], x));
  Value large = m.mul(m.sqrt(m.div(m.k(kPi / 2, x), x)), poly);
  if (!scaled) large = m.mul(large, m.exp(m.neg(x)));
  Value r = m.sel(m.le(x, m.k(9, x)), small, large);
  r = m.sel(m.eq(x, m.k(0, x)), m.k(INFINITY, x), r);
  return m.sel(m.lt(x, m.k(0, x)), m.k(NAN, x), r);
}

// ---- Hurwitz zeta ------------------------------------------------------------------------

// zeta(x, q) = sum_{i >= 0} (q + i)^-x by Euler-Maclaurin summation, in f64: the terms
// up to a = q + N (N >= 9 and a > 9, found per element by a stablehlo.while), then the
// integral of the rest, half its first term and 12 Bernoulli corrections. The domain as
// PyTorch's: x == 1 is inf, x < 1 NaN, q a non-positive integer inf, q <= 0 with a
// non-integer x NaN; beyond q = 1e8 the two-term asymptotic form.
Value zeta64(hlo::Builder& b, const Value& x, const Value& q) {
  Math m{b};
  const TensorType xt = x.type;
  const TensorType s{DType::S64, {}};
  // Carried: i, x, q, a (the last base), b (its term), sum, done (all elements past it).
  std::string cond = b.region({s, xt, xt, xt, xt, xt}, [](hlo::Builder& r, const V& a) {
    Math rm{r};
    const Value &i = a[0], &base = a[3];
    Value more = r.compare(Compare::LT, i, r.constant_int(9, DType::S64));
    std::vector<int64_t> all;
    for (int64_t d = 0; d < base.type.rank(); ++d) all.push_back(d);
    Value low = rm.le(base, rm.k(9, base));
    Value any_low = all.empty() ? low : r.reduce(low, r.constant(0, DType::Pred), all, Binary::Or);
    return V{r.binary(Binary::Or, more, any_low)};
  });
  std::string body = b.region({s, xt, xt, xt, xt, xt}, [](hlo::Builder& r, const V& a) {
    Math rm{r};
    const Value &i = a[0], &x = a[1], &q = a[2], &base = a[3], &term = a[4], &sum = a[5];
    // Elements past both bounds keep their base, term and sum.
    Value go = rm.or_(r.broadcast_in_dim(r.compare(Compare::LT, i, r.constant_int(9, DType::S64)),
                                         base.type.shape, {}),
                      rm.le(base, rm.k(9, base)));
    Value next = rm.add(base, rm.k(1, base));
    Value t = rm.pow(next, rm.neg(x));
    return V{r.binary(Binary::Add, i, r.constant_int(1, DType::S64)),
             x,
             q,
             rm.sel(go, next, base),
             rm.sel(go, t, term),
             rm.sel(go, rm.add(sum, t), sum)};
  });
  Value first = m.pow(q, m.neg(x));
  V loop = b.emit_multi("stablehlo.while", {b.constant_int(0, DType::S64), x, q, q, first, first},
                        "", {s, xt, xt, xt, xt, xt}, {cond, body});
  Value w = loop[3], term = loop[4], sum = loop[5];
  sum = m.add(sum, m.div(m.mul(term, w), m.sub(x, m.k(1, x))));
  sum = m.sub(sum, m.mul(m.k(0.5, x), term));
  // Bernoulli numbers B_2 .. B_24 give the corrections B_2k / (2k)! * x (x+1) ... (x+2k-2)
  // * w^(-x-2k+1).
  const double bern[12] = {1.0 / 6,       -1.0 / 30,       1.0 / 42,       -1.0 / 30,
                           5.0 / 66,      -691.0 / 2730,   7.0 / 6,        -3617.0 / 510,
                           43867.0 / 798, -174611.0 / 330, 854513.0 / 138, -236364091.0 / 2730};
  Value rising = m.k(1, x), power = term;  // x (x+1) ... and w^-x / w^(2k-1)
  double fact = 1;
  for (int k = 1; k <= 12; ++k) {
    fact *= (2.0 * k - 1) * (2.0 * k);
    rising = m.mul(rising, m.add(x, m.k(2.0 * k - 2, x)));
    power = m.div(power, w);
    sum = m.add(sum, m.mul(m.k(bern[k - 1] / fact, x), m.mul(rising, power)));
    rising = m.mul(rising, m.add(x, m.k(2.0 * k - 1, x)));
    power = m.div(power, w);
  }
  Value big_q = m.mul(m.add(m.div(m.k(1, x), m.sub(x, m.k(1, x))), m.div(m.k(1, x), m.add(q, q))),
                      m.pow(q, m.sub(m.k(1, x), x)));
  Value r = m.sel(m.gt(q, m.k(1e8, q)), big_q, sum);
  Value nan = m.k(NAN, x), inf = m.k(INFINITY, x);
  Value q_nonpos = m.le(q, m.k(0, q));
  r = m.sel(m.and_(q_nonpos, m.ne(x, m.floor(x))), nan, r);
  r = m.sel(m.and_(q_nonpos, m.eq(q, m.floor(q))), inf, r);
  r = m.sel(m.lt(x, m.k(1, x)), nan, r);
  r = m.sel(m.eq(x, m.k(1, x)), inf, r);
  return m.sel(m.or_(m.is_nan(x), m.is_nan(q)), nan, r);
}

V lower_zeta(Node& n) {
  if (n.compute == DType::BF16 || n.compute == DType::F16) not_implemented("zeta", n.compute);
  hlo::Builder& b = n.b;
  Value x = b.convert(arg_math(n, 0), DType::F64), q = b.convert(arg_math(n, 1), DType::F64);
  return {b.convert(zeta64(b, x, q), float_math(n))};
}

// ---- regularized incomplete gamma functions ----------------------------------------------

// (P(a, x), Q(a, x)) in f64: the power series of P below x = a + 1, Lentz's continued
// fraction of Q above, each iterated in a stablehlo.while until every element it serves
// has converged to 1e-16 (or 2000 steps), times exp(a log x - x - lgamma(a)). PyTorch's
// special values: NaN for negative arguments, a = 0 gives P = 1 (x > 0), x = 0 gives
// P = 0, infinite a gives P = 0, infinite x P = 1, both infinite NaN.
std::pair<Value, Value> incomplete_gamma(hlo::Builder& b, const Value& a, const Value& x) {
  Math m{b};
  const TensorType t = a.type, s{DType::S64, {}};
  std::vector<int64_t> all;
  for (int64_t d = 0; d < t.rank(); ++d) all.push_back(d);
  auto any = [all](hlo::Builder& r, const Value& p) {
    return all.empty() ? p : r.reduce(p, r.constant(0, DType::Pred), all, Binary::Or);
  };
  const TensorType pt{DType::Pred, t.shape};
  Value use_series = m.lt(x, m.add(a, m.k(1, a)));
  // Series: sum_{n >= 0} x^n / (a (a+1) ... (a+n)).
  std::string scond = b.region({s, t, t, t, t, pt}, [any](hlo::Builder& r, const V& v) {
    Math rm{r};
    Value open = rm.and_(v[5], rm.gt(rm.abs(v[3]), rm.mul(rm.abs(v[4]), rm.k(1e-17, v[4]))));
    return V{r.binary(Binary::And, r.compare(Compare::LT, v[0], r.constant_int(2000, DType::S64)),
                      any(r, open))};
  });
  std::string sbody = b.region({s, t, t, t, t, pt}, [](hlo::Builder& r, const V& v) {
    Math rm{r};
    Value nf = r.broadcast_in_dim(r.convert(v[0], DType::F64), v[1].type.shape, {});
    Value term = rm.mul(v[3], rm.div(v[2], rm.add(v[1], nf)));
    return V{r.binary(Binary::Add, v[0], r.constant_int(1, DType::S64)),
             v[1],
             v[2],
             term,
             rm.add(v[4], term),
             v[5]};
  });
  Value inv_a = m.div(m.k(1, a), a);
  V sr = b.emit_multi("stablehlo.while",
                      {b.constant_int(1, DType::S64), a, x, inv_a, inv_a, use_series}, "",
                      {s, t, t, t, t, pt}, {scond, sbody});
  // Continued fraction of Q (modified Lentz), carried: i, a, x, bn, c, d, h, delta, use.
  const double tiny = 1e-300;
  std::string ccond = b.region({s, t, t, t, t, t, t, t, pt}, [any](hlo::Builder& r, const V& v) {
    Math rm{r};
    Value open = rm.and_(v[8], rm.gt(rm.abs(rm.sub(v[7], rm.k(1, v[7]))), rm.k(1e-16, v[7])));
    return V{r.binary(Binary::And, r.compare(Compare::LT, v[0], r.constant_int(2000, DType::S64)),
                      any(r, open))};
  });
  std::string cbody = b.region({s, t, t, t, t, t, t, t, pt}, [tiny](hlo::Builder& r, const V& v) {
    Math rm{r};
    const Value& av = v[1];
    Value i = r.broadcast_in_dim(r.convert(v[0], DType::F64), av.type.shape, {});
    Value an = rm.neg(rm.mul(i, rm.sub(i, av)));
    Value bn = rm.add(v[3], rm.k(2, av));
    auto floor_tiny = [&](const Value& z) {
      return rm.sel(rm.lt(rm.abs(z), rm.k(tiny, z)), rm.k(tiny, z), z);
    };
    Value d = rm.div(rm.k(1, av), floor_tiny(rm.add(rm.mul(an, v[5]), bn)));
    Value c = floor_tiny(rm.add(bn, rm.div(an, v[4])));
    Value delta = rm.mul(d, c);
    return V{r.binary(Binary::Add, v[0], r.constant_int(1, DType::S64)),
             av,
             v[2],
             bn,
             c,
             d,
             rm.mul(v[6], delta),
             delta,
             v[8]};
  });
  Value b0 = m.add(m.sub(x, a), m.k(1, a));
  Value d0 = m.div(m.k(1, a), b0);
  V cr = b.emit_multi("stablehlo.while",
                      {b.constant_int(1, DType::S64), a, x, b0, m.k(1 / tiny, a), d0, d0, m.k(0, a),
                       m.not_(use_series)},
                      "", {s, t, t, t, t, t, t, t, pt}, {ccond, cbody});
  Value lgam = b.unary(Unary::Lgamma, a);
  Value front = m.exp(m.sub(m.sub(m.mul(a, m.log(x)), x), lgam));
  Value p_series = m.mul(front, sr[4]), q_cf = m.mul(front, cr[6]);
  Value p = m.sel(use_series, p_series, m.sub(m.k(1, a), q_cf));
  Value q = m.sel(use_series, m.sub(m.k(1, a), p_series), q_cf);
  Value nan = m.k(NAN, a), zero = m.k(0, a), one = m.k(1, a), inf = m.k(INFINITY, a);
  // In PyTorch's order of checks, the first deciding last here; a NaN argument that no
  // check decides gives NaN.
  auto special = [&](Value r, bool lower) {
    r = m.sel(m.or_(m.is_nan(a), m.is_nan(x)), nan, r);
    r = m.sel(m.eq(x, inf), lower ? one : zero, r);
    r = m.sel(m.eq(a, inf), m.sel(m.eq(x, inf), nan, lower ? zero : one), r);
    r = m.sel(m.eq(x, zero), lower ? zero : one, r);
    r = m.sel(m.eq(a, zero), m.sel(m.gt(x, zero), lower ? one : zero, nan), r);
    return m.sel(m.or_(m.lt(x, zero), m.lt(a, zero)), nan, r);
  };
  return {special(p, true), special(q, false)};
}

LowerFn lower_igamma(bool upper) {
  return [upper](Node& n) {
    hlo::Builder& b = n.b;
    Value a = b.convert(arg_math(n, 0), DType::F64), x = b.convert(arg_math(n, 1), DType::F64);
    auto [p, q] = incomplete_gamma(b, a, x);
    return V{b.convert(upper ? q : p, float_math(n))};
  };
}

// ---- polygamma ----------------------------------------------------------------------------

// psi'(x), in x's dtype as PyTorch's kernel (f32 rounding decides its value at the poles):
// for x < 1/2 the reflection psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x);
// then six steps of psi'(x) = 1/x^2 + psi'(x + 1) and the asymptotic series
// 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) (B_2..B_6) at x + 6, as PyTorch's kernel computes it.
Value trigamma(const Math& m, const Value& x_in) {
  Value reflect = m.lt(x_in, m.k(0.5, x_in));
  Value s = sin(m, m.mul(m.k(kPi, x_in), x_in));
  Value head = m.sel(reflect, m.neg(m.div(m.k(kPi * kPi, s), m.mul(s, s))), m.k(0, s));
  Value x = m.sel(reflect, m.sub(m.k(1, x_in), x_in), x_in);
  Value sum = head;
  for (int i = 0; i < 6; ++i) {
    sum = m.add(sum, m.div(m.k(1, x), m.mul(x, x)));
    x = m.add(x, m.k(1, x));
  }
  Value inv2 = m.div(m.k(1, x), m.mul(x, x));
  Value tail = m.sub(m.k(1.0 / 30, x), m.mul(inv2, m.k(1.0 / 42, x)));
  tail = m.sub(m.k(1.0 / 6, x), m.mul(inv2, tail));
  tail = m.add(m.add(m.k(1, x), m.div(m.k(1, x), m.add(x, x))), m.mul(inv2, tail));
  sum = m.add(sum, m.div(tail, x));
  return m.sel(reflect, m.neg(sum), sum);
}

// polygamma(n, x): digamma for n = 0, trigamma for 1, and (-1)^(n+1) n! zeta(n + 1, x)
// beyond (PyTorch's definitions, negative x included).
V lower_polygamma(Node& n) {
  hlo::Builder& b = n.b;
  Math m{b};
  Value x = arg_math(n, 1);
  const int64_t order = n.i64(0);
  if (order < 0) throw std::invalid_argument("polygamma(n, x) does not support negative n.");
  if (order == 0) return {digamma(m, x)};
  if (order == 1) return {trigamma(m, x)};
  Value x64 = b.convert(x, DType::F64);
  double factorial = 1;
  for (int64_t k = 2; k <= order; ++k) factorial *= static_cast<double>(k);
  Value z = zeta64(b, m.k(static_cast<double>(order + 1), x64), x64);
  return {b.convert(m.mul(m.k(order % 2 ? factorial : -factorial, z), z), x.type.dtype)};
}

// mvlgamma(self, p): the multivariate log-gamma, sum over i < p of lgamma(x - i / 2) plus
// p (p - 1) / 4 log(pi).
V lower_mvlgamma(Node& n) {
  hlo::Builder& b = n.b;
  DType dt = math_dtype(n.out().dtype);
  Value x = b.convert(n.in(0), dt);
  int64_t p = n.i64(1);
  Value sum = b.full(p * (p - 1) / 4.0 * std::log(M_PI), x.type);
  for (int64_t i = 0; i < p; ++i)
    sum = b.binary(Binary::Add, sum,
                   b.unary(Unary::Lgamma, b.binary(Binary::Subtract, x, b.full(i / 2.0, x.type))));
  return {b.convert(sum, n.out().dtype)};
}

}  // namespace

#define POLY(id, name, family)                                        \
  TORCH_TPU_LOWERING(id, {"special_" #name, "special_" #name ".out"}, \
                     full_float(#name "_cpu", polynomial(family)))

POLY(chebyshev_t, chebyshev_polynomial_t,
     (Family{first_x, chebyshev_step<false>, chebyshev_t<false>}));
POLY(chebyshev_u, chebyshev_polynomial_u,
     (Family{first_2x, chebyshev_step<false>, chebyshev_u<false>}));
POLY(chebyshev_v, chebyshev_polynomial_v,
     (Family{first_v, chebyshev_step<false>, chebyshev_v<false>}));
POLY(chebyshev_w, chebyshev_polynomial_w,
     (Family{first_w, chebyshev_step<false>, chebyshev_w<false>}));
POLY(shifted_chebyshev_t, shifted_chebyshev_polynomial_t,
     (Family{first_shifted_t, chebyshev_step<true>, chebyshev_t<true>}));
POLY(shifted_chebyshev_u, shifted_chebyshev_polynomial_u,
     (Family{first_shifted_u, chebyshev_step<true>, chebyshev_u<true>}));
POLY(shifted_chebyshev_v, shifted_chebyshev_polynomial_v,
     (Family{first_shifted_v, chebyshev_step<true>, chebyshev_v<true>}));
POLY(shifted_chebyshev_w, shifted_chebyshev_polynomial_w,
     (Family{first_shifted_w, chebyshev_step<true>, chebyshev_w<true>}));
POLY(hermite_h, hermite_polynomial_h, (Family{first_2x, hermite_h_step, no_cases}));
POLY(hermite_he, hermite_polynomial_he, (Family{first_x, hermite_he_step, no_cases}));
POLY(laguerre_l, laguerre_polynomial_l, (Family{first_laguerre, laguerre_step, laguerre_cases}));
POLY(legendre_p, legendre_polynomial_p, (Family{first_x, legendre_step, legendre_cases}));

#undef POLY

TORCH_TPU_LOWERING(special_erfcx, {"special_erfcx", "special_erfcx.out"},
                   in_f64("erfcx_cpu", erfcx64));
TORCH_TPU_LOWERING(special_log_ndtr, {"special_log_ndtr", "special_log_ndtr.out"},
                   in_f64("log_ndtr_cpu", log_ndtr));
TORCH_TPU_LOWERING(spherical_bessel_j0,
                   {"special_spherical_bessel_j0", "special_spherical_bessel_j0.out"},
                   full_float("spherical_bessel_j0_cpu", [](Node& n) {
                     return V{spherical_bessel_j0(Math{n.b}, arg_math(n, 0))};
                   }));
TORCH_TPU_LOWERING(special_airy_ai, {"special_airy_ai", "special_airy_ai.out"},
                   full_float("airy_ai_cpu",
                              [](Node& n) { return V{airy_ai(n.b, arg_math(n, 0))}; }));
TORCH_TPU_LOWERING(special_zeta, {"special_zeta", "special_zeta.out"}, lower_zeta);
TORCH_TPU_LOWERING(polygamma, {"polygamma", "polygamma.out"}, lower_polygamma);
TORCH_TPU_LOWERING(mvlgamma, {"mvlgamma.out"}, lower_mvlgamma);
TORCH_TPU_LOWERING(igamma, {"igamma", "igamma_", "igamma.out"}, lower_igamma(false));
TORCH_TPU_LOWERING(igammac, {"igammac", "igammac_", "igammac.out"}, lower_igamma(true));

#define BESSEL(id, name, expr)                                        \
  TORCH_TPU_LOWERING(id, {"special_" #name, "special_" #name ".out"}, \
                     in_f64(#name "_cpu", [](const Math& m, const Value& x) { return expr; }))

BESSEL(bessel_j0, bessel_j0, bessel_j(m, x, 0));
BESSEL(bessel_j1, bessel_j1, bessel_j(m, x, 1));
BESSEL(bessel_y0, bessel_y0, bessel_y(m, x, 0));
BESSEL(bessel_y1, bessel_y1, bessel_y(m, x, 1));
BESSEL(modified_bessel_k0, modified_bessel_k0, bessel_k(m, x, 0, false));
BESSEL(modified_bessel_k1, modified_bessel_k1, bessel_k(m, x, 1, false));
BESSEL(scaled_modified_bessel_k0, scaled_modified_bessel_k0, bessel_k(m, x, 0, true));
BESSEL(scaled_modified_bessel_k1, scaled_modified_bessel_k1, bessel_k(m, x, 1, true));

#undef BESSEL

}  // namespace torch_tpu::ops
