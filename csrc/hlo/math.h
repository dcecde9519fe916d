// Terse arithmetic for writing formulas in lowerings: Math{b}.add(x, m.k(1, x)).
#pragma once

#include "hlo/builder.h"

namespace torch_tpu::hlo {

// Operands must have the same type; k(v, like) is a constant of like's type.
struct Math {
  Builder& b;
  Value k(double v, const Value& like) const { return b.full(v, like.type); }
  Value add(const Value& x, const Value& y) const { return b.binary("add", x, y); }
  Value sub(const Value& x, const Value& y) const { return b.binary("subtract", x, y); }
  Value mul(const Value& x, const Value& y) const { return b.binary("multiply", x, y); }
  Value div(const Value& x, const Value& y) const { return b.binary("divide", x, y); }
  Value max(const Value& x, const Value& y) const { return b.binary("maximum", x, y); }
  Value min(const Value& x, const Value& y) const { return b.binary("minimum", x, y); }
  Value pow(const Value& x, const Value& y) const { return b.binary("power", x, y); }
  Value and_(const Value& x, const Value& y) const { return b.binary("and", x, y); }
  Value or_(const Value& x, const Value& y) const { return b.binary("or", x, y); }
  Value not_(const Value& x) const { return b.unary("not", x); }
  Value neg(const Value& x) const { return b.unary("negate", x); }
  Value abs(const Value& x) const { return b.unary("abs", x); }
  Value exp(const Value& x) const { return b.unary("exponential", x); }
  Value expm1(const Value& x) const { return b.unary("exponential_minus_one", x); }
  Value log(const Value& x) const { return b.unary("log", x); }
  Value log1p(const Value& x) const { return b.unary("log_plus_one", x); }
  Value tanh(const Value& x) const { return b.unary("tanh", x); }
  Value sigmoid(const Value& x) const { return b.unary("logistic", x); }
  Value sqrt(const Value& x) const { return b.unary("sqrt", x); }
  Value floor(const Value& x) const { return b.unary("floor", x); }
  Value ceil(const Value& x) const { return b.unary("ceil", x); }
  Value erf(const Value& x) const { return b.emit("chlo.erf", {x}, "", x.type); }
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
