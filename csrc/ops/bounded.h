// Bounded dynamic sizes: one program per bucket of a size, not per size.
//
// A dimension whose size varies between calls is compiled at its bucket (the bound) and
// marked with its real size inside the program (`stablehlo.set_dimension_size` with a
// runtime s32 operand). The lowering itself is unchanged and keeps its static types at
// the bound: XLA tracks the real size and keeps the padding out of reductions, dots,
// softmax and concatenation. Results that stay dynamic are made static again along the
// dimension (`static_along`), at a length the caller picks, so they come back as plain
// buffers. Which ops stay exact this way is `bucket_safe`'s list.
//
// Eager mode keeps such values padded between ops (runtime::Padding): `plan_padded_read`
// says whether, and how, a view of a padded storage can be read at the bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

// TORCH_TPU_SHAPE_BUCKETS as torch_tpu/_buckets.py parses it: 0 off, -1 the default rule
// (the next power of two, at least 8, up to 1,024; then multiples of 128), or N > 0
// (multiples of N).
void set_bucket_rule(int64_t rule);
int64_t bucket_rule();
// The bound a size `n` compiles at under `rule` (the current rule by default).
int64_t bucket(int64_t n);
int64_t bucket(int64_t n, int64_t rule);

// Whether eager op `name` (an ATen schema name) gives the exact-shape result when its
// inputs have bounded dynamic dimensions.
bool bucket_safe(std::string_view name);

// `x` marked with runtime size `size` (an s32 scalar) along `dim`; the type stays static.
hlo::Value set_dimension_size(hlo::Builder& b, const hlo::Value& x, const hlo::Value& size,
                              int64_t dim);
// `x` with dimension `dim` static again, `length` long (the first `length` elements; past
// the real size the values are unspecified). XLA:CPU returns a value whose size is dynamic
// as a buffer with size metadata that no static program accepts; a gather of every index
// reads the same elements into a static value (checked in tests/cpp/pjrt).
hlo::Value static_along(hlo::Builder& b, const hlo::Value& x, int64_t dim, int64_t length);

// How a view reads a padded storage at the bound: reshape the flat buffer to `physical`,
// mark the `dynamic` dimensions, drop size-1 dimensions, transpose to `permutation`,
// merge runs of dimensions into `merged`, broadcast into `bound` (the view's shape at the
// bound) along `broadcast_dims`.
struct PaddedRead {
  std::vector<int64_t> physical;
  std::vector<int64_t> dynamic;  // dimensions of `physical`
  std::vector<int64_t> real;     // their real sizes (runtime operands, not in the key)
  std::vector<int64_t> squeezed;
  std::vector<int64_t> permutation;
  std::vector<int64_t> merged;
  std::vector<int64_t> bound;
  std::vector<int64_t> broadcast_dims;
  // `bound` with every dynamic dimension one larger: output sizes that change with it
  // are the dynamic ones (a size exactly at its bound cannot tell).
  std::vector<int64_t> probe;
};

// The plan for a view (`sizes`, `strides`, `offset`) of a storage holding a row-major
// tensor of shape `logical` padded to `physical`, whose `dynamic` dimensions vary; none when the
// view is not a whole permuted, merged or broadcast reading of it (a slice, say), or when a merge
// would put a padded dimension inside another.
std::optional<PaddedRead> plan_padded_read(const std::vector<int64_t>& logical,
                                           const std::vector<int64_t>& physical,
                                           const std::vector<int64_t>& dynamic,
                                           const std::vector<int64_t>& sizes,
                                           const std::vector<int64_t>& strides, int64_t offset);
// The view's value at the bound, from the flat buffer and one s32 size per `dynamic` dim.
hlo::Value lower_padded_read(hlo::Builder& b, const hlo::Value& flat,
                             const std::vector<hlo::Value>& sizes, const PaddedRead& read);
// The same view located in the padded buffer: its strides and offset there. None when a
// view dimension steps across more than one logical dimension (the step would depend on
// the real sizes).
struct PhysicalView {
  std::vector<int64_t> strides;
  int64_t offset;
};
std::optional<PhysicalView> physical_view(const std::vector<int64_t>& logical,
                                          const std::vector<int64_t>& physical,
                                          const std::vector<int64_t>& sizes,
                                          const std::vector<int64_t>& strides, int64_t offset);
// The logical values as a flat array (for readers that want real sizes).
hlo::Value unpad_flat(hlo::Builder& b, const hlo::Value& flat, const std::vector<int64_t>& logical,
                      const std::vector<int64_t>& physical);

}  // namespace torch_tpu::ops
