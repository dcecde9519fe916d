// The elementwise StableHLO (and CHLO) ops that Builder::unary, binary, binary_region and
// reduce emit: an enumerator, not a name in a string, so a misspelt op is a compile error.
#pragma once

namespace torch_tpu::hlo {

// Ops of one operand whose result has the operand's type (abs of a complex value aside:
// its modulus is real).
enum class Unary {
  Abs,
  Ceil,
  Cosine,
  CountLeadingZeros,
  Exponential,
  ExponentialMinusOne,
  Floor,
  Log,
  LogPlusOne,
  Logistic,
  Negate,
  Not,
  RoundNearestEven,
  Rsqrt,
  Sign,
  Sine,
  Sqrt,
  Tanh,
  // CHLO ops, which XLA expands into StableHLO.
  Acos,
  Acosh,
  Asin,
  Asinh,
  Atan,
  Atanh,
  BesselI1e,
  Cosh,
  Digamma,
  Erf,
  Erfc,
  ErfInv,
  Lgamma,
  Sinh,
  Tan,
};

// Ops of two operands of one type whose result has that type; also the combiners of
// reductions and regions.
enum class Binary {
  Add,
  And,
  Atan2,
  Divide,
  Maximum,
  Minimum,
  Multiply,
  Or,
  Power,
  Remainder,
  ShiftLeft,
  ShiftRightArithmetic,
  ShiftRightLogical,
  Subtract,
  Xor,
  // CHLO: the next representable value after the first operand towards the second.
  NextAfter,
};

// The op's name in module text: "stablehlo.exponential", "chlo.erf", ...
const char* op_name(Unary op);
const char* op_name(Binary op);

}  // namespace torch_tpu::hlo
