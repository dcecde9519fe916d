// Lowers the nodes of a graph spec (see graph.h) into a builder with the op table in
// csrc/ops. A compiled graph lowers its top level with it, and every control-flow body
// (control_flow.h) is a nested spec lowered by the same code inside a region.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::compile {

// A value's (dtype, shape) as the spec gives it.
hlo::TensorType type_of(const pybind11::handle& h);
// The spec's value types by value id (None, for a value that is not a tensor, is empty).
std::vector<std::optional<hlo::TensorType>> value_types(const pybind11::list& values);
// A tensor constant from its raw little-endian contents.
hlo::Value tensor_constant(hlo::Builder& b, const hlo::TensorType& type, const std::string& bytes);

struct Lowerer {
  hlo::Builder& b;
  const std::vector<std::optional<hlo::TensorType>>& types;  // of each value id
  std::vector<std::optional<hlo::Value>> vals;               // each value id's value
  // The generator's (seed, offset) as runtime scalars, when some node draws, and how far
  // the nodes lowered so far have advanced the offset. A control-flow body has none:
  // random ops there are refused.
  std::optional<hlo::Value> seed, offset;
  uint64_t rng_advance = 0;

  const hlo::Value& value(int id, const std::string& op) const;
  // Lowers one spec node (schema name, args, out ids), recording its results.
  void lower(const pybind11::handle& node);
};

// Whether a node of this schema name draws from the generator.
bool draws(const std::string& name);

// The outputs of the nested spec `spec` (a control-flow body) lowered into `b` with
// `inputs` as its placeholders, which must have the spec's input types.
std::vector<hlo::Value> lower_subgraph(hlo::Builder& b, const pybind11::handle& spec,
                                       const std::vector<hlo::Value>& inputs);

}  // namespace torch_tpu::compile
