// Unary math. Float functions promote integer inputs (the meta kernel gives the result
// dtype) and compute bf16/f16 in f32, as PyTorch's CPU kernels do. Exact functions (neg,
// floor, sign, ...) run in the input's promoted dtype.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "ops/elementwise.h"

namespace torch_tpu::ops {

hlo::Value digamma(const Math& m, const hlo::Value& x) {
  // PyTorch gives -inf at +0 and +inf at -0 (the pole's one-sided limits).
  hlo::Value pole = m.sel(sign_bit(m.b, x), m.k(INFINITY, x), m.k(-INFINITY, x));
  return m.sel(m.eq(x, m.k(0, x)), pole, m.b.unary(Unary::Digamma, x));
}

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// f(x) on argument 0 in float math.
template <typename F>
LowerFn float_fn(F f) {
  return [f](Node& n) { return V{f(Math{n.b}, arg_math(n, 0))}; };
}

// op(x) on floats.
LowerFn float_unary(Unary op) {
  return float_fn([op](const Math& m, const Value& x) { return m.b.unary(op, x); });
}

// f(x) in the promoted dtype; integers and bool pass through unchanged when `ints` is
// "identity" (floor of an int), and are rejected as PyTorch's CPU kernels do otherwise.
enum class Ints { Identity, Compute, Reject, RejectBool };
template <typename F>
LowerFn exact_fn(const char* name, Ints ints, F f) {
  return [name, ints, f](Node& n) {
    Value x = arg_as(n, 0, n.compute);
    bool is_float = hlo::is_float(n.compute);
    bool is_bool = n.compute == DType::Pred;
    if (!is_float) {
      if (ints == Ints::Reject || (is_bool && ints == Ints::RejectBool))
        not_implemented(name, n.compute);
      if (ints == Ints::Identity) {
        if (is_bool) not_implemented(name, n.compute);
        return V{x};
      }
    }
    return V{f(Math{n.b}, x)};
  };
}

LowerFn exact_unary(const char* name, Ints ints, Unary op) {
  return exact_fn(name, ints, [op](const Math& m, const Value& x) { return m.b.unary(op, x); });
}

// An all-false (or all-true) bool result, for predicates integers never satisfy.
Value constant_pred(Node& n, bool value) { return n.b.full(value, {DType::Pred, n.out().shape}); }

Value sign(const Math& m, const Value& x) {
  if (x.type.dtype == DType::Pred) return x;
  if (hlo::is_complex(x.type.dtype)) {
    // sgn of a complex number: z / |z|, 0 at 0.
    Value r = m.b.unary(Unary::Abs, x);
    Value zero = m.b.full(0, r.type);
    Value unit = m.div(x, m.b.complex(r, zero));
    return m.sel(m.eq(r, zero), m.k(0, x), unit);
  }
  // (0 < x) - (x < 0): NaN gives 0, as on CPU.
  Value zero = m.k(0, x);
  return m.sel(m.gt(x, zero), m.k(1, x), m.sel(m.lt(x, zero), m.k(-1, x), zero));
}

V lower_round_decimals(Node& n) {
  Value x = arg_as(n, 0, n.compute);
  if (!hlo::is_float(n.compute)) not_implemented("round_cpu", n.compute);
  Math m{n.b};
  x = n.b.convert(x, math_dtype(n.compute));
  int64_t decimals = n.i64(1);
  Value scale = m.k(std::pow(10.0, static_cast<double>(std::abs(decimals))), x);
  auto round = [&](const Value& v) { return n.b.unary(Unary::RoundNearestEven, v); };
  if (decimals < 0) return {m.mul(round(m.div(x, scale)), scale)};
  return {m.div(round(m.mul(x, scale)), scale)};
}

double largest(DType dtype) {
  switch (dtype) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F8E4M3FN: return 448.0;
    case DType::F8E5M2: return 57344.0;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

V lower_nan_to_num(Node& n) {
  Value x = arg_as(n, 0, n.compute);
  if (!hlo::is_float(n.compute)) return {x};
  Math m{n.b};
  double top = largest(n.compute);
  double nan = n.is_none(1) ? 0.0 : n.f64(1);
  double pos = n.is_none(2) ? top : n.f64(2);
  double neg = n.is_none(3) ? -top : n.f64(3);
  Value r = m.sel(m.is_nan(x), m.k(nan, x), x);
  r = m.sel(m.eq(x, m.k(INFINITY, x)), m.k(pos, x), r);
  return {m.sel(m.eq(x, m.k(-INFINITY, x)), m.k(neg, x), r)};
}

V lower_logit(Node& n) {
  Value x = arg_math(n, 0);
  Math m{n.b};
  if (!n.is_none(1)) {
    double eps = n.f64(1);
    x = nan_min(n.b, nan_max(n.b, x, m.k(eps, x)), m.k(1 - eps, x));
  }
  return {m.log(m.div(x, m.sub(m.k(1, x), x)))};
}

V lower_logit_backward(Node& n) {
  Value g = arg_math(n, 0);
  Value x = arg_math(n, 1);
  Math m{n.b};
  Value d = m.div(g, m.mul(x, m.sub(m.k(1, x), x)));
  if (n.is_none(2)) {
    Value outside = m.or_(m.lt(x, m.k(0, x)), m.gt(x, m.k(1, x)));
    return {m.sel(outside, m.k(NAN, x), d)};
  }
  double eps = n.f64(2);
  Value outside = m.or_(m.lt(x, m.k(eps, x)), m.gt(x, m.k(1 - eps, x)));
  return {m.sel(outside, m.k(0, x), d)};
}

// Predicates on floats that no integer satisfies (isnan, isposinf, ...).
template <typename F>
LowerFn float_predicate(F f) {
  return [f](Node& n) {
    if (!hlo::is_float(n.compute)) return V{constant_pred(n, false)};
    return V{f(Math{n.b}, arg_as(n, 0, n.compute))};
  };
}

V lower_signbit(Node& n) { return {sign_bit(n.b, arg_as(n, 0, n.compute))}; }

V lower_logical_not(Node& n) {
  Value x = arg_as(n, 0, n.compute);
  Math m{n.b};
  return {m.eq(x, m.k(0, x))};
}

V lower_bitwise_not(Node& n) {
  if (hlo::is_float(n.compute)) not_implemented("bitwise_not_cpu", n.compute);
  return {n.b.unary(Unary::Not, arg_as(n, 0, n.compute))};
}

Value bessel_i1e(const Math& m, const Value& x) { return m.b.unary(Unary::BesselI1e, x); }
Value bessel_i1(const Math& m, const Value& x) { return m.mul(bessel_i1e(m, x), m.exp(m.abs(x))); }

// `f`, rejecting bf16/f16 as PyTorch's CPU kernel `name` does.
LowerFn no_half(const char* name, LowerFn f) {
  return [name, f](Node& n) {
    if (n.compute == DType::BF16 || n.compute == DType::F16) not_implemented(name, n.compute);
    return f(n);
  };
}

// exp(-|x|) I0(x), in f64 whatever the input: the power series sum (x^2/4)^k / (k!)^2
// (positive terms, no cancellation) up to |x| = 20, where 36 terms reach f64 precision,
// and Hankel's asymptotic series beyond, whose smallest term there is below 1e-16.
Value bessel_i0e(const Math& m, const Value& x_in) {
  hlo::Builder& b = m.b;
  Value x = b.convert(x_in, DType::F64);
  Value ax = m.abs(x);
  Value q = m.div(m.mul(x, x), m.k(4, x));
  Value term = m.k(1, x), series = m.k(1, x);
  for (int k = 1; k < 36; ++k) {
    term = m.mul(term, m.div(q, m.k(static_cast<double>(k) * k, x)));
    series = m.add(series, term);
  }
  Value small = m.mul(series, m.exp(m.neg(ax)));
  // a_k = ((2k - 1)!!)^2 / (k! 8^k), summed in powers of 1/|x| by Horner's rule.
  std::vector<double> a{1};
  for (int k = 1; k < 24; ++k) a.push_back(a.back() * (2.0 * k - 1) * (2.0 * k - 1) / (8.0 * k));
  Value inv = m.div(m.k(1, x), ax);
  Value poly = m.k(a.back(), x);
  for (int k = static_cast<int>(a.size()) - 2; k >= 0; --k)
    poly = m.add(m.mul(poly, inv), m.k(a[k], x));
  Value large = m.div(poly, m.b.unary(Unary::Sqrt, m.mul(m.k(2 * 3.14159265358979323846, x), ax)));
  return b.convert(m.sel(m.le(ax, m.k(20, x)), small, large), x_in.type.dtype);
}

// I0(x): the scaled function times exp(|x|) (NaN at +-inf, as PyTorch's kernel gives).
Value bessel_i0(const Math& m, const Value& x) { return m.mul(bessel_i0e(m, x), m.exp(m.abs(x))); }

// -x log x, 0 at 0, -inf below.
Value entr(const Math& m, const Value& x) {
  Value zero = m.k(0, x);
  Value r = m.sel(m.eq(x, zero), zero, m.neg(m.mul(x, m.log(x))));
  return m.sel(m.lt(x, zero), m.k(-INFINITY, x), r);
}

// The inverse of the normal CDF: sqrt(2) erfinv(2p - 1).
V lower_ndtri(Node& n) {
  if (n.compute == DType::BF16 || n.compute == DType::F16) not_implemented("ndtri_cpu", n.compute);
  Math m{n.b};
  Value p = arg_math(n, 0);
  Value t = m.sub(m.mul(m.k(2, p), p), m.k(1, p));
  return {m.mul(m.k(std::sqrt(2.0), p), n.b.unary(Unary::ErfInv, t))};
}

// frexp(self) -> (mantissa, exponent): x = mantissa * 2^exponent, |mantissa| in [0.5, 1),
// read off the IEEE bits in integer arithmetic (XLA:CPU flushes subnormal floats to zero,
// so float math would lose them): f64 as itself, every other float as f32 bits (bf16 by
// a shift, which keeps its subnormals). Zero, inf and NaN give themselves and exponent 0,
// as glibc's frexp does.
V lower_frexp(Node& n) {
  hlo::Builder& b = n.b;
  const Value& in = n.in(0);
  const DType dtype = in.type.dtype;
  if (!hlo::is_float(dtype))
    throw std::invalid_argument("torch.frexp() only supports floating-point dtypes");
  const bool wide = dtype == DType::F64;
  const DType float_t = wide ? DType::F64 : DType::F32, int_t = wide ? DType::S64 : DType::S32;
  const int64_t width = wide ? 64 : 32, mbits = wide ? 52 : 23, bias = wide ? 1023 : 127;
  const hlo::TensorType it{int_t, in.type.shape};
  auto k = [&](int64_t v) { return b.broadcast_in_dim(b.constant_int(v, int_t), it.shape, {}); };
  Value bits;
  if (dtype == DType::BF16) {
    Value half = b.convert(b.bitcast_convert(in, {DType::S16, in.type.shape}), DType::S32);
    bits = b.binary(Binary::ShiftLeft, half, k(16));
  } else {
    bits = b.bitcast_convert(b.convert(in, float_t), it);
  }
  const int64_t int_max =
      wide ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
  const int64_t frac_mask = (int64_t{1} << mbits) - 1, half_field = (bias - 1) << mbits;
  Value magnitude = b.binary(Binary::And, bits, k(int_max));
  Value sign = b.binary(Binary::Xor, bits, magnitude);
  Value field = b.binary(Binary::ShiftRightLogical, magnitude, k(mbits));
  Value frac = b.binary(Binary::And, magnitude, k(frac_mask));
  // Normal numbers: replace the exponent field by bias - 1, putting the magnitude in [0.5, 1).
  Value exponent = b.binary(Binary::Subtract, field, k(bias - 1));
  Value mantissa = b.binary(Binary::Or, b.binary(Binary::Or, sign, frac), k(half_field));
  // Subnormals: the leading one of the fraction at bit p becomes the implicit bit.
  Value p = b.binary(Binary::Subtract, k(width - 1), b.unary(Unary::CountLeadingZeros, frac));
  Value shifted = b.binary(
      Binary::And, b.binary(Binary::ShiftLeft, frac, b.binary(Binary::Subtract, k(mbits), p)),
      k(frac_mask));
  Value subnormal = b.compare(hlo::Compare::EQ, field, k(0));
  exponent = b.select(subnormal, b.binary(Binary::Add, p, k(2 - bias - mbits)), exponent);
  mantissa =
      b.select(subnormal, b.binary(Binary::Or, b.binary(Binary::Or, sign, shifted), k(half_field)),
               mantissa);
  Value special = b.binary(Binary::Or, b.compare(hlo::Compare::EQ, magnitude, k(0)),
                           b.compare(hlo::Compare::EQ, field, k(wide ? 0x7FF : 0xFF)));
  Value m = b.select(special, b.convert(in, float_t),
                     b.bitcast_convert(mantissa, {float_t, in.type.shape}));
  exponent = b.select(special, k(0), exponent);
  return {b.convert(m, n.out(0).dtype), b.convert(exponent, n.out(1).dtype)};
}

const double kLn2 = 0.693147180559945309417;
const double kLn10 = 2.302585092994045684018;
const double kPi = 3.14159265358979323846;

}  // namespace

TORCH_TPU_LOWERING(exp, {"exp", "exp_", "exp.out"}, float_unary(Unary::Exponential));
TORCH_TPU_LOWERING(exp2, {"exp2", "exp2_", "exp2.out"},
                   float_fn([](const Math& m, const Value& x) { return m.pow(m.k(2, x), x); }));
TORCH_TPU_LOWERING(expm1, {"expm1", "expm1_", "expm1.out"},
                   float_unary(Unary::ExponentialMinusOne));
TORCH_TPU_LOWERING(log, {"log", "log_", "log.out"}, float_unary(Unary::Log));
TORCH_TPU_LOWERING(log2, {"log2", "log2_", "log2.out"}, float_fn([](const Math& m, const Value& x) {
                     return m.div(m.log(x), m.k(kLn2, x));
                   }));
TORCH_TPU_LOWERING(log10, {"log10", "log10_", "log10.out"},
                   float_fn([](const Math& m, const Value& x) {
                     return m.div(m.log(x), m.k(kLn10, x));
                   }));
TORCH_TPU_LOWERING(log1p, {"log1p", "log1p_", "log1p.out"}, float_unary(Unary::LogPlusOne));
TORCH_TPU_LOWERING(sqrt, {"sqrt", "sqrt_", "sqrt.out"}, float_unary(Unary::Sqrt));
TORCH_TPU_LOWERING(rsqrt, {"rsqrt", "rsqrt_", "rsqrt.out"}, float_unary(Unary::Rsqrt));
TORCH_TPU_LOWERING(reciprocal, {"reciprocal", "reciprocal_", "reciprocal.out"},
                   float_fn([](const Math& m, const Value& x) { return m.div(m.k(1, x), x); }));
TORCH_TPU_LOWERING(sin, {"sin", "sin_", "sin.out"}, float_unary(Unary::Sine));
TORCH_TPU_LOWERING(cos, {"cos", "cos_", "cos.out"}, float_unary(Unary::Cosine));
TORCH_TPU_LOWERING(tan, {"tan", "tan_", "tan.out"}, float_unary(Unary::Tan));
TORCH_TPU_LOWERING(tanh, {"tanh", "tanh_", "tanh.out"}, float_unary(Unary::Tanh));
TORCH_TPU_LOWERING(asin, {"asin", "asin_", "asin.out"}, float_unary(Unary::Asin));
TORCH_TPU_LOWERING(acos, {"acos", "acos_", "acos.out"}, float_unary(Unary::Acos));
TORCH_TPU_LOWERING(atan, {"atan", "atan_", "atan.out"}, float_unary(Unary::Atan));
TORCH_TPU_LOWERING(sinh, {"sinh", "sinh_", "sinh.out"}, float_unary(Unary::Sinh));
TORCH_TPU_LOWERING(cosh, {"cosh", "cosh_", "cosh.out"}, float_unary(Unary::Cosh));
TORCH_TPU_LOWERING(asinh, {"asinh", "asinh_", "asinh.out"}, float_unary(Unary::Asinh));
TORCH_TPU_LOWERING(acosh, {"acosh", "acosh_", "acosh.out"}, float_unary(Unary::Acosh));
TORCH_TPU_LOWERING(atanh, {"atanh", "atanh_", "atanh.out"}, float_unary(Unary::Atanh));
TORCH_TPU_LOWERING(sigmoid, {"sigmoid", "sigmoid_", "sigmoid.out"}, float_unary(Unary::Logistic));
TORCH_TPU_LOWERING(erf, {"erf", "erf_", "erf.out"}, float_unary(Unary::Erf));
TORCH_TPU_LOWERING(erfc, {"erfc", "erfc_", "erfc.out"}, float_unary(Unary::Erfc));
TORCH_TPU_LOWERING(erfinv, {"erfinv", "erfinv_", "erfinv.out"}, float_unary(Unary::ErfInv));
TORCH_TPU_LOWERING(lgamma, {"lgamma", "lgamma_", "lgamma.out"}, float_unary(Unary::Lgamma));
TORCH_TPU_LOWERING(digamma, {"digamma", "digamma_", "digamma.out"}, float_fn(digamma));
TORCH_TPU_LOWERING(sinc, {"sinc", "sinc_", "sinc.out"}, float_fn([](const Math& m, const Value& x) {
                     Value px = m.mul(x, m.k(kPi, x));
                     return m.sel(m.eq(x, m.k(0, x)), m.k(1, x),
                                  m.div(m.b.unary(Unary::Sine, px), px));
                   }));
TORCH_TPU_LOWERING(i0, {"i0", "i0_", "i0.out"}, float_fn(bessel_i0));
TORCH_TPU_LOWERING(modified_bessel_i0,
                   {"special_modified_bessel_i0", "special_modified_bessel_i0.out"},
                   no_half("modified_bessel_i0_cpu", float_fn(bessel_i0)));
TORCH_TPU_LOWERING(modified_bessel_i1,
                   {"special_modified_bessel_i1", "special_modified_bessel_i1.out"},
                   no_half("modified_bessel_i1_cpu", float_fn(bessel_i1)));
TORCH_TPU_LOWERING(special_i0e, {"special_i0e", "special_i0e.out"}, float_fn(bessel_i0e));
TORCH_TPU_LOWERING(special_i1e, {"special_i1e", "special_i1e.out"}, float_fn(bessel_i1e));
TORCH_TPU_LOWERING(special_i1, {"special_i1", "special_i1.out"}, float_fn(bessel_i1));
TORCH_TPU_LOWERING(frexp, {"frexp.Tensor", "frexp.Tensor_out"}, lower_frexp);
TORCH_TPU_LOWERING(special_ndtri, {"special_ndtri", "special_ndtri.out"}, lower_ndtri);
TORCH_TPU_LOWERING(special_entr, {"special_entr", "special_entr.out"}, float_fn(entr));
// The argument: atan2(imag, real) of complex numbers; of real ones pi for negatives, NaN
// for NaN, else 0.
TORCH_TPU_LOWERING(angle, {"angle", "angle.out"}, float_fn([](const Math& m, const Value& x) {
                     if (hlo::is_complex(x.type.dtype))
                       return m.b.binary(Binary::Atan2, m.b.imag(x), m.b.real(x));
                     Value r = m.sel(m.lt(x, m.k(0, x)), m.k(kPi, x), m.k(0, x));
                     return m.sel(m.is_nan(x), x, r);
                   }));
TORCH_TPU_LOWERING(logit, {"logit", "logit_", "logit.out"}, lower_logit);
TORCH_TPU_LOWERING(logit_backward, {"logit_backward", "logit_backward.grad_input"},
                   lower_logit_backward);

TORCH_TPU_LOWERING(neg, {"neg", "neg_", "neg.out"},
                   exact_unary("neg", Ints::Compute, Unary::Negate));
TORCH_TPU_LOWERING(abs, {"abs", "abs_", "abs.out"},
                   exact_unary("abs_cpu", Ints::RejectBool, Unary::Abs));
TORCH_TPU_LOWERING(sign, {"sign", "sign_", "sign.out", "sgn", "sgn_", "sgn.out"},
                   exact_fn("sign", Ints::Compute, sign));
TORCH_TPU_LOWERING(floor, {"floor", "floor_", "floor.out"},
                   exact_unary("floor_vml_cpu", Ints::Identity, Unary::Floor));
TORCH_TPU_LOWERING(ceil, {"ceil", "ceil_", "ceil.out"},
                   exact_unary("ceil_vml_cpu", Ints::Identity, Unary::Ceil));
TORCH_TPU_LOWERING(round, {"round", "round_", "round.out"},
                   exact_unary("round_vml_cpu", Ints::Identity, Unary::RoundNearestEven));
TORCH_TPU_LOWERING(round_decimals, {"round.decimals", "round_.decimals", "round.decimals_out"},
                   lower_round_decimals);
TORCH_TPU_LOWERING(trunc, {"trunc", "trunc_", "trunc.out"},
                   exact_fn("trunc_vml_cpu", Ints::Identity,
                            [](const Math& m, const Value& x) { return m.trunc(x); }));
TORCH_TPU_LOWERING(frac, {"frac", "frac_", "frac.out"},
                   exact_fn("frac_cpu", Ints::Reject,
                            [](const Math& m, const Value& x) { return m.sub(x, m.trunc(x)); }));
TORCH_TPU_LOWERING(bitwise_not, {"bitwise_not", "bitwise_not_", "bitwise_not.out"},
                   lower_bitwise_not);
TORCH_TPU_LOWERING(logical_not, {"logical_not", "logical_not_", "logical_not.out"},
                   lower_logical_not);
TORCH_TPU_LOWERING(signbit, {"signbit", "signbit.out"}, lower_signbit);
TORCH_TPU_LOWERING(isnan, {"isnan"},
                   float_predicate([](const Math& m, const Value& x) { return m.is_nan(x); }));
TORCH_TPU_LOWERING(isposinf, {"isposinf", "isposinf.out"},
                   float_predicate([](const Math& m, const Value& x) {
                     return m.eq(x, m.k(INFINITY, x));
                   }));
TORCH_TPU_LOWERING(isneginf, {"isneginf", "isneginf.out"},
                   float_predicate([](const Math& m, const Value& x) {
                     return m.eq(x, m.k(-INFINITY, x));
                   }));
TORCH_TPU_LOWERING(nan_to_num, {"nan_to_num", "nan_to_num_", "nan_to_num.out"}, lower_nan_to_num);

}  // namespace torch_tpu::ops
