// Random ops. Every draw comes from stablehlo.rng_bit_generator (THREE_FRY) keyed by the
// (seed, offset) state of the op's generator, so the numbers depend only on the seed and
// the order of calls: the same on every run, process and plugin. A draw of k elements
// uses at most k counters, which the generator's offset advance already covers.
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

// PyTorch's argument checks for the static arguments; the error reaches Python as a
// RuntimeError naming the op.
void check(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

Value random_bits(hlo::Builder& b, const Value& state, const TensorType& type) {
  if (type.numel() == 0) return b.full(0, type);
  return b.emit_multi("stablehlo.rng_bit_generator", {state},
                      "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>", {state.type, type})[1];
}

// A fresh state keyed by two draws from `state`, for ops that need more numbers than
// they produce (multinomial without replacement); it costs two counters.
Value derived_state(hlo::Builder& b, const Value& state) {
  return random_bits(b, state, {DType::U64, {2}});
}

// Mantissa digits of a float dtype, including the implicit bit.
int digits(DType dtype) {
  switch (dtype) {
    case DType::F64: return 53;
    case DType::F16: return 11;
    case DType::BF16: return 8;
    case DType::F8E4M3FN: return 4;
    case DType::F8E5M2: return 3;
    default: return 24;
  }
}

// Uniform on [0, 1) with `digits(dtype)` random bits, as PyTorch's generators draw it: every
// value is exact in `dtype`, so converting to it never rounds up to 1. The values are in
// math_dtype(dtype) (f64 for f64, else f32).
Value uniform01(hlo::Builder& b, const Value& state, const std::vector<int64_t>& shape,
                DType dtype) {
  if (!is_float(dtype)) dtype = DType::F32;
  const DType m = math_dtype(dtype) == DType::F64 ? DType::F64 : DType::F32;
  const TensorType bits_type{m == DType::F64 ? DType::U64 : DType::U32, shape};
  const int width = m == DType::F64 ? 64 : 32;
  const int d = digits(dtype);
  Value bits = random_bits(b, state, bits_type);
  bits = b.binary(Binary::ShiftRightLogical, bits, b.full(width - d, bits_type));
  const TensorType out{m, shape};
  return b.binary(Binary::Multiply, b.convert(bits, m), b.full(std::ldexp(1.0, -d), out));
}

Value affine(hlo::Builder& b, const Value& x, const Value& scale, const Value& shift) {
  return b.binary(Binary::Add, b.binary(Binary::Multiply, x, scale), shift);
}

// Standard normals by inversion, sqrt(2) * erfinv(v) for v uniform on (-1, 1): one draw
// per value and one polynomial, where Box-Muller needs a log, a sqrt, a sine and a cosine.
// v is (2k + 1 - 2^d) / 2^d for a d-bit k: symmetric, exact, never +-1.
Value standard_normal(hlo::Builder& b, const Value& state, const std::vector<int64_t>& shape,
                      DType dtype) {
  const DType m = math_dtype(dtype) == DType::F64 ? DType::F64 : DType::F32;
  const TensorType out{m, shape};
  const TensorType bits_type{m == DType::F64 ? DType::U64 : DType::U32, shape};
  const int width = m == DType::F64 ? 64 : 32;
  const int d = digits(m) - 1;
  Value bits = random_bits(b, state, bits_type);
  bits = b.binary(Binary::ShiftRightLogical, bits, b.full(width - d, bits_type));
  Value odd = b.binary(Binary::Add, b.binary(Binary::Multiply, b.convert(bits, m), b.full(2, out)),
                       b.full(1 - std::ldexp(1.0, d), out));
  Value v = b.binary(Binary::Multiply, odd, b.full(std::ldexp(1.0, -d), out));
  return b.binary(Binary::Multiply, b.unary(Unary::ErfInv, v), b.full(M_SQRT2, out));
}

// ---- uniform, normal, exponential -------------------------------------------------------

// Uniform on [from, to) of type `out`.
Value uniform(hlo::Builder& b, const Value& state, const TensorType& out, double from, double to) {
  check(hlo::is_float(out.dtype), "uniform_ expects a floating-point tensor");
  check(from <= to, "uniform_ expects to return a [from, to) range, but found from=" +
                        std::to_string(from) + " > to=" + std::to_string(to));
  Value u = uniform01(b, state, out.shape, out.dtype);
  Value x = b.convert(affine(b, u, b.full(to - from, u.type), b.full(from, u.type)), out.dtype);
  // Rounding to the output dtype can reach `to`; map it back to `from` so the range stays
  // half-open, as PyTorch's CUDA generator does.
  Value at_to = b.compare(Compare::EQ, x, b.full(to, out));
  return b.select(at_to, b.full(from, out), x);
}

V lower_uniform(Node& n) { return {uniform(n.b, n.rng_state(3), n.out(), n.f64(1), n.f64(2))}; }

// mean + std * N(0, 1) of `out`'s shape, in math_dtype(out.dtype) as `mean` and `std` are.
Value normal_sample(hlo::Builder& b, const Value& state, const TensorType& out, const Value& mean,
                    const Value& std) {
  return affine(b, standard_normal(b, state, out.shape, out.dtype), std, mean);
}

// mean and std are tensors or floats at argument positions 0 and 1 (normal.*) or 1 and 2
// (normal_ / normal.out, after self).
LowerFn normal(size_t mean, size_t std, size_t gen) {
  return [=](Node& n) {
    const TensorType& out = n.out();
    const DType m = math_dtype(out.dtype);
    auto operand = [&](size_t i) {
      if (n.has(i)) return cast_to(n.b, n.in(i), m, out.shape);
      return n.b.full(n.f64(i), {m, out.shape});
    };
    return V{normal_sample(n.b, n.rng_state(gen), out, operand(mean), operand(std))};
  };
}

V lower_exponential(Node& n) {
  const TensorType& out = n.out();
  const DType m = math_dtype(out.dtype);
  Value u = uniform01(n.b, n.rng_state(2), out.shape, m);
  // -log(1 - u) is 0 for u = 0; PyTorch's generators keep samples positive, so the
  // smallest one is half a step of u instead.
  Value e = n.b.unary(Unary::Negate, n.b.unary(Unary::LogPlusOne, n.b.unary(Unary::Negate, u)));
  e = n.b.binary(Binary::Maximum, e, n.b.full(std::ldexp(1.0, -digits(m) - 1), u.type));
  return {n.b.binary(Binary::Divide, e, n.b.full(n.f64(1), u.type))};
}

// rrelu_with_noise(self, noise, lower, upper, training, generator): in training, each
// element <= 0 is scaled by a slope drawn uniformly from [lower, upper), which is written to
// `noise` (1 for the others); in evaluation, leaky_relu with slope (lower + upper) / 2 and
// `noise` as it was. The out= form writes noise first (schema order), the others output.
V lower_rrelu_with_noise(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out(0);
  const DType m = math_dtype(out.dtype);
  Value x = b.convert(n.in(0), m);
  Value lower = cast_to(b, n.in(2), m, out.shape), upper = cast_to(b, n.in(3), m, out.shape);
  Value negative = b.compare(Compare::LE, x, b.full(0, x.type));
  Value noise = b.convert(n.in(1), m), slope;
  if (n.flag(4)) {
    Value u = uniform01(b, n.rng_state(5), out.shape, out.dtype);
    slope = affine(b, u, b.binary(Binary::Subtract, upper, lower), lower);
    noise = b.select(negative, slope, b.full(1, x.type));
  } else {
    slope = b.binary(Binary::Multiply, b.binary(Binary::Add, lower, upper), b.full(0.5, x.type));
  }
  Value y = b.convert(b.select(negative, b.binary(Binary::Multiply, x, slope), x), out.dtype);
  noise = b.convert(noise, n.in(1).type.dtype);
  if (n.args.size() > 6) return {noise, y};  // .out: noise (b!), then out
  return {y, noise};
}

// ---- gamma and Dirichlet ------------------------------------------------------------------

// Gamma(alpha, 1) samples of alpha's shape, in math dtype `m`: Marsaglia and Tsang's
// method, its rejection loop unrolled into kRounds candidates per element of which the
// first accepted one is taken (each is accepted with probability > 0.95, so all fail with
// probability < 1e-15; the last candidate stands in then). alpha < 1 samples alpha + 1 and
// scales by u^(1 / alpha). Like CPU's sampler, the result is at least the smallest
// normal number. The candidates draw from states derived from `state`: a sample needs
// more numbers than the one counter per element the generator's offset advances.
Value sample_gamma(hlo::Builder& b, const Value& state, const Value& alpha_in, DType m) {
  constexpr int64_t kRounds = 12;
  Math mm{b};
  Value alpha = b.convert(alpha_in, m);
  const std::vector<int64_t>& shape = alpha.type.shape;
  Value keys = random_bits(b, state, {DType::U64, {6}});
  auto key = [&](int64_t i) { return b.slice(keys, {2 * i}, {2 * i + 2}, {1}); };
  std::vector<int64_t> rounds_shape{kRounds};
  rounds_shape.insert(rounds_shape.end(), shape.begin(), shape.end());
  Value normals = standard_normal(b, key(0), rounds_shape, m);
  Value uniforms = uniform01(b, key(1), rounds_shape, m);
  Value boost_u = uniform01(b, key(2), shape, m);
  Value one = b.full(1, alpha.type);
  Value boosted = mm.lt(alpha, one);
  Value a = b.select(boosted, mm.add(alpha, one), alpha);
  Value d = mm.sub(a, b.full(1.0 / 3.0, alpha.type));
  Value c = mm.div(one, mm.sqrt(mm.mul(b.full(9, alpha.type), d)));
  Value result = d;
  std::vector<int64_t> start(rounds_shape.size(), 0), limit = rounds_shape,
      step(rounds_shape.size(), 1);
  for (int64_t k = kRounds - 1; k >= 0; --k) {  // the first accepted candidate wins
    start[0] = k, limit[0] = k + 1;
    Value x = b.reshape(b.slice(normals, start, limit, step), shape);
    Value u = b.reshape(b.slice(uniforms, start, limit, step), shape);
    Value t = mm.add(one, mm.mul(c, x));
    Value v = mm.mul(t, mm.mul(t, t));
    Value positive = mm.gt(v, b.full(0, alpha.type));
    Value safe_v = b.select(positive, v, one);
    Value bound = mm.add(mm.mul(b.full(0.5, alpha.type), mm.mul(x, x)),
                         mm.sub(d, mm.sub(mm.mul(d, safe_v), mm.mul(d, b.unary(Unary::Log, safe_v)))));
    Value accept = mm.and_(positive, mm.lt(b.unary(Unary::Log, u), bound));
    result = b.select(accept, mm.mul(d, safe_v), result);
  }
  Value scale = b.unary(Unary::Exponential,
                        mm.div(b.unary(Unary::Log, boost_u), b.select(boosted, alpha, one)));
  result = b.select(boosted, mm.mul(result, scale), result);
  const double tiny = m == DType::F64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  return mm.max(result, b.full(tiny, alpha.type));
}

// _standard_gamma(self, generator): a Gamma(self, 1) sample per element.
V lower_standard_gamma(Node& n) {
  const TensorType& out = n.out();
  const DType m = math_dtype(out.dtype) == DType::F64 ? DType::F64 : DType::F32;
  return {n.b.convert(sample_gamma(n.b, n.rng_state(1), n.in(0), m), out.dtype)};
}

// _sample_dirichlet(self, generator): Gamma(self, 1) samples normalized over the last dim.
V lower_sample_dirichlet(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  const DType m = math_dtype(out.dtype) == DType::F64 ? DType::F64 : DType::F32;
  Value g = sample_gamma(b, n.rng_state(1), n.in(0), m);
  const int64_t last = g.type.rank() - 1;
  std::vector<int64_t> keep;
  for (int64_t d = 0; d < last; ++d) keep.push_back(d);
  Value sum = b.broadcast_in_dim(b.reduce(g, b.constant(0, m), {last}, Binary::Add),
                                 g.type.shape, keep);
  return {b.convert(b.binary(Binary::Divide, g, sum), out.dtype)};
}

// ---- Poisson and binomial counts ----------------------------------------------------------

// What the count samplers share: the distribution's log pmf over k = 0 .. kSmall - 1 per
// element inverted at a uniform (small means: the tail past kSmall is below 1e-15), and
// Hoermann's transformed rejection (PTRS, BTRS; as NumPy and JAX sample them) for large
// ones, its loop unrolled into kRounds candidates of which the first accepted wins (each
// is accepted with probability > 0.9: all fail with probability < 1e-12).
constexpr int64_t kSmall = 48, kRounds = 12;

struct Counts {
  hlo::Builder& b;
  Math mm;
  DType m;
  std::vector<int64_t> shape;
  TensorType t;
  Value keys;  // three derived states: the inversion's uniforms and the two of rejection

  Counts(hlo::Builder& builder, const Value& state, const std::vector<int64_t>& s, DType dtype)
      : b(builder), mm{builder}, m(dtype), shape(s), t{dtype, s},
        keys(random_bits(builder, state, {DType::U64, {6}})) {}

  Value key(int64_t i) { return b.slice(keys, {2 * i}, {2 * i + 2}, {1}); }
  Value k(double v) { return b.full(v, t); }

  // The count where the CDF built from log_pmf(k) (k an [.., kSmall] value) passes u.
  template <typename LogPmf>
  Value inverted(LogPmf log_pmf) {
    std::vector<int64_t> ks_shape = shape;
    ks_shape.push_back(kSmall);
    const int64_t last = static_cast<int64_t>(shape.size());
    std::vector<int64_t> keep(shape.size());
    for (int64_t d = 0; d < last; ++d) keep[d] = d;
    Value ks = b.convert(b.iota({DType::S64, ks_shape}, last), m);
    Value p = b.unary(Unary::Exponential, log_pmf(ks, keep, ks_shape));
    Value lower = b.convert(mm.le(b.iota({DType::S64, {kSmall, kSmall}}, 0),
                                  b.iota({DType::S64, {kSmall, kSmall}}, 1)),
                            m);  // [j, k]: j <= k, so p . lower is the CDF
    Value cdf = b.dot_general(p, lower, {}, {}, {last}, {0}, m);
    Value u = b.broadcast_in_dim(uniform01(b, key(0), shape, m), ks_shape, keep);
    return b.reduce(b.convert(mm.le(cdf, u), m), b.constant(0, m), {last}, Binary::Add);
  }

  // Hoermann's candidate k = floor((2 a / us + b) u + c) from u = U - 1/2, us = 1/2 - |u|;
  // `accepted(k, us, v)` says whether it stands. `fallback` if none does.
  template <typename Accepted>
  Value rejected(const Value& a, const Value& bb, const Value& c, const Value& fallback,
                 Accepted accepted) {
    std::vector<int64_t> rounds_shape{kRounds};
    rounds_shape.insert(rounds_shape.end(), shape.begin(), shape.end());
    Value us_all = uniform01(b, key(1), rounds_shape, m);
    Value vs_all = uniform01(b, key(2), rounds_shape, m);
    std::vector<int64_t> start(rounds_shape.size(), 0), limit = rounds_shape,
        step(rounds_shape.size(), 1);
    Value result = fallback;
    for (int64_t r = kRounds - 1; r >= 0; --r) {
      start[0] = r, limit[0] = r + 1;
      Value u = mm.sub(b.reshape(b.slice(us_all, start, limit, step), shape), k(0.5));
      Value v = b.reshape(b.slice(vs_all, start, limit, step), shape);
      Value us = mm.sub(k(0.5), mm.abs(u));
      Value kk = b.unary(Unary::Floor,
                         mm.add(mm.mul(mm.add(mm.div(mm.mul(k(2), a), us), bb), u), c));
      Value safe_k = b.select(mm.lt(kk, k(0)), k(0), kk);
      result = b.select(accepted(kk, safe_k, us, v), safe_k, result);
    }
    return result;
  }

  Value log(const Value& x) { return b.unary(Unary::Log, x); }
  Value lgamma1(const Value& x) { return b.unary(Unary::Lgamma, mm.add(x, b.full(1, x.type))); }
};

DType count_math(const TensorType& out) {
  return math_dtype(out.dtype) == DType::F64 ? DType::F64 : DType::F32;
}

// poisson(self, generator): a Poisson(rate) count per element, as a float of self's dtype.
V lower_poisson(Node& n) {
  hlo::Builder& b = n.b;
  Counts s(b, n.rng_state(1), n.in(0).type.shape, count_math(n.out()));
  Math& mm = s.mm;
  Value rate = b.convert(n.in(0), s.m);
  Value small = s.inverted([&](const Value& ks, const std::vector<int64_t>& keep,
                               const std::vector<int64_t>& ks_shape) {
    Value lam = b.broadcast_in_dim(rate, ks_shape, keep);
    Value safe = b.select(mm.gt(lam, b.full(0, lam.type)), lam, b.full(1, lam.type));
    return mm.sub(mm.sub(mm.mul(ks, s.log(safe)), lam), s.lgamma1(ks));
  });
  small = b.select(mm.gt(rate, s.k(0)), small, s.k(0));
  Value lam = b.select(mm.ge(rate, s.k(10)), rate, s.k(10));
  Value slam = mm.sqrt(lam), loglam = s.log(lam);
  Value bb = mm.add(s.k(0.931), mm.mul(s.k(2.53), slam));
  Value a = mm.add(s.k(-0.059), mm.mul(s.k(0.02483), bb));
  Value inv_alpha = mm.add(s.k(1.1239), mm.div(s.k(1.1328), mm.sub(bb, s.k(3.4))));
  Value vr = mm.sub(s.k(0.9277), mm.div(s.k(3.6224), mm.sub(bb, s.k(2))));
  Value large = s.rejected(a, bb, mm.add(lam, s.k(0.43)), lam,
                           [&](const Value& kk, const Value& k, const Value& us, const Value& v) {
    Value quick = mm.and_(mm.ge(us, s.k(0.07)), mm.le(v, vr));
    Value bad = mm.or_(mm.lt(kk, s.k(0)), mm.and_(mm.lt(us, s.k(0.013)), mm.gt(v, us)));
    Value lhs = mm.sub(mm.add(s.log(v), s.log(inv_alpha)),
                       s.log(mm.add(mm.div(a, mm.mul(us, us)), bb)));
    Value rhs = mm.sub(mm.sub(mm.mul(k, loglam), lam), s.lgamma1(k));
    return mm.or_(quick, mm.and_(mm.not_(bad), mm.le(lhs, rhs)));
  });
  return {b.convert(b.select(mm.lt(rate, s.k(10)), small, large), n.out().dtype)};
}

// binomial(count, prob, generator): a Binomial(count, prob) count per element. Sampled with
// q = min(prob, 1 - prob) and reflected (count - X) where prob > 1/2; BTRS where
// count * q >= 10, else the inversion.
V lower_binomial(Node& n) {
  hlo::Builder& b = n.b;
  const TensorType& out = n.out();
  Counts s(b, n.rng_state(2), out.shape, count_math(out));
  Math& mm = s.mm;
  Value count = b.unary(Unary::Floor, cast_to(b, n.in(0), s.m, out.shape));
  Value prob = cast_to(b, n.in(1), s.m, out.shape);
  Value flip = mm.gt(prob, s.k(0.5));
  Value p = b.select(flip, mm.sub(s.k(1), prob), prob);
  Value q = mm.sub(s.k(1), p);
  Value mean = mm.mul(count, p);
  Value safe_p = b.select(mm.gt(p, s.k(0)), p, s.k(0.5));
  Value small = s.inverted([&](const Value& ks, const std::vector<int64_t>& keep,
                               const std::vector<int64_t>& ks_shape) {
    auto spread = [&](const Value& v) { return b.broadcast_in_dim(v, ks_shape, keep); };
    Value nn = spread(count), lp = spread(s.log(safe_p)), lq = spread(s.log(q));
    Value rest = mm.sub(nn, ks);
    Value valid = mm.ge(rest, b.full(0, rest.type));
    Value safe_rest = b.select(valid, rest, b.full(0, rest.type));
    Value logp = mm.add(mm.sub(mm.sub(spread(s.lgamma1(count)), s.lgamma1(ks)), s.lgamma1(safe_rest)),
                        mm.add(mm.mul(ks, lp), mm.mul(safe_rest, lq)));
    return b.select(valid, logp, b.full(-INFINITY, logp.type));
  });
  small = b.select(mm.gt(p, s.k(0)), small, s.k(0));
  Value spq = mm.sqrt(mm.mul(mean, q));
  Value bb = mm.add(s.k(1.15), mm.mul(s.k(2.53), spq));
  Value a = mm.add(mm.add(s.k(-0.0873), mm.mul(s.k(0.0248), bb)), mm.mul(s.k(0.01), p));
  Value c = mm.add(mean, s.k(0.5));
  Value vr = mm.sub(s.k(0.92), mm.div(s.k(4.2), bb));
  Value alpha = mm.mul(mm.add(s.k(2.83), mm.div(s.k(5.1), bb)), spq);
  Value lpq = s.log(mm.div(safe_p, q));
  Value mode = b.unary(Unary::Floor, mm.mul(mm.add(count, s.k(1)), p));
  Value h = mm.add(s.lgamma1(mode), s.lgamma1(mm.sub(count, mode)));
  Value large = s.rejected(a, bb, c, b.unary(Unary::Floor, mean),
                           [&](const Value& kk, const Value& k, const Value& us, const Value& v) {
    Value inside = mm.and_(mm.ge(kk, s.k(0)), mm.le(kk, count));
    Value quick = mm.and_(mm.ge(us, s.k(0.07)), mm.le(v, vr));
    Value lhs = s.log(mm.div(mm.mul(v, alpha), mm.add(mm.div(a, mm.mul(us, us)), bb)));
    Value safe_rest = b.select(mm.le(k, count), mm.sub(count, k), s.k(0));
    Value rhs = mm.add(mm.sub(mm.sub(h, s.lgamma1(k)), s.lgamma1(safe_rest)),
                       mm.mul(mm.sub(k, mode), lpq));
    return mm.and_(inside, mm.or_(quick, mm.le(lhs, rhs)));
  });
  Value x = b.select(mm.lt(mean, s.k(10)), small, large);
  x = b.select(flip, mm.sub(count, x), x);
  return {b.convert(x, out.dtype)};
}

V lower_log_normal(Node& n) {  // log_normal_(self, mean, std, *, generator)
  const TensorType& out = n.out();
  check(n.f64(2) > 0, "log_normal_ expects std > 0.0, but found std=" + std::to_string(n.f64(2)));
  Value z = standard_normal(n.b, n.rng_state(3), out.shape, out.dtype);
  return {n.b.unary(Unary::Exponential,
                    affine(n.b, z, n.b.full(n.f64(2), z.type), n.b.full(n.f64(1), z.type)))};
}

V lower_cauchy(Node& n) {  // cauchy_(self, median, sigma, *, generator)
  const TensorType& out = n.out();
  const DType m = math_dtype(out.dtype);
  Value u = uniform01(n.b, n.rng_state(3), out.shape, m);
  Value angle = n.b.binary(Binary::Multiply, n.b.binary(Binary::Subtract, u, n.b.full(0.5, u.type)),
                           n.b.full(M_PI, u.type));
  Value tan =
      n.b.binary(Binary::Divide, n.b.unary(Unary::Sine, angle), n.b.unary(Unary::Cosine, angle));
  return {affine(n.b, tan, n.b.full(n.f64(2), u.type), n.b.full(n.f64(1), u.type))};
}

// The number of Bernoulli(p) trials up to the first success: ceil(log(U) / log(1 - p)).
V lower_geometric(Node& n) {  // geometric_(self, p, *, generator)
  const TensorType& out = n.out();
  const double p = n.f64(1);
  check(p > 0 && p < 1, "geometric_ expects p to be in (0, 1), but got p=" + std::to_string(p));
  const DType m = out.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value u = uniform01(n.b, n.rng_state(2), out.shape, m);
  Value log =
      n.b.unary(Unary::LogPlusOne, n.b.unary(Unary::Negate, u));  // log(1 - u), 1 - u in (0, 1]
  Value trials =
      n.b.unary(Unary::Ceil, n.b.binary(Binary::Divide, log, n.b.full(std::log1p(-p), u.type)));
  return {n.b.binary(Binary::Maximum, trials, n.b.full(1, u.type))};
}

// ---- bernoulli, dropout -----------------------------------------------------------------

// 1 with probability p (a tensor or float at `p`), else 0, of shape out.
LowerFn bernoulli(size_t p, size_t gen) {
  return [=](Node& n) {
    const TensorType& out = n.out();
    const bool wide = out.dtype == DType::F64 || (n.has(p) && n.in(p).type.dtype == DType::F64);
    const DType m = wide ? DType::F64 : DType::F32;
    Value u = uniform01(n.b, n.rng_state(gen), out.shape, m);
    if (!n.has(p))
      check(n.f64(p) >= 0 && n.f64(p) <= 1,
            "bernoulli_ expects p to be in [0, 1], but got p=" + std::to_string(n.f64(p)));
    Value prob = n.has(p) ? cast_to(n.b, n.in(p), m, out.shape) : n.b.full(n.f64(p), u.type);
    return V{n.b.compare(Compare::LT, u, prob)};
  };
}

V lower_native_dropout(Node& n) {
  const TensorType& out = n.out(0);
  const Value& x = n.in(0);
  const double p = n.f64(1);
  const bool train = n.is_none(2) || n.flag(2);
  if (!train) return {x, n.b.full(1, n.out(1))};
  const DType m = math_dtype(out.dtype);
  Value u = uniform01(n.b, n.rng_state(), out.shape, DType::F32);
  Value keep = n.b.compare(Compare::LT, u, n.b.full(1 - p, u.type));
  // select, not a product with the mask: for p = 1 the scale is inf and 0 * inf is NaN.
  Value xm = n.b.convert(x, m);
  Value scaled = n.b.binary(Binary::Multiply, xm, n.b.full(p < 1 ? 1 / (1 - p) : 0, xm.type));
  return {n.b.select(keep, scaled, n.b.full(0, xm.type)), keep};
}

V lower_native_dropout_backward(Node& n) {
  const DType m = math_dtype(n.out().dtype);
  Value g = cast_to(n.b, n.in(0), m, n.out().shape);
  Value mask = cast_to(n.b, n.in(1), m, n.out().shape);
  return {n.b.binary(Binary::Multiply, n.b.binary(Binary::Multiply, g, mask),
                     n.b.full(n.f64(2), g.type))};
}

// ---- integers ----------------------------------------------------------------------------

// Integers uniform on [low, low + range) from 64-bit draws; range 0 stands for 2^64.
Value random_ints(hlo::Builder& b, const Value& state, const TensorType& out, int64_t low,
                  uint64_t range) {
  const TensorType u64{DType::U64, out.shape};
  Value bits = random_bits(b, state, u64);
  if (range != 0) {
    Value r =
        b.broadcast_in_dim(b.constant_int(static_cast<int64_t>(range), DType::U64), out.shape, {});
    bits = b.binary(Binary::Remainder, bits, r);
  }
  const TensorType s64{DType::S64, out.shape};
  Value x = b.binary(Binary::Add, b.bitcast_convert(bits, s64),
                     b.broadcast_in_dim(b.constant_int(low, DType::S64), out.shape, {}));
  return b.convert(x, out.dtype);
}

// The largest value random_ draws by default: 2^digits for floats (every integer up to it
// is exact), the dtype's maximum for integers.
uint64_t default_max(DType dtype) {
  switch (dtype) {
    case DType::Pred: return 1;
    case DType::S8: return INT8_MAX;
    case DType::U8: return UINT8_MAX;
    case DType::S16: return INT16_MAX;
    case DType::U16: return UINT16_MAX;
    case DType::S32: return INT32_MAX;
    case DType::U32: return UINT32_MAX;
    case DType::S64: return INT64_MAX;
    case DType::U64: return UINT64_MAX;
    default: return uint64_t{1} << digits(dtype);
  }
}

V lower_random(Node& n) {  // random_(self, *, generator)
  return {random_ints(n.b, n.rng_state(1), n.out(), 0, default_max(n.out().dtype) + 1)};
}

V lower_random_to(Node& n) {  // random_.to(self, to, *, generator)
  check(n.i64(1) > 0, "random_ expects 'from' to be less than 'to', but got from=0 >= to=" +
                          std::to_string(n.i64(1)));
  return {random_ints(n.b, n.rng_state(2), n.out(), 0, static_cast<uint64_t>(n.i64(1)))};
}

// Integers uniform on [from, to), or from `from` up to the dtype's default maximum.
Value random_range(hlo::Builder& b, const Value& state, const TensorType& out, int64_t from,
                   std::optional<int64_t> to) {
  uint64_t range;
  if (to) {
    check(from < *to, "random_ expects 'from' to be less than 'to', but got from=" +
                          std::to_string(from) + " >= to=" + std::to_string(*to));
    range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
  } else if (out.dtype == DType::S64 && from == INT64_MIN) {
    range = 0;  // the full 64-bit range
  } else {
    range = default_max(out.dtype) - static_cast<uint64_t>(from) + 1;
  }
  return random_ints(b, state, out, from, range);
}

V lower_random_from(Node& n) {  // random_.from(self, from, to?, *, generator)
  return {random_range(n.b, n.rng_state(3), n.out(), n.i64(1), n.opt_i64(2))};
}

// A permutation of 0..n-1: indices sorted by random 64-bit keys.
V lower_randperm(Node& n) {  // randperm.generator_out(n, *, generator, out)
  const TensorType& out = n.out();
  const int64_t count = out.shape.at(0);
  if (count == 0) return {n.b.full(0, out)};
  Value keys = random_bits(n.b, n.rng_state(1), {DType::U64, {count}});
  Value index = n.b.iota({DType::S64, {count}}, 0);
  const TensorType ku{DType::U64, {}}, ks{DType::S64, {}};
  std::string less = n.b.region({ku, ku, ks, ks}, [](hlo::Builder& r, const V& a) {
    return V{r.compare(Compare::LT, a[0], a[1])};
  });
  V sorted = n.b.emit_multi("stablehlo.sort", {keys, index}, "dimension = 0 : i64",
                            {keys.type, index.type}, {less});
  return {n.b.convert(sorted[1], out.dtype)};
}

// ---- multinomial -------------------------------------------------------------------------

// Prefix sums along the last dim of a [rows, k] value.
Value cumsum_last(hlo::Builder& b, const Value& x) {
  const int64_t k = x.type.shape[1];
  const TensorType scalar{x.type.dtype, {}};
  std::string attrs = "window_dimensions = array<i64: 1, " + std::to_string(k) +
                      ">, window_strides = array<i64: 1, 1>, padding = dense<[[0, 0], [" +
                      std::to_string(k - 1) + ", 0]]> : tensor<2x2xi64>";
  return b.emit("stablehlo.reduce_window", {x, b.constant(0, x.type.dtype)}, attrs, x.type,
                {b.binary_region(Binary::Add, x.type.dtype)});
}

V lower_multinomial(Node& n) {  // multinomial(self, num_samples, replacement, *, generator)
  const TensorType& out = n.out();
  const Value& self = n.in(0);
  const bool batched = self.type.rank() == 2;
  const int64_t rows = batched ? self.type.shape[0] : 1;
  const int64_t k = self.type.shape.back();
  const int64_t samples = n.i64(1);
  if (rows * samples == 0 || k == 0) return {n.b.full(0, out)};
  const DType m = self.type.dtype == DType::F64 ? DType::F64 : DType::F32;
  Value p = n.b.reshape(n.b.convert(self, m), {rows, k});
  const Value& state = n.rng_state(3);
  Value index;
  if (n.flag(2)) {
    // Inverse CDF: a sample is the number of prefix sums at or below u * total.
    Value cdf = cumsum_last(n.b, p);
    Value total = n.b.reshape(n.b.slice(cdf, {0, k - 1}, {rows, k}, {1, 1}), {rows});
    Value u = uniform01(n.b, state, {rows, samples}, m);
    Value target =
        n.b.binary(Binary::Multiply, u, n.b.broadcast_in_dim(total, {rows, samples}, {0}));
    const std::vector<int64_t> cube{rows, samples, k};
    Value below = n.b.compare(Compare::LE, n.b.broadcast_in_dim(cdf, cube, {0, 2}),
                              n.b.broadcast_in_dim(target, cube, {0, 1}));
    Value count = n.b.reduce(n.b.convert(below, DType::S64), n.b.constant(0, DType::S64), {2},
                             hlo::Binary::Add);
    // Rounding of u * total can reach the total; fall back to the last category with
    // positive weight rather than one past it.
    Value iota = n.b.iota({DType::S64, {rows, k}}, 1);
    Value positive = n.b.compare(Compare::GT, p, n.b.full(0, p.type));
    Value last = n.b.reduce(n.b.select(positive, iota, n.b.full(0, iota.type)),
                            n.b.constant(0, DType::S64), {1}, hlo::Binary::Maximum);
    index = n.b.binary(Binary::Minimum, count, n.b.broadcast_in_dim(last, {rows, samples}, {0}));
  } else {
    // Exponential race: category i finishes at E_i / p_i; the first `samples` to finish are
    // a draw without replacement with probabilities proportional to p.
    Value u = uniform01(n.b, derived_state(n.b, state), {rows, k}, m);
    Value log = n.b.unary(Unary::LogPlusOne, n.b.unary(Unary::Negate, u));  // -E_i, in (-inf, 0]
    Value positive = n.b.compare(Compare::GT, p, n.b.full(0, p.type));
    Value key =
        n.b.select(positive, n.b.binary(Binary::Divide, log, p), n.b.full(-INFINITY, p.type));
    V top = n.b.emit_multi("chlo.top_k", {key}, "k = " + std::to_string(samples) + " : i64",
                           {{m, {rows, samples}}, {DType::S32, {rows, samples}}});
    index = top[1];
  }
  return {n.b.convert(n.b.reshape(index, out.shape), out.dtype)};
}

// ---- compiled graphs --------------------------------------------------------------------
// Eager mode runs the random factories as empty + the in-place op (rand: uniform_(0, 1),
// randn: normal_(0, 1), randint: random_(low, high)); these draw the same numbers from the
// same generator state, so a compiled graph and eager mode agree for a seed.

V graph_rand(Node& n) { return {uniform(n.b, n.rng_state(), n.out(), 0, 1)}; }

V graph_randn(Node& n) {
  const TensorType& out = n.out();
  const TensorType m{math_dtype(out.dtype), out.shape};
  return {normal_sample(n.b, n.rng_state(), out, n.b.full(0, m), n.b.full(1, m))};
}

// randint(high, size) and randint_like(self, high): low 0; randint.low(low, high, size)
// and randint_like.low_dtype(self, low, high).
LowerFn graph_randint(std::optional<size_t> low, size_t high) {
  return [=](Node& n) {
    return V{random_range(n.b, n.rng_state(), n.out(), low ? n.i64(*low) : 0, n.i64(high))};
  };
}

}  // namespace

