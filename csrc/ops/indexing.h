// Indexing lowerings the hand-written kernels in csrc/aten/indexing_kernels.cpp call
// directly: ops whose output shape depends on data (nonzero, masked_select, bool-mask
// indexing) and the ops they feed.
#pragma once

#include <optional>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

// self[indices] with integer index tensors (None entries keep their dim), following
// PyTorch's advanced-indexing rules. Out-of-range indices are clamped, as XLA's gather.
hlo::Value lower_index(hlo::Builder& b, const hlo::Value& self,
                       const std::vector<std::optional<hlo::Value>>& indices);
// self with self[indices] = values (or += with `accumulate`); integer indices only.
hlo::Value lower_index_put(hlo::Builder& b, const hlo::Value& self,
                           const std::vector<std::optional<hlo::Value>>& indices,
                           const hlo::Value& values, bool accumulate);

// The flat positions of x's nonzero elements, in order, followed by the others:
// {count (0-d s64), positions (s64 [numel])}.
std::vector<hlo::Value> lower_nonzero_flat(hlo::Builder& b, const hlo::Value& x);
// `flat` positions (s64 [n]) as coordinates in `shape`: s64 [n, rank].
hlo::Value unravel(hlo::Builder& b, const hlo::Value& flat, const std::vector<int64_t>& shape);

// x's slices at `index` (any shape, taken flat) along `dim`, as index_select.
hlo::Value select_along(hlo::Builder& b, const hlo::Value& x, int64_t dim, const hlo::Value& index);
// x plus `updates` (x's shape but index.numel() along `dim`) at `index` along `dim`.
hlo::Value add_along(hlo::Builder& b, const hlo::Value& x, int64_t dim, const hlo::Value& index,
                     const hlo::Value& updates);

// Inclusive prefix sum along the only dim of a 1-d value.
hlo::Value cumsum_1d(hlo::Builder& b, const hlo::Value& x);

// repeat_interleave of arange(n) by 1-d `repeats` whose sum is `total`.
hlo::Value lower_repeat_interleave(hlo::Builder& b, const hlo::Value& repeats, int64_t total);

}  // namespace torch_tpu::ops
