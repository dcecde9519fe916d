// Reading and writing a strided view of a storage, as StableHLO over the storage's
// flat buffer. The view offset is a runtime operand, so views at different offsets
// share one program.
#pragma once

#include <cstdint>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

struct StridedLayout {
  enum class Kind : uint8_t {
    Empty,    // no elements: nothing to read
    Dense,    // the whole buffer, row-major from element 0: a reshape
    Strided,  // slice of a reshaped window; offset is an operand
    Gather,   // overlapping or irregular strides: per-element gather/scatter
  };
  Kind kind = Kind::Dense;
  // Static padding appended to the buffer so the window fits at any valid offset.
  int64_t pad = 0;
};

StridedLayout classify(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                       int64_t offset, int64_t storage_numel);

// `flat` reinterpreted, bit for bit, as a 1-d array of `dtype` (for storages written
// with one dtype and read with another, e.g. by torch.save).
hlo::Value reinterpret_flat(hlo::Builder& b, const hlo::Value& flat, hlo::DType dtype);

// The view's elements as a tensor of shape `sizes`. `offset` is a 0-d s64 operand
// (unused for Dense and Empty layouts).
hlo::Value lower_strided_read(hlo::Builder& b, const hlo::Value& flat, const hlo::Value& offset,
                              const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides, const StridedLayout& layout);

// The new flat buffer after writing `values` (shape `sizes`, dtype of `flat`) into the view.
hlo::Value lower_strided_write(hlo::Builder& b, const hlo::Value& flat, const hlo::Value& offset,
                               const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& strides, const StridedLayout& layout,
                               const hlo::Value& values);

}  // namespace torch_tpu::ops