TORCH_TPU_LOWERING(uniform, {"uniform_"}, lower_uniform, true);
TORCH_TPU_LOWERING(normal_, {"normal_", "normal.out"}, normal(1, 2, 3), true);
TORCH_TPU_LOWERING(normal,
                   {"normal.Tensor_float", "normal.Tensor_float_out", "normal.float_Tensor",
                    "normal.float_Tensor_out", "normal.Tensor_Tensor", "normal.Tensor_Tensor_out"},
                   normal(0, 1, 2), true);
TORCH_TPU_LOWERING(exponential, {"exponential_"}, lower_exponential, true);
TORCH_TPU_LOWERING(standard_gamma, {"_standard_gamma", "_standard_gamma.out"}, lower_standard_gamma,
                   true);
TORCH_TPU_LOWERING(sample_dirichlet, {"_sample_dirichlet", "_sample_dirichlet.out"},
                   lower_sample_dirichlet, true);
TORCH_TPU_LOWERING(poisson, {"poisson", "poisson.out"}, lower_poisson, true);
TORCH_TPU_LOWERING(binomial, {"binomial", "binomial.out"}, lower_binomial, true);
TORCH_TPU_LOWERING(rrelu_with_noise,
                   {"rrelu_with_noise", "rrelu_with_noise_", "rrelu_with_noise.out"},
                   lower_rrelu_with_noise, true);
