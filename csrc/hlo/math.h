// Terse arithmetic for writing formulas in lowerings: Math{b}.add(x, m.k(1, x)).
#pragma once

#include "hlo/builder.h"

namespace torch_tpu::hlo {

// Operands must have the same type; k(v, like) is a constant of like's type.
struct Math {
  Builder& b;
  Value k(double v, const Value& like) const { return b.full(v, like.type); }
  Value add(const Value& x, const Value& y) const { return b.binary(Binary::Add, x, y); }
  Value sub(const Value& x, const Value& y) const { return b.binary(Binary::Subtract, x, y); }
  Value mul(const Value& x, const Value& y) const { return b.binary(Binary::Multiply, x, y); }
  Value div(const Value& x, const Value& y) const { return b.binary(Binary::Divide, x, y); }
  Value max(const Value& x, const Value& y) const { return b.binary(Binary::Maximum, x, y); }
  Value min(const Value& x, const Value& y) const { return b.binary(Binary::Minimum, x, y); }
  Value pow(const Value& x, const Value& y) const { return b.binary(Binary::Power, x, y); }
  Value and_(const Value& x, const Value& y) const { return b.binary(Binary::And, x, y); }
  Value or_(const Value& x, const Value& y) const { return b.binary(Binary::Or, x, y); }
  Value not_(const Value& x) const { return b.unary(Unary::Not, x); }
  Value neg(const Value& x) const { return b.unary(Unary::Negate, x); }
  Value abs(const Value& x) const { return b.unary(Unary::Abs, x); }
  Value exp(const Value& x) const { return b.unary(Unary::Exponential, x); }
  Value expm1(const Value& x) const { return b.unary(Unary::ExponentialMinusOne, x); }
  Value log(const Value& x) const { return b.unary(Unary::Log, x); }
  Value log1p(const Value& x) const { return b.unary(Unary::LogPlusOne, x); }
  Value tanh(const Value& x) const { return b.unary(Unary::Tanh, x); }
  Value sigmoid(const Value& x) const { return b.unary(Unary::Logistic, x); }
  Value sqrt(const Value& x) const { return b.unary(Unary::Sqrt, x); }
  Value floor(const Value& x) const { return b.unary(Unary::Floor, x); }
  Value ceil(const Value& x) const { return b.unary(Unary::Ceil, x); }
  Value erf(const Value& x) const { return b.unary(Unary::Erf, x); }
  Value trunc(const Value& x) const { return sel(lt(x, k(0, x)), ceil(x), floor(x)); }
  Value sel(const Value& p, const Value& x, const Value& y) const { return b.select(p, x, y); }
  Value eq(const Value& x, const Value& y) const { return b.compare(Compare::EQ, x, y); }
  Value ne(const Value& x, const Value& y) const { return b.compare(Compare::NE, x, y); }
  Value lt(const Value& x, const Value& y) const { return b.compare(Compare::LT, x, y); }
  Value le(const Value& x, const Value& y) const { return b.compare(Compare::LE, x, y); }
  Value gt(const Value& x, const Value& y) const { return b.compare(Compare::GT, x, y); }
  Value ge(const Value& x, const Value& y) const { return b.compare(Compare::GE, x, y); }
  Value is_nan(const Value& x) const { return ne(x, x); }
};

}  // namespace torch_tpu::hlo
