// Helpers shared by the linear-algebra lowerings (linalg.cpp, linalg_lu.cpp,
// linalg_decompositions.cpp); all work on the trailing two dims as the matrix.
#pragma once

#include <cstdint>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops::linalg {

// x [..., r, c] broadcast to batch dims `batch`.
hlo::Value to_batch(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& batch);
// The dims before the trailing `trailing` ones.
std::vector<int64_t> batch_of(const hlo::TensorType& t, int64_t trailing = 2);
// x with the other triangle zeroed (lower: row >= col; strict: the diagonal too).
hlo::Value triangle(hlo::Builder& b, const hlo::Value& x, bool lower, bool strict = false);
// The identity matrices of type `t`.
hlo::Value eye_like(hlo::Builder& b, const hlo::TensorType& t);
// op(a) x = rhs (left) or x op(a) = rhs, `a` triangular; batch dims already equal.
hlo::Value trisolve(hlo::Builder& b, const hlo::Value& a, const hlo::Value& rhs, bool left,
                    bool lower, bool unit, bool transpose);
// Raises as PyTorch's CPU kernels do for dtypes other than float32 and float64.
void float_only(const char* name, hlo::DType t);
// The main diagonal of each matrix: [..., n].
hlo::Value diagonal(hlo::Builder& b, const hlo::Value& x);

}  // namespace torch_tpu::ops::linalg