TORCH_TPU_LOWERING(log_normal, {"log_normal_"}, lower_log_normal, true);
TORCH_TPU_LOWERING(cauchy, {"cauchy_"}, lower_cauchy, true);
TORCH_TPU_LOWERING(geometric, {"geometric_"}, lower_geometric, true);
TORCH_TPU_LOWERING(bernoulli_p,
                   {"bernoulli_.float", "bernoulli_.Tensor", "bernoulli.p", "bernoulli.Tensor",
                    "bernoulli.Tensor_out", "bernoulli.float_out"},
                   bernoulli(1, 2), true);
TORCH_TPU_LOWERING(bernoulli, {"bernoulli", "bernoulli.out"}, bernoulli(0, 1), true);
TORCH_TPU_LOWERING(random, {"random_"}, lower_random, true);
TORCH_TPU_LOWERING(random_to, {"random_.to"}, lower_random_to, true);
TORCH_TPU_LOWERING(random_from, {"random_.from"}, lower_random_from, true);
TORCH_TPU_LOWERING(randperm, {"randperm.generator_out"}, lower_randperm, true);
TORCH_TPU_LOWERING(multinomial, {"multinomial", "multinomial.out"}, lower_multinomial, true);
TORCH_TPU_LOWERING(native_dropout, {"native_dropout", "native_dropout.out"}, lower_native_dropout,
                   true);
