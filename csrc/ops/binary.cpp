// Binary and ternary elementwise ops with PyTorch's promotion and broadcasting: pow,
// remainder, comparisons, bitwise and logical ops, clamp, where, lerp, addcmul, ...
// Operands are rounded to the promoted dtype first (PyTorch casts a wrapped scalar to
// the common dtype), and float math on bf16/f16 runs in f32.
#include <cmath>

#include "ops/elementwise.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// f(x, y) on arguments 0 and 1 in the promoted dtype.
template <typename F>
LowerFn exact_binary(F f) {
  return [f](Node& n) { return V{f(Math{n.b}, arg_as(n, 0, n.compute), arg_as(n, 1, n.compute))}; };
}

// f(x, y) on arguments 0 and 1 in float math.
template <typename F>
LowerFn float_binary(F f) {
  return [f](Node& n) { return V{f(Math{n.b}, arg_math(n, 0), arg_math(n, 1))}; };
}

// Arithmetic in the promoted dtype for integers, in float math for floats.
Value arith_arg(Node& n, size_t i) {
  return hlo::is_float(n.compute) ? arg_math(n, i) : arg_as(n, i, n.compute);
}

// --- pow ---------------------------------------------------------------------

Value pow(const Math& m, const Value& x, const Value& y) {
  if (hlo::is_float(x.type.dtype)) return m.pow(x, y);
  if (x.type.dtype == DType::Pred) not_implemented("pow", DType::Pred);
  // Negative exponents: 1 and -1 keep a magnitude of 1, every other base truncates to 0.
  Value zero = m.k(0, x), one = m.k(1, x);
  Value positive = m.pow(x, m.max(y, zero));
  Value odd = m.ne(m.b.binary(Binary::Remainder, y, m.k(2, y)), zero);
  Value unit =
      m.sel(m.eq(x, one), one, m.sel(m.eq(x, m.k(-1, x)), m.sel(odd, m.k(-1, x), one), zero));
  return m.sel(m.lt(y, zero), unit, positive);
}

V lower_pow(Node& n) { return {pow(Math{n.b}, arith_arg(n, 0), arith_arg(n, 1))}; }

// PyTorch's CPU kernel computes a Python-scalar exponent of +-0.5 as sqrt / rsqrt, which
// differ from pow at -0.0 and -inf.
V lower_pow_tensor_scalar(Node& n) {
  Math m{n.b};
  Value x = arith_arg(n, 0), y = arith_arg(n, 1);
  Value r = pow(m, x, y);
  if (!hlo::is_float(x.type.dtype)) return {r};
  r = m.sel(m.eq(y, m.k(0.5, y)), m.sqrt(x), r);
  return {m.sel(m.eq(y, m.k(-0.5, y)), n.b.unary(Unary::Rsqrt, x), r)};
}

// --- division-like -----------------------------------------------------------

// Python's remainder: the result takes the divisor's sign.
Value remainder(const Math& m, const Value& x, const Value& y) {
  Value r = m.b.binary(Binary::Remainder, x, y);
  Value zero = m.k(0, r);
  Value fix = m.and_(m.ne(r, zero), m.ne(m.lt(r, zero), m.lt(y, zero)));
  return m.sel(fix, m.add(r, y), r);
}

V lower_floor_divide(Node& n) {
  return {lower_div(n.b, n.in(0), n.in(1), n.compute, DivMode::Floor)};
}

V lower_rsub(Node& n) { return {lower_sub(n.b, n.in(1), n.in(0), n.in(2), n.compute)}; }

// --- float functions ---------------------------------------------------------

Value hypot(const Math& m, const Value& x, const Value& y) {
  // Scaled by the larger magnitude so that squares cannot overflow; inf wins over NaN.
  Value ax = m.abs(x), ay = m.abs(y);
  Value hi = m.max(ax, ay), lo = m.min(ax, ay);
  Value ratio = m.div(lo, hi);
  Value r = m.mul(hi, m.sqrt(m.add(m.k(1, x), m.mul(ratio, ratio))));
  r = m.sel(m.eq(hi, m.k(0, x)), m.k(0, x), r);
  r = m.sel(m.or_(m.is_nan(x), m.is_nan(y)), m.k(NAN, x), r);
  Value inf = m.k(INFINITY, x);
  return m.sel(m.or_(m.eq(ax, inf), m.eq(ay, inf)), inf, r);
}

Value copysign(const Math& m, const Value& x, const Value& y) {
  Value ax = m.abs(x);
  return m.sel(sign_bit(m.b, y), m.neg(ax), ax);
}

