// The mapping between StableHLO element types and PJRT buffer types.
#pragma once

#include "hlo/types.h"
#include "pjrt_c_api.h"

namespace torch_tpu::runtime {

PJRT_Buffer_Type to_pjrt(hlo::DType dtype);

}  // namespace torch_tpu::runtime
