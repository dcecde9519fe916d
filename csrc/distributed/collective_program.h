// The StableHLO program of one collective of tpu_dist's in-program transport, torch-free:
// what a rank asks for (CollectiveSpec), the text every rank of the group must agree on,
// the program's cache key, and the module that runs it over the group's N devices (one
// replica per rank, every argument and output a flat 1-d buffer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "hlo/types.h"
#include "runtime/executable_cache.h"

namespace torch_tpu::distributed {

enum class Collective : int64_t {
  AllReduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AllToAll,
  Barrier
};

// The reductions a collective can ask for (the backend maps c10d's ReduceOp onto these).
enum class Reduce : int64_t { Sum, Avg, Product, Min, Max, BitAnd, BitOr, BitXor, PremulSum };

struct CollectiveSpec {
  Collective kind = Collective::Barrier;
  const char* name = "barrier";  // the c10d op, for messages
  Reduce reduce = Reduce::Sum;
  double premul = 1.0;  // PremulSum's factor
  hlo::DType dtype = hlo::DType::F32;
  // Element counts of the program's arguments, per rank.
  std::vector<int64_t> inputs;
  // Element counts of the program's outputs, per rank, in delivery order.
  std::vector<int64_t> outputs;
  // AllGather/AllToAll: whether each result is split into one output per rank (the list
  // forms) or stays one output.
  bool split = false;
  // ReduceScatter/AllToAll: this many consecutive arguments are joined into one operand.
  int64_t group = 1;
  int64_t root = -1;  // Broadcast: the rank whose value every rank receives
};

// Whether the program can reduce `dtype` with `op` (PremulSum needs a floating dtype, the
// bitwise ops an integer or bool one).
bool can_reduce(Reduce op, hlo::DType dtype);
// Whether `op` on `dtype` is a bitwise reduction on integers: XLA:CPU's collectives do not
// combine with and/or/xor, so an all_reduce folds after an all_gather, and a
// reduce_scatter cannot run in-program.
bool reduces_bitwise(Reduce op, hlo::DType dtype);

// What must be equal across ranks, as text: compared exactly, shown on a mismatch.
std::string signature(const CollectiveSpec& spec);

// The cache key: everything that changes the program (op, reduce op and factor, dtype,
// every argument's and output's element count, layout flags, world size and the device
// ids of the compile's device assignment). A broadcast's root is not in it: each rank's
// runtime mask (the program's first argument) says whether it is the root.
runtime::ProgramKey program_key(const CollectiveSpec& spec, const std::vector<int64_t>& device_ids);

// A functional collective inside a compiled graph (torch.ops._c10d_functional), over
// the group's `n` ranks (replica r of the program is group rank r): `kind` is
// "all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor" or
// "all_to_all_single" (even splits), `reduce` PyTorch's name of the reduce op ("sum",
// "avg", "product", "min", "max", "band", "bor", "bxor"; ignored by the others). `x` has
// any shape; the gather, scatter and exchange are along dimension 0, and `out` is the
// result's type. Throws ops::Unsupported for what the program cannot express (an unknown
// op or reduce op, a bitwise reduce_scatter).
hlo::Value lower_graph_collective(hlo::Builder& b, const std::string& kind,
                                  const std::string& reduce, int n, const hlo::Value& x,
                                  const hlo::TensorType& out);

// The module over `replicas` devices. A broadcast takes a 0-d pred first (true on the
// root), then its values.
runtime::Program build_collective_program(const CollectiveSpec& spec, int replicas);

}  // namespace torch_tpu::distributed