// x * f(y), 0 where x == 0, NaN where y is NaN.
template <typename F>
LowerFn xlog(F f) {
  return float_binary([f](const Math& m, const Value& x, const Value& y) {
    Value r = m.sel(m.eq(x, m.k(0, x)), m.k(0, x), m.mul(x, f(m, y)));
    return m.sel(m.is_nan(y), y, r);
  });
}

Value logaddexp(const Math& m, const Value& x, const Value& y, bool base2) {
  Value d = m.neg(m.abs(m.sub(x, y)));
  Value tail =
      base2 ? m.div(m.log1p(m.pow(m.k(2, d), d)), m.k(std::log(2.0), d)) : m.log1p(m.exp(d));
  Value r = m.add(nan_max(m.b, x, y), tail);
  // Equal infinities: x - y would be NaN.
  Value same_inf = m.and_(m.eq(x, y), m.eq(m.abs(x), m.k(INFINITY, x)));
  return m.sel(same_inf, x, r);
}

LowerFn lower_logaddexp(bool base2) {
  return [base2](Node& n) {
    if (!hlo::is_float(n.compute))
      not_implemented(base2 ? "logaddexp2_cpu" : "logaddexp_cpu", n.compute);
    return V{logaddexp(Math{n.b}, arg_math(n, 0), arg_math(n, 1), base2)};
  };
}

V lower_heaviside(Node& n) {
  Math m{n.b};
  Value x = arg_as(n, 0, n.compute), v = arg_as(n, 1, n.compute);
  Value zero = m.k(0, x);
  return {m.sel(m.eq(x, zero), v, n.b.convert(m.gt(x, zero), n.compute))};
}

// --- bitwise and logical -----------------------------------------------------

LowerFn bitwise(const char* name, Binary op) {
  return [name, op](Node& n) {
    if (hlo::is_float(n.compute)) not_implemented(name, n.compute);
    return V{n.b.binary(op, arg_as(n, 0, n.compute), arg_as(n, 1, n.compute))};
  };
}

// PyTorch shifts: a left shift by a negative or too large amount gives 0; a right shift
// fills with the sign bit (0 for unsigned types).
LowerFn shift(const char* name, bool left) {
  return [name, left](Node& n) {
    DType t = n.compute;
    if (hlo::is_float(t) || t == DType::Pred) not_implemented(name, t);
    Math m{n.b};
    Value x = arg_as(n, 0, t), y = arg_as(n, 1, t);
    Value bits = m.k(8.0 * hlo::byte_width(t), y);
    Value too_far = m.ge(y, bits);
    if (hlo::is_signed_int(t)) too_far = m.or_(too_far, m.lt(y, m.k(0, y)));
    if (left) return V{m.sel(too_far, m.k(0, x), n.b.binary(Binary::ShiftLeft, x, y))};
    if (hlo::is_unsigned_int(t))
      return V{m.sel(too_far, m.k(0, x), n.b.binary(Binary::ShiftRightLogical, x, y))};
    Value amount = m.sel(too_far, m.sub(bits, m.k(1, y)), y);
    return V{n.b.binary(Binary::ShiftRightArithmetic, x, amount)};
  };
}

LowerFn logical(Binary op) {
  return [op](Node& n) {
    Math m{n.b};
    Value x = arg_as(n, 0, n.compute), y = arg_as(n, 1, n.compute);
    return V{n.b.binary(op, m.ne(x, m.k(0, x)), m.ne(y, m.k(0, y)))};
  };
}

LowerFn compare(hlo::Compare direction) {
  return [direction](Node& n) {
    return V{n.b.compare(direction, arg_as(n, 0, n.compute), arg_as(n, 1, n.compute))};
  };
}

// --- selection ---------------------------------------------------------------

V lower_where(Node& n) {
  Math m{n.b};
  Value c = arg_as(n, 0, n.in(0).type.dtype);
  if (c.type.dtype != DType::Pred) c = m.ne(c, m.k(0, c));
  return {m.sel(c, arg_as(n, 1, n.compute), arg_as(n, 2, n.compute))};
}

// clamp / clamp_min / clamp_max in all overloads: arguments 1 and 2 are the optional
// bounds (absent ones are None).
V lower_clamp(Node& n, bool has_min, bool has_max) {
  Value x = arg_as(n, 0, n.compute);
  if (has_min && n.has(1)) x = nan_max(n.b, x, arg_as(n, 1, n.compute));
  size_t hi = has_min ? 2 : 1;
  if (has_max && n.has(hi)) x = nan_min(n.b, x, arg_as(n, hi, n.compute));
  return {x};
}

