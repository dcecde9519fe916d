// A compiled FX graph: the whole graph lowered by the table in csrc/ops into one
// StableHLO module, compiled once through the shared cache, and called from C++.
//
// torch_tpu/_dynamo.py walks the FX graph and hands over a plain description (the
// spec); everything from there on is here:
//
//   spec = (inputs, values, nodes, outputs, mutations, constants)
//     inputs    [(dtype, shape[, order])]    placeholder i is value i; `order`, the
//               dimensions outermost first, for an input that is a permutation of a
//               dense buffer (`w.t()` of a contiguous w): the program takes that buffer
//               as it is and transposes inside, where XLA folds the transpose into
//               its consumer (a dot reads it as a plain row-major operand)
//     values    [(dtype, shape) or None]     the type of every value id
//     nodes     [(schema name, args, [out value ids])], args in schema order: a tensor
//               is (id,), a tensor list a list of (id,) / None, anything else as is;
//               control flow is a node named "@..." with nested specs (control_flow.h)
//     outputs   [value id or -1 for None]
//     mutations [(input index, value id)]    inputs the graph writes (copy_ into them)
//     constants [(value id, bytes)]           tensor constants (get_attr), raw contents
//     dynamic   [(input index, dim)]         optional: bounded dynamic dimensions. The
//               input's dimension is compiled at its size in `inputs` (the bound) and
//               marked with its real size at each call (stablehlo.set_dimension_size),
//               so one program serves every size up to the bound: XLA excludes the
//               padding from reductions, dots, softmax, sort (tests/cpp/pjrt).
//
// A node "@collective" with args (input, kind, reduce op or None, group size, group
// name, [device of each group rank]) is a functional collective on a group of tpu_dist's
// in-program transport (torch_tpu/_dynamo.py decides). A graph with such nodes (all on
// one group) is compiled over the group's devices and run by every rank's thread at once
// (distributed/graph_launch.h); it donates nothing.
#pragma once

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hlo/types.h"
#include "pjrt/buffer.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::compile {

class Graph {
 public:
  // Lowers and compiles `spec`. Throws NotImplementedError naming the op when a node has
  // no lowering, so the caller can run that graph another way.
  explicit Graph(const pybind11::handle& spec);

  // Runs the program on `inputs` (tensors of the spec's types: tpu ones, or CPU ones the
  // graph moves to the device) and returns the outputs, None where the graph returns
  // None. Mutated inputs are written in place. `sizes` holds the real size of each
  // dynamic dimension, in the spec's order (at most its bound).
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs,
                              const std::vector<int64_t>& sizes = {}) const;

  // This graph lowered for the f32 matmul precision in effect now (aten/precision.h):
  // itself, or a sibling lowered from the same spec on first use (needs the GIL).
  const Graph& for_current_precision() const;
  const std::string& fingerprint() const { return program_->fingerprint; }
  size_t num_nodes() const { return num_nodes_; }

 private:
  // The program's arguments for `inputs`: their buffers (dense copies of views, CPU
  // tensors moved to `device`), then the generator's seed and offset if the graph draws.
  // Argument indices whose donation this run must veto.
  std::vector<int64_t> vetoed_donations(
      const std::vector<at::Tensor>& inputs,
      const std::vector<std::shared_ptr<pjrt::Buffer>>& args) const;
  std::vector<std::shared_ptr<pjrt::Buffer>> arguments(const std::vector<at::Tensor>& inputs,
                                                       const std::vector<int64_t>& sizes,
                                                       c10::DeviceIndex device) const;

  struct Output {
    int input = -1;   // the graph returns this input as is
    int result = -1;  // else this program result; both -1 for None
  };
  std::vector<hlo::TensorType> inputs_;
  std::vector<Output> outputs_;
  std::vector<std::pair<int, int>> mutations_;  // (input, program result)
  std::vector<hlo::TensorType> results_;        // program results, in order
  std::vector<bool> input_is_param_;            // empty inputs are not parameters
  // Per input, the order of its dimensions in memory, outermost first, when it is a
  // permutation of a dense buffer (a transposed weight); empty when row-major.
  std::vector<std::vector<int64_t>> orders_;
  std::vector<std::pair<int, int>> dynamic_;    // (input, dim) with a runtime size
  std::string group_;                           // the group of the graph's collectives, "" if none
  std::vector<int> devices_;                    // its ranks' devices
  uint64_t rng_advance_ = 0;                    // generator offset used per call
  bool random_ = false;
  size_t num_nodes_ = 0;
  std::shared_ptr<const runtime::CompiledProgram> program_;
  hlo::Precision precision_;
  pybind11::object spec_;
  mutable std::map<hlo::Precision, std::shared_ptr<const Graph>> siblings_;
};

}  // namespace torch_tpu::compile
