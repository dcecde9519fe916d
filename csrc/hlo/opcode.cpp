#include "hlo/opcode.h"

namespace torch_tpu::hlo {

const char* op_name(Unary op) {
  switch (op) {
    case Unary::Abs: return "stablehlo.abs";
    case Unary::Ceil: return "stablehlo.ceil";
    case Unary::Cosine: return "stablehlo.cosine";
    case Unary::CountLeadingZeros: return "stablehlo.count_leading_zeros";
    case Unary::Exponential: return "stablehlo.exponential";
    case Unary::ExponentialMinusOne: return "stablehlo.exponential_minus_one";
    case Unary::Floor: return "stablehlo.floor";
    case Unary::Log: return "stablehlo.log";
    case Unary::LogPlusOne: return "stablehlo.log_plus_one";
    case Unary::Logistic: return "stablehlo.logistic";
    case Unary::Negate: return "stablehlo.negate";
    case Unary::Not: return "stablehlo.not";
    case Unary::RoundNearestEven: return "stablehlo.round_nearest_even";
    case Unary::Rsqrt: return "stablehlo.rsqrt";
    case Unary::Sign: return "stablehlo.sign";
    case Unary::Sine: return "stablehlo.sine";
    case Unary::Sqrt: return "stablehlo.sqrt";
    case Unary::Tanh: return "stablehlo.tanh";
    case Unary::Acos: return "chlo.acos";
    case Unary::Acosh: return "chlo.acosh";
    case Unary::Asin: return "chlo.asin";
    case Unary::Asinh: return "chlo.asinh";
    case Unary::Atan: return "chlo.atan";
    case Unary::Atanh: return "chlo.atanh";
    case Unary::BesselI1e: return "chlo.bessel_i1e";
    case Unary::Cosh: return "chlo.cosh";
    case Unary::Digamma: return "chlo.digamma";
    case Unary::Erf: return "chlo.erf";
    case Unary::Erfc: return "chlo.erfc";
    case Unary::ErfInv: return "chlo.erf_inv";
    case Unary::Lgamma: return "chlo.lgamma";
    case Unary::Sinh: return "chlo.sinh";
    case Unary::Tan: return "chlo.tan";
  }
  return "";
}

const char* op_name(Binary op) {
  switch (op) {
    case Binary::Add: return "stablehlo.add";
    case Binary::And: return "stablehlo.and";
    case Binary::Atan2: return "stablehlo.atan2";
    case Binary::Divide: return "stablehlo.divide";
    case Binary::Maximum: return "stablehlo.maximum";
    case Binary::Minimum: return "stablehlo.minimum";
    case Binary::Multiply: return "stablehlo.multiply";
    case Binary::Or: return "stablehlo.or";
    case Binary::Power: return "stablehlo.power";
    case Binary::Remainder: return "stablehlo.remainder";
    case Binary::ShiftLeft: return "stablehlo.shift_left";
    case Binary::ShiftRightArithmetic: return "stablehlo.shift_right_arithmetic";
    case Binary::ShiftRightLogical: return "stablehlo.shift_right_logical";
    case Binary::Subtract: return "stablehlo.subtract";
    case Binary::Xor: return "stablehlo.xor";
    case Binary::NextAfter: return "chlo.next_after";
  }
  return "";
}

}  // namespace torch_tpu::hlo