TORCH_TPU_LOWERING(native_dropout_backward,
                   {"native_dropout_backward", "native_dropout_backward.out"},
                   lower_native_dropout_backward);

// Compiled graphs: the factories, and the functional forms of the in-place ops above
// (what functionalization turns x.uniform_() into), with the same argument positions.
// (Dynamo does not trace Tensor.random_, so graphs never hold its functional form.)
TORCH_TPU_GRAPH_LOWERING(rand, {"rand", "rand.generator", "rand_like", "rand_like.generator"},
                         graph_rand, true);
TORCH_TPU_GRAPH_LOWERING(randn, {"randn", "randn.generator", "randn_like", "randn_like.generator"},
                         graph_randn, true);
TORCH_TPU_GRAPH_LOWERING(randint, {"randint", "randint.generator"}, graph_randint(std::nullopt, 0),
                         true);
TORCH_TPU_GRAPH_LOWERING(randint_low, {"randint.low", "randint.low_generator"}, graph_randint(0, 1),
                         true);
TORCH_TPU_GRAPH_LOWERING(randint_like, {"randint_like", "randint_like.generator"},
                         graph_randint(std::nullopt, 1), true);
TORCH_TPU_GRAPH_LOWERING(randint_like_low,
                         {"randint_like.low_dtype", "randint_like.low_generator_dtype"},
                         graph_randint(1, 2), true);
TORCH_TPU_GRAPH_LOWERING(normal_float_float, {"normal.float_float"}, normal(0, 1, 3), true);
TORCH_TPU_GRAPH_LOWERING(uniform_functional, {"uniform"}, lower_uniform, true);
TORCH_TPU_GRAPH_LOWERING(normal_functional, {"normal_functional"}, normal(1, 2, 3), true);
TORCH_TPU_GRAPH_LOWERING(exponential_functional, {"exponential"}, lower_exponential, true);
TORCH_TPU_GRAPH_LOWERING(log_normal_functional, {"log_normal"}, lower_log_normal, true);
TORCH_TPU_GRAPH_LOWERING(cauchy_functional, {"cauchy"}, lower_cauchy, true);
TORCH_TPU_GRAPH_LOWERING(geometric_functional, {"geometric"}, lower_geometric, true);

}  // namespace torch_tpu::ops
