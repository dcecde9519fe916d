#include "hlo/types.h"

namespace torch_tpu::hlo {

const char* mlir_name(DType dtype) {
  switch (dtype) {
    case DType::Pred: return "i1";
    case DType::S8: return "i8";
    case DType::S16: return "i16";
    case DType::S32: return "i32";
    case DType::S64: return "i64";
    case DType::U8: return "ui8";
    case DType::U16: return "ui16";
    case DType::U32: return "ui32";
    case DType::U64: return "ui64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::C64: return "complex<f32>";
    case DType::C128: return "complex<f64>";
    case DType::F8E4M3FN: return "f8E4M3FN";
    case DType::F8E5M2: return "f8E5M2";
  }
  return "?";
}

int byte_width(DType dtype) {
  switch (dtype) {
    case DType::Pred:
    case DType::S8:
    case DType::U8:
    case DType::F8E4M3FN:
    case DType::F8E5M2: return 1;
    case DType::S16:
    case DType::U16:
    case DType::F16:
    case DType::BF16: return 2;
    case DType::S32:
    case DType::U32:
    case DType::F32: return 4;
    case DType::S64:
    case DType::U64:
    case DType::F64:
    case DType::C64: return 8;
    case DType::C128: return 16;
  }
  return 0;
}

bool is_float(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 ||
         dtype == DType::F64 || dtype == DType::F8E4M3FN || dtype == DType::F8E5M2;
}

bool is_complex(DType dtype) { return dtype == DType::C64 || dtype == DType::C128; }

DType component(DType dtype) {
  if (dtype == DType::C64) return DType::F32;
  if (dtype == DType::C128) return DType::F64;
  return dtype;
}

DType complex_of(DType dtype) { return dtype == DType::F64 ? DType::C128 : DType::C64; }

bool is_signed_int(DType dtype) {
  return dtype == DType::S8 || dtype == DType::S16 || dtype == DType::S32 || dtype == DType::S64;
}

bool is_unsigned_int(DType dtype) {
  return dtype == DType::U8 || dtype == DType::U16 || dtype == DType::U32 || dtype == DType::U64;
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s = "tensor<";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  s += mlir_name(dtype);
  s += ">";
  return s;
}

}  // namespace torch_tpu::hlo
