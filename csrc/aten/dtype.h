// torch dtypes <-> StableHLO element types.
#pragma once

#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include "hlo/types.h"

namespace torch_tpu::aten {

bool is_supported(c10::ScalarType dtype);
// Throws a TypeError naming the dtype if the tpu device cannot hold it.
void check_supported(c10::ScalarType dtype);
hlo::DType to_hlo(c10::ScalarType dtype);
c10::ScalarType to_torch(hlo::DType dtype);
// The bytes of `value` converted to `dtype`, as a 0-d operand wants them.
uint64_t scalar_bits(const c10::Scalar& value, c10::ScalarType dtype);

}  // namespace torch_tpu::aten
