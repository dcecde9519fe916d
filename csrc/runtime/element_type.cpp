#include "runtime/element_type.h"

namespace torch_tpu::runtime {

PJRT_Buffer_Type to_pjrt(hlo::DType dtype) {
  using hlo::DType;
  switch (dtype) {
    case DType::Pred: return PJRT_Buffer_Type_PRED;
    case DType::S8: return PJRT_Buffer_Type_S8;
    case DType::S16: return PJRT_Buffer_Type_S16;
    case DType::S32: return PJRT_Buffer_Type_S32;
    case DType::S64: return PJRT_Buffer_Type_S64;
    case DType::U8: return PJRT_Buffer_Type_U8;
    case DType::U16: return PJRT_Buffer_Type_U16;
    case DType::U32: return PJRT_Buffer_Type_U32;
    case DType::U64: return PJRT_Buffer_Type_U64;
    case DType::F16: return PJRT_Buffer_Type_F16;
    case DType::BF16: return PJRT_Buffer_Type_BF16;
    case DType::F32: return PJRT_Buffer_Type_F32;
    case DType::F64: return PJRT_Buffer_Type_F64;
    case DType::C64: return PJRT_Buffer_Type_C64;
    case DType::C128: return PJRT_Buffer_Type_C128;
    case DType::F8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case DType::F8E5M2: return PJRT_Buffer_Type_F8E5M2;
  }
  return PJRT_Buffer_Type_INVALID;
}

}  // namespace torch_tpu::runtime