// --- ternary arithmetic ------------------------------------------------------

// addcmul / addcdiv compute in the tensors' dtype (in f32 for bf16/f16); their `value`
// does not promote, and stays unrounded in f32 as in PyTorch's CPU kernels (an integer
// op truncates it).
Value tensors_arg(Node& n, size_t i) {
  DType t = n.out().dtype;
  return arg_as(n, i, hlo::is_float(t) ? math_dtype(t) : t);
}

V lower_lerp(Node& n) {
  Math m{n.b};
  Value a = arg_math(n, 0), e = arg_math(n, 1);
  // A Python-scalar weight stays unrounded in f32, as in PyTorch's CPU kernel.
  Value w = arg_as(n, 2, float_math(n));
  Value d = m.sub(e, a);
  // PyTorch's two-sided form keeps lerp(a, b, 1) == b exactly.
  Value small = m.lt(m.abs(w), m.k(0.5, w));
  return {m.sel(small, m.add(a, m.mul(w, d)), m.sub(e, m.mul(d, m.sub(m.k(1, w), w))))};
}

V lower_addcmul(Node& n) {
  Math m{n.b};
  Value s = tensors_arg(n, 0), t1 = tensors_arg(n, 1), t2 = tensors_arg(n, 2),
        v = tensors_arg(n, 3);
  if (s.type.dtype == DType::Pred) return {m.or_(s, m.and_(v, m.and_(t1, t2)))};
  return {m.add(s, m.mul(m.mul(v, t1), t2))};
}

V lower_addcdiv(Node& n) {
  Math m{n.b};
  Value s = tensors_arg(n, 0), t1 = tensors_arg(n, 1), t2 = tensors_arg(n, 2),
        v = tensors_arg(n, 3);
  return {m.add(s, m.div(m.mul(v, t1), t2))};
}

// --- gcd / lcm ---------------------------------------------------------------

// Euclid's algorithm on the magnitudes, every element stepping until its divisor is 0
// (a stablehlo.while over the whole tensor).
Value gcd(hlo::Builder& b, const Value& x, const Value& y) {
  Math m{b};
  const hlo::TensorType t = x.type;
  auto flat_any = [](hlo::Builder& r, const Value& pred) {
    Value flat = r.reshape(pred, {pred.type.numel()});
    return r.reduce(flat, r.constant(0, DType::Pred), {0}, hlo::Binary::Or);
  };
  std::string cond = b.region({t, t}, [flat_any](hlo::Builder& r, const V& a) {
    return V{flat_any(r, r.compare(hlo::Compare::NE, a[0], r.full(0, a[0].type)))};
  });
  std::string body = b.region({t, t}, [](hlo::Builder& r, const V& a) {
    Math rm{r};
    const Value &d = a[0], &v = a[1];
    Value zero = rm.k(0, d);
    Value nz = rm.ne(d, zero);
    Value safe = rm.sel(nz, d, rm.k(1, d));
    return V{rm.sel(nz, r.binary(Binary::Remainder, v, safe), zero), rm.sel(nz, d, v)};
  });
  auto magnitude = [&](const Value& v) {
    return hlo::is_unsigned_int(v.type.dtype) ? v : m.abs(v);
  };
  V out = b.emit_multi("stablehlo.while", {magnitude(x), magnitude(y)}, "", {t, t}, {cond, body});
  return out[1];
}

LowerFn gcd_lcm(bool lcm) {
  return [lcm](Node& n) {
    if (hlo::is_float(n.compute) || n.compute == DType::Pred)
      not_implemented(lcm ? "lcm_cpu" : "gcd_cpu", n.compute);
    Math m{n.b};
    Value x = arg_as(n, 0, n.compute), y = arg_as(n, 1, n.compute);
    if (x.type.numel() == 0) return V{x};
    Value g = gcd(n.b, x, y);
    if (!lcm) return V{g};
    Value zero = m.k(0, g);
    Value safe = m.sel(m.eq(g, zero), m.k(1, g), g);
    Value r = m.mul(m.div(x, safe), y);
    return V{m.sel(m.eq(g, zero), zero, hlo::is_unsigned_int(r.type.dtype) ? r : m.abs(r))};
  };
}

}  // namespace

