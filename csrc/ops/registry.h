// The table of lowerings by ATen schema name ("exp", "exp_", "exp.out", ...). One entry
// serves eager mode (a generic dispatcher kernel in csrc/aten) and compiled graphs.
//
// A lowering sees one op application as a Node: every schema argument in order, with
// tensors and Python scalars as StableHLO values (scalars are runtime operands, so new
// values do not recompile; a few literal values are constants: aten/op_call.h) and
// everything else as a static attribute. It returns, in order, one value per fresh
// result of the op, then one per mutated argument. In-place and out= forms share the
// functional form's lowering: their results are written into `self` / `out`. Output
// shapes and dtypes come from PyTorch's meta kernels, so shape checks and error messages
// are PyTorch's own.
//
//   std::vector<hlo::Value> lower_exp(Node& n) {
//     return {n.b.unary(hlo::Unary::Exponential, arg_math(n, 0))};  // ops/common.h
//   }
//   TORCH_TPU_LOWERING(exp, {"exp", "exp_", "exp.out"}, lower_exp);
//
// This table is the one way to write an op. A hand-written ATen kernel (csrc/aten, an
// OpCall with its own body) is allowed only for an op whose output shape depends on the
// data (nonzero, masked_select, bool-mask indexing, unique, ...): it reads a count from
// the device before it can build a program, which no lowering can. The other kernels in
// csrc/aten are not ops in this sense: the tensor's own plumbing (allocation, views as
// metadata, copies between devices, fill) and kernels that only forward to other ops.
// An error text PyTorch's meta kernel words differently from CPU's is the table's
// concern too (Promote below; for the matrix products, whose meta kernels are Python ones,
// aten/cpu_checks.cpp runs CPU's own structured checks), not a reason for a kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::ops {

// A static argument: part of the program key. None is monostate.
using Attr = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                          std::vector<double>>;

struct Operand {
  std::optional<hlo::Value> value;                // Tensor, Tensor?, Scalar, Generator
  std::vector<std::optional<hlo::Value>> values;  // Tensor[], Tensor?[], Scalar[]
  Attr attr;                                      // every other argument
};

struct Node {
  hlo::Builder& b;
  std::vector<Operand> args;             // in schema order
  std::vector<hlo::TensorType> outputs;  // what to return, in order (from the meta kernel)
  // PyTorch's promoted dtype of the tensor and scalar inputs. Scalars arrive in this
  // dtype, except that bf16/f16 promote them to f32 to keep them exact.
  hlo::DType compute = hlo::DType::F32;

  // A present tensor or scalar argument.
  const hlo::Value& in(size_t i) const;
  bool has(size_t i) const;  // a tensor/scalar argument that is not None
  const std::vector<std::optional<hlo::Value>>& list(size_t i) const;
  bool is_none(size_t i) const;
  int64_t i64(size_t i) const;
  double f64(size_t i) const;  // double attribute (ints are widened)
  bool flag(size_t i) const;
  const std::string& str(size_t i) const;
  const std::vector<int64_t>& ints(size_t i) const;
  std::optional<int64_t> opt_i64(size_t i) const;
  const hlo::TensorType& out(size_t i = 0) const { return outputs.at(i); }
  // A Generator argument: a u64[2] (seed, offset) state for stablehlo.rng_bit_generator.
  // The caller advances the generator by the element count of the outputs.
  const hlo::Value& rng_state(size_t i) const { return in(i); }
  // The same state for random ops without a Generator argument (native_dropout), which
  // draw from the default generator.
  std::optional<hlo::Value> rng;
  const hlo::Value& rng_state() const { return rng.value(); }
};

using LowerFn = std::function<std::vector<hlo::Value>(Node&)>;

// How an op's result dtype follows from its inputs, when that is TensorIterator's binary-op
// rule. The eager kernel then checks the application as CPU does before PyTorch's meta
// kernel runs (some Python meta kernels word these errors differently, or accept what CPU
// rejects): broadcastable shapes, an in-place `self` of the broadcast shape, a result type
// that can be cast to every written argument ("result type Float can't be cast to the
// desired output type Long") and an `alpha` that suits it. Node::compute follows the rule.
enum class Promote {
  Any,         // the meta kernel decides (every op not listed below)
  Binary,      // the promoted type of the first two arguments (self, other); alpha takes no part
  Subtract,    // Binary, refusing bool operands as CPU's sub does
  TrueDivide,  // Binary, with integers promoted to the default float dtype unless the
               // third argument (rounding_mode) is given
};

struct OpDef {
  LowerFn lower = nullptr;
  bool random = false;  // draws from a generator (the Generator? argument, or the default)
  // Only compiled graphs use it: eager mode runs these ops another way (views as
  // metadata, data-dependent kernels, composites), and registering them would replace that.
  bool graph_only = false;
  Promote promote = Promote::Any;
};

// Registers `fn` under every schema name in `names`; a name registered twice throws.
void register_lowering(std::initializer_list<const char*> names, LowerFn fn, bool random = false,
                       bool graph_only = false, Promote promote = Promote::Any);
const OpDef* find_lowering(std::string_view name);
// Whether the lowering of schema `name` handles complex64/complex128 values (the list is
// in ops/complex.cpp). Other lowerings are written for real types, and XLA may crash
// compiling them for complex ones, so complex operands never reach them.
bool complex_ok(std::string_view name);
std::vector<std::string> lowering_names();

struct Registrar {
  Registrar(std::initializer_list<const char*> names, LowerFn fn, bool random = false,
            bool graph_only = false) {
    register_lowering(names, std::move(fn), random, graph_only);
  }
  Registrar(std::initializer_list<const char*> names, LowerFn fn, Promote promote) {
    register_lowering(names, std::move(fn), false, false, promote);
  }
};

#define TORCH_TPU_LOWERING(id, ...) \
  static const ::torch_tpu::ops::Registrar torch_tpu_lowering_##id(__VA_ARGS__)
struct GraphRegistrar {
  GraphRegistrar(std::initializer_list<const char*> names, LowerFn fn, bool random = false) {
    register_lowering(names, std::move(fn), random, /*graph_only=*/true);
  }
};

// A lowering for compiled graphs only (OpDef::graph_only).
#define TORCH_TPU_GRAPH_LOWERING(id, ...) \
  static const ::torch_tpu::ops::GraphRegistrar torch_tpu_graph_lowering_##id(__VA_ARGS__)

// Thrown by a lowering for an application it cannot express as one program (a bool mask
// index has a data-dependent shape): a compiled graph holding it runs op by op instead.
// Any other exception from a lowering is a bug and surfaces as one.
struct Unsupported : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Thrown by a lowering for an application CPU refuses too, with CPU's text: eager mode
// raises it as it is (a RuntimeError; a NotImplementedError for NotImplemented), where any
// other exception from a lowering is reported as a failure to compile the op.
struct Refused : Unsupported {
  using Unsupported::Unsupported;
};
struct NotImplemented : Refused {
  using Refused::Refused;
};

}  // namespace torch_tpu::ops
