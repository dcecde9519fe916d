// Element types and tensor types of StableHLO values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::hlo {

// StableHLO's precision of matrix products: DEFAULT, HIGH, HIGHEST.
enum class Precision : uint8_t { Default, High, Highest };

enum class DType : uint8_t {
  Pred,
  S8,
  S16,
  S32,
  S64,
  U8,
  U16,
  U32,
  U64,
  F16,
  BF16,
  F32,
  F64,
  C64,
  C128,
  F8E4M3FN,  // torch.float8_e4m3fn and torch.float8_e5m2: storage and matrix-product
  F8E5M2,    // inputs; arithmetic on them runs in f32 (math_dtype)
};

const char* mlir_name(DType dtype);  // "f32", "i1", "ui8", ...
int byte_width(DType dtype);
bool is_float(DType dtype);  // real floating point only
bool is_complex(DType dtype);
// The type of a complex type's real and imaginary parts (F32 for C64); other types as they are.
DType component(DType dtype);
// The complex type whose parts are `dtype` (C128 for F64, C64 for the other floats).
DType complex_of(DType dtype);
bool is_signed_int(DType dtype);
bool is_unsigned_int(DType dtype);

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  std::string str() const;  // tensor<2x3xf32>
  bool operator==(const TensorType& other) const {
    return dtype == other.dtype && shape == other.shape;
  }
};

}  // namespace torch_tpu::hlo