TORCH_TPU_LOWERING(pow,
                   {"pow.Tensor_Tensor", "pow.Scalar", "pow_.Tensor", "pow.Tensor_Tensor_out",
                    "pow.Scalar_out"},
                   lower_pow);
TORCH_TPU_LOWERING(pow_scalar, {"pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out"},
                   lower_pow_tensor_scalar);
TORCH_TPU_LOWERING(remainder,
                   {"remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out",
                    "remainder.Scalar_Tensor"},
                   [](Node& n) {
                     return V{remainder(Math{n.b}, arith_arg(n, 0), arith_arg(n, 1))};
                   });
TORCH_TPU_LOWERING(fmod, {"fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out"}, [](Node& n) {
  return V{n.b.binary(Binary::Remainder, arith_arg(n, 0), arith_arg(n, 1))};
});
TORCH_TPU_LOWERING(floor_divide, {"floor_divide", "floor_divide_.Tensor", "floor_divide.out"},
                   lower_floor_divide);
TORCH_TPU_LOWERING(rsub, {"rsub.Tensor"}, lower_rsub);

TORCH_TPU_LOWERING(maximum, {"maximum", "maximum.out"},
                   exact_binary([](const Math& m, const Value& x, const Value& y) {
                     return nan_max(m.b, x, y);
                   }));
TORCH_TPU_LOWERING(minimum, {"minimum", "minimum.out"},
                   exact_binary([](const Math& m, const Value& x, const Value& y) {
                     return nan_min(m.b, x, y);
                   }));
// fmax / fmin ignore a NaN operand.
TORCH_TPU_LOWERING(fmax, {"fmax", "fmax.out"},
                   exact_binary([](const Math& m, const Value& x, const Value& y) {
                     if (!hlo::is_float(x.type.dtype)) return nan_max(m.b, x, y);
                     return m.sel(m.is_nan(x), y, m.sel(m.is_nan(y), x, m.max(x, y)));
                   }));
TORCH_TPU_LOWERING(fmin, {"fmin", "fmin.out"},
                   exact_binary([](const Math& m, const Value& x, const Value& y) {
                     if (!hlo::is_float(x.type.dtype)) return nan_min(m.b, x, y);
                     return m.sel(m.is_nan(x), y, m.sel(m.is_nan(y), x, m.min(x, y)));
                   }));

TORCH_TPU_LOWERING(atan2, {"atan2", "atan2_", "atan2.out"},
                   float_binary([](const Math& m, const Value& x, const Value& y) {
                     return m.b.binary(Binary::Atan2, x, y);
                   }));
TORCH_TPU_LOWERING(hypot, {"hypot", "hypot_", "hypot.out"}, [](Node& n) {
  if (!hlo::is_float(n.compute)) not_implemented("hypot_cpu", n.compute);
  return V{hypot(Math{n.b}, arg_math(n, 0), arg_math(n, 1))};
});
TORCH_TPU_LOWERING(copysign, {"copysign.Tensor", "copysign_.Tensor", "copysign.out"},
                   float_binary(copysign));
TORCH_TPU_LOWERING(xlogy, {"xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor"},
                   xlog([](const Math& m, const Value& y) { return m.log(y); }));
TORCH_TPU_LOWERING(xlog1py, {"special_xlog1py", "special_xlog1py.out"},
                   xlog([](const Math& m, const Value& y) { return m.log1p(y); }));
TORCH_TPU_LOWERING(logaddexp, {"logaddexp", "logaddexp.out"}, lower_logaddexp(false));
TORCH_TPU_LOWERING(logaddexp2, {"logaddexp2", "logaddexp2.out"}, lower_logaddexp(true));
// nextafter steps in the operands' own dtype (bf16 steps for bf16).
TORCH_TPU_LOWERING(nextafter, {"nextafter", "nextafter_", "nextafter.out"}, [](Node& n) {
  if (!hlo::is_float(n.compute)) not_implemented("nextafter_cpu", n.compute);
  Value x = arg_as(n, 0, n.compute), y = arg_as(n, 1, n.compute);
  return V{n.b.binary(hlo::Binary::NextAfter, x, y)};
});
TORCH_TPU_LOWERING(gcd, {"gcd", "gcd_", "gcd.out"}, gcd_lcm(false));
TORCH_TPU_LOWERING(lcm, {"lcm", "lcm_", "lcm.out"}, gcd_lcm(true));
TORCH_TPU_LOWERING(heaviside, {"heaviside", "heaviside_", "heaviside.out"}, lower_heaviside);

TORCH_TPU_LOWERING(bitwise_and,
                   {"bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out"},
                   bitwise("bitwise_and_cpu", Binary::And));
