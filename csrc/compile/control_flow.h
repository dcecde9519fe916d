// Control flow in compiled graphs: the spec nodes that are not ATen ops. torch_tpu/_dynamo.py
// writes PyTorch's higher-order ops as nodes named "@..." whose bodies are nested specs,
// lowered inside StableHLO regions by the same Lowerer as the top level, so a body is
// emitted once however many times it runs:
//
//   ("@cond", [pred, true_spec, false_spec, [operands]], outs)     -> stablehlo.case
//   ("@while_loop", [cond_spec, body_spec, [carried], [extra]], outs) -> stablehlo.while
//   ("@scan", [combine_spec, [init], [xs], [extra]], outs)          -> stablehlo.while
//       over dimension 0 of xs: the carry, and each stacked output written at step i
//   ("@optimization_barrier", [[inputs]], outs)                      -> optimization_barrier
//   ("@call_stablehlo", [functions, callee, [inputs]], outs)         -> func.call @callee
//       of `functions` (text) added to the module: torch.tpu.pallas.jax_op
//
// Tensors are (id,) as in ATen nodes.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "compile/lowerer.h"
#include "hlo/builder.h"

namespace torch_tpu::compile {

bool is_structured(const std::string& name);

// The results of one such node, of types `outs`.
std::vector<hlo::Value> lower_structured(Lowerer& lw, const std::string& name,
                                         const pybind11::list& args,
                                         const std::vector<hlo::TensorType>& outs);

}  // namespace torch_tpu::compile
