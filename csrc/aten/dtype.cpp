#include "aten/dtype.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <cstring>

namespace torch_tpu::aten {

bool is_supported(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kBool:
    case c10::kByte:
    case c10::kChar:
    case c10::kShort:
    case c10::kInt:
    case c10::kLong:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kFloat:
    case c10::kDouble:
    case c10::kUInt16:
    case c10::kUInt32:
    case c10::kUInt64:
    case c10::kComplexFloat:
    case c10::kComplexDouble:
    case c10::kFloat8_e4m3fn:
    case c10::kFloat8_e5m2: return true;
    default: return false;
  }
}

void check_supported(c10::ScalarType dtype) {
  TORCH_CHECK_TYPE(is_supported(dtype), "torch_tpu: dtype torch.", c10::getDtypeNames(dtype).first,
                   " is not supported on the tpu device (supported: bool, uint8, int8, int16, "
                   "int32, int64, float16, bfloat16, float32, float64, complex64, complex128, "
                   "float8_e4m3fn, float8_e5m2)");
}

hlo::DType to_hlo(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kBool: return hlo::DType::Pred;
    case c10::kByte: return hlo::DType::U8;
    case c10::kChar: return hlo::DType::S8;
    case c10::kShort: return hlo::DType::S16;
    case c10::kInt: return hlo::DType::S32;
    case c10::kLong: return hlo::DType::S64;
    case c10::kHalf: return hlo::DType::F16;
    case c10::kBFloat16: return hlo::DType::BF16;
    case c10::kFloat: return hlo::DType::F32;
    case c10::kDouble: return hlo::DType::F64;
    case c10::kUInt16: return hlo::DType::U16;
    case c10::kUInt32: return hlo::DType::U32;
    case c10::kUInt64: return hlo::DType::U64;
    case c10::kComplexFloat: return hlo::DType::C64;
    case c10::kComplexDouble: return hlo::DType::C128;
    case c10::kFloat8_e4m3fn: return hlo::DType::F8E4M3FN;
    case c10::kFloat8_e5m2: return hlo::DType::F8E5M2;
    default: check_supported(dtype);
  }
  return hlo::DType::F32;
}

c10::ScalarType to_torch(hlo::DType dtype) {
  switch (dtype) {
    case hlo::DType::Pred: return c10::kBool;
    case hlo::DType::U8: return c10::kByte;
    case hlo::DType::S8: return c10::kChar;
    case hlo::DType::S16: return c10::kShort;
    case hlo::DType::S32: return c10::kInt;
    case hlo::DType::S64: return c10::kLong;
    case hlo::DType::F16: return c10::kHalf;
    case hlo::DType::BF16: return c10::kBFloat16;
    case hlo::DType::F32: return c10::kFloat;
    case hlo::DType::F64: return c10::kDouble;
    case hlo::DType::U16: return c10::kUInt16;
    case hlo::DType::U32: return c10::kUInt32;
    case hlo::DType::U64: return c10::kUInt64;
    case hlo::DType::C64: return c10::kComplexFloat;
    case hlo::DType::C128: return c10::kComplexDouble;
    case hlo::DType::F8E4M3FN: return c10::kFloat8_e4m3fn;
    case hlo::DType::F8E5M2: return c10::kFloat8_e5m2;
  }
  return c10::kFloat;
}

namespace {
template <class T>
uint64_t bits_of(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}
}  // namespace

uint64_t scalar_bits(const c10::Scalar& value, c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kBool: return bits_of<uint8_t>(value.toBool() ? 1 : 0);
    case c10::kByte: return bits_of(value.toByte());
    case c10::kChar: return bits_of(value.toChar());
    case c10::kShort: return bits_of(value.toShort());
    case c10::kInt: return bits_of(value.toInt());
    case c10::kLong: return bits_of(value.toLong());
    case c10::kHalf: return bits_of(value.toHalf());
    case c10::kBFloat16: return bits_of(value.toBFloat16());
    case c10::kFloat: return bits_of(value.toFloat());
    case c10::kDouble: return bits_of(value.toDouble());
    case c10::kUInt16: return bits_of(value.toUInt16());
    case c10::kUInt32: return bits_of(value.toUInt32());
    case c10::kUInt64: return bits_of(value.toUInt64());
    // A complex scalar travels as two operands of its part type (see OpCall::scalar).
    case c10::kComplexFloat: return bits_of(value.toFloat());
    case c10::kComplexDouble: return bits_of(value.toDouble());
    case c10::kFloat8_e4m3fn: return bits_of(c10::Float8_e4m3fn(value.toFloat()));
    case c10::kFloat8_e5m2: return bits_of(c10::Float8_e5m2(value.toFloat()));
    default: check_supported(dtype);
  }
  return 0;
}

}  // namespace torch_tpu::aten