TORCH_TPU_LOWERING(bitwise_or, {"bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out"},
                   bitwise("bitwise_or_cpu", Binary::Or));
TORCH_TPU_LOWERING(bitwise_xor,
                   {"bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out"},
                   bitwise("bitwise_xor_cpu", Binary::Xor));
TORCH_TPU_LOWERING(lshift,
                   {"bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor",
                    "bitwise_left_shift.Tensor_out", "__lshift__.Tensor", "__lshift__.Scalar",
                    "__ilshift__.Tensor", "__ilshift__.Scalar"},
                   shift("lshift_cpu", true));
TORCH_TPU_LOWERING(rshift,
                   {"bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor",
                    "bitwise_right_shift.Tensor_out", "__rshift__.Tensor", "__rshift__.Scalar",
                    "__irshift__.Tensor", "__irshift__.Scalar"},
                   shift("rshift_cpu", false));
TORCH_TPU_LOWERING(logical_and, {"logical_and", "logical_and_", "logical_and.out"},
                   logical(Binary::And));
TORCH_TPU_LOWERING(logical_or, {"logical_or", "logical_or_", "logical_or.out"},
                   logical(Binary::Or));
TORCH_TPU_LOWERING(logical_xor, {"logical_xor", "logical_xor_", "logical_xor.out"},
                   logical(Binary::Xor));

TORCH_TPU_LOWERING(eq,
                   {"eq.Tensor", "eq.Scalar", "eq_.Tensor", "eq_.Scalar", "eq.Tensor_out",
                    "eq.Scalar_out"},
                   compare(hlo::Compare::EQ));
TORCH_TPU_LOWERING(ne,
                   {"ne.Tensor", "ne.Scalar", "ne_.Tensor", "ne_.Scalar", "ne.Tensor_out",
                    "ne.Scalar_out"},
                   compare(hlo::Compare::NE));
TORCH_TPU_LOWERING(lt,
                   {"lt.Tensor", "lt.Scalar", "lt_.Tensor", "lt_.Scalar", "lt.Tensor_out",
                    "lt.Scalar_out"},
                   compare(hlo::Compare::LT));
TORCH_TPU_LOWERING(le,
                   {"le.Tensor", "le.Scalar", "le_.Tensor", "le_.Scalar", "le.Tensor_out",
                    "le.Scalar_out"},
                   compare(hlo::Compare::LE));
TORCH_TPU_LOWERING(gt,
                   {"gt.Tensor", "gt.Scalar", "gt_.Tensor", "gt_.Scalar", "gt.Tensor_out",
                    "gt.Scalar_out"},
                   compare(hlo::Compare::GT));
TORCH_TPU_LOWERING(ge,
                   {"ge.Tensor", "ge.Scalar", "ge_.Tensor", "ge_.Scalar", "ge.Tensor_out",
                    "ge.Scalar_out"},
                   compare(hlo::Compare::GE));

TORCH_TPU_LOWERING(where, {"where.self", "where.self_out"}, lower_where);
TORCH_TPU_LOWERING(clamp,
                   {"clamp", "clamp.Tensor", "clamp_", "clamp_.Tensor", "clamp.out",
                    "clamp.Tensor_out"},
                   [](Node& n) { return lower_clamp(n, true, true); });
TORCH_TPU_LOWERING(clamp_min,
                   {"clamp_min", "clamp_min.Tensor", "clamp_min_", "clamp_min_.Tensor",
                    "clamp_min.out", "clamp_min.Tensor_out"},
                   [](Node& n) { return lower_clamp(n, true, false); });
TORCH_TPU_LOWERING(clamp_max,
                   {"clamp_max", "clamp_max.Tensor", "clamp_max_", "clamp_max_.Tensor",
                    "clamp_max.out", "clamp_max.Tensor_out"},
                   [](Node& n) { return lower_clamp(n, false, true); });
TORCH_TPU_LOWERING(lerp,
                   {"lerp.Scalar", "lerp.Tensor", "lerp_.Scalar", "lerp_.Tensor", "lerp.Scalar_out",
                    "lerp.Tensor_out"},
                   lower_lerp);
TORCH_TPU_LOWERING(addcmul, {"addcmul", "addcmul_", "addcmul.out"}, lower_addcmul);
TORCH_TPU_LOWERING(addcdiv, {"addcdiv", "addcdiv_", "addcdiv.out"}, lower_addcdiv);

}  // namespace torch_tpu::ops
