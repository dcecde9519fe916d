// What eager kernels (aten/lowered_kernel) and compiled graphs (compile/graph) must do
// identically around a lowering's Node: PyTorch's type promotion, the dtype scalars enter
// in, the generator counters a draw takes and its (seed, offset) state, and the checks on
// what a lowering returns. Eager and compiled random numbers agree for a seed only
// because both paths build their Nodes here.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TypeProperties.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "ops/registry.h"

namespace torch_tpu::aten {

// PyTorch's result type over an op's tensor and scalar inputs.
class Promotion {
 public:
  // A float8 tensor takes no part: PyTorch promotes no float8 dtype (its ops that take
  // them, _scaled_mm and conversions, name their result's dtype), and float8 math runs in
  // f32 (ops::math_dtype).
  void add(const at::Tensor& tensor);
  void add(const c10::Scalar& scalar);
  // The promoted dtype; f32 for an op with no tensor or scalar input.
  c10::ScalarType compute() const;
  // The dtype scalar operands enter the program in: the compute dtype, except f32 for
  // bf16/f16 so that the scalars stay exact.
  c10::ScalarType scalar_type() const;

 private:
  at::native::ResultTypeState state_;
};

// Whether argument `i` of an op with `def`'s rule takes part in its type promotion: every
// tensor and scalar argument, except that the binary rules (ops::Promote) take the first
// two only (alpha does not promote).
inline bool promotes(const ops::OpDef& def, size_t i) {
  return def.promote == ops::Promote::Any || i < 2;
}
// The dtype `def`'s lowering computes in (Node::compute): the promoted one, or for true
// division (no `rounding_mode`) of integers the default float dtype.
c10::ScalarType compute_type(const ops::OpDef& def, const Promotion& promotion, bool rounding_mode);

// Generator counters one draw producing `outputs` takes: their element count, rounded up
// to a multiple of 4 so that consecutive draws never share a counter.
uint64_t rng_counters(const std::vector<hlo::TensorType>& outputs);

// Takes `counters` counters from `gen`: its seed and the offset the draw starts at.
struct RngDraw {
  uint64_t seed, offset;
};
RngDraw take_counters(at::Generator gen, uint64_t counters);

// The u64[2] (seed, offset) state stablehlo.rng_bit_generator takes, from 0-d s64 values.
hlo::Value rng_state(hlo::Builder& b, const hlo::Value& seed, const hlo::Value& offset);

// Runs `def`'s lowering of `node` and checks that it gives one value per output, of that
// output's shape. Returns each converted to its output's dtype, and nullopt where `skip`
// says the caller has no use for it.
std::vector<std::optional<hlo::Value>> lower_node(const ops::OpDef& def, ops::Node& node,
                                                  const std::string& name,
                                                  const std::vector<bool>& skip);

}  // namespace torch_tpu::aten
