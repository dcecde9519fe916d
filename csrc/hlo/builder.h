// Builds one StableHLO module as MLIR text. Ops are written in MLIR's generic form so
// the text parses on any StableHLO version the plugin may carry.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/opcode.h"
#include "hlo/types.h"

namespace torch_tpu::hlo {

struct Value {
  int id = -1;
  TensorType type;
  int result = -1;  // which result of a multi-result op, or -1
};

enum class Compare { EQ, NE, LT, LE, GT, GE };

class Builder {
 public:
  // A function argument; arguments are numbered in the order they are declared.
  Value parameter(const TensorType& type);
  // Donates argument `param` to result `output` of main: XLA may write that result into
  // the argument's buffer (tf.aliasing_output), and the caller must not read it again.
  void alias_output(const Value& param, int output);
  // (argument index, bytes) of each argument donated so far.
  std::vector<std::pair<int, int64_t>> donations() const;

  // A 0-d constant of `dtype`; integer and bool dtypes take the value truncated.
  Value constant(double value, DType dtype);
  Value constant_int(int64_t value, DType dtype);
  // `value` broadcast to `type`.
  Value full(double value, const TensorType& type);

  Value unary(Unary op, const Value& x);
  Value binary(Binary op, const Value& a, const Value& b);
  Value compare(Compare direction, const Value& a, const Value& b);
  Value select(const Value& pred, const Value& on_true, const Value& on_false);
  Value convert(const Value& x, DType dtype);  // as PyTorch converts (bool, complex, float8)
  Value bitcast_convert(const Value& x, const TensorType& type);
  // Parts of complex values: real(x) and imag(x) of a real x are x and 0.
  Value real(const Value& x);
  Value imag(const Value& x);
  // The complex value re + i*im; f16/bf16 parts are widened to f32 (there is no complex32).
  Value complex(const Value& re, const Value& im);

  Value broadcast_in_dim(const Value& x, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& dims);
  Value reshape(const Value& x, const std::vector<int64_t>& shape);
  Value transpose(const Value& x, const std::vector<int64_t>& permutation);
  Value slice(const Value& x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides);
  Value dynamic_slice(const Value& x, const std::vector<Value>& starts,
                      const std::vector<int64_t>& sizes);
  Value dynamic_update_slice(const Value& x, const Value& update, const std::vector<Value>& starts);
  Value pad(const Value& x, const Value& padding, const std::vector<int64_t>& low,
            const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
  Value concatenate(const std::vector<Value>& values, int64_t dim);
  Value iota(const TensorType& type, int64_t dim);

  Value dot_general(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch, const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract, DType result);
  // `x` reduced over `dims` by combining with `op`, starting from the 0-d `init`.
  Value reduce(const Value& x, const Value& init, const std::vector<int64_t>& dims, Binary op);

  // Elements of 1-d `flat` at the integer positions in `indices` (any shape).
  Value gather_flat(const Value& flat, const Value& indices);
  // `flat` with the elements at `indices` replaced by `updates` (same shape as indices).
  Value scatter_flat(const Value& flat, const Value& indices, const Value& updates);

  // Any StableHLO op in generic form, for ops without a helper or an opcode (hlo/opcode.h):
  //   b.emit("stablehlo.is_finite", {x}, "", TensorType{DType::Pred, x.type.shape})
  // `attributes` is the text inside {...}; `regions` come from region().
  Value emit(const std::string& op, const std::vector<Value>& operands,
             const std::string& attributes, const TensorType& result,
             const std::vector<std::string>& regions = {});
  std::vector<Value> emit_multi(const std::string& op, const std::vector<Value>& operands,
                                const std::string& attributes,
                                const std::vector<TensorType>& results,
                                const std::vector<std::string>& regions = {});
  // A region with block arguments of `arg_types`, whose body returns what `body` gives.
  // The body may use only its arguments (StableHLO regions are isolated from above).
  using RegionBody = std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>;
  std::string region(const std::vector<TensorType>& arg_types, const RegionBody& body);
  // A region of two scalar arguments of `dtype` combining them with a binary op.
  std::string binary_region(Binary op, DType dtype);

  // Adds `text` (private func.func definitions in generic form, their symbols unique to
  // the caller) to the module, after `main`; call them with
  //   b.emit_multi("func.call", operands, "callee = @name", result_types)
  // Functions added while building a region go to the enclosing module.
  void add_functions(const std::string& text);

  // The module text, returning `outputs` from `main`.
  std::string module(const std::vector<Value>& outputs) const;

  // The precision of f32 matrix products (dot_general, convolution) emitted from now
  // on: StableHLO's precision_config, which lets a backend use fewer bf16 passes (TPU)
  // or TF32 (GPU) below HIGHEST. Low-precision products always keep DEFAULT.
  void set_matmul_precision(Precision p) { precision_ = p; }
  Precision matmul_precision() const { return precision_; }
  // The precision_config attribute for a product of `lhs` and `rhs` (with its leading
  // ", "), or "" where none applies.
  std::string precision_config(const Value& lhs, const Value& rhs) const;

 private:
  Value to_float8(const Value& x, DType dtype);
  std::string line(const std::string& lhs, const std::string& op,
                   const std::vector<Value>& operands, const std::string& attributes,
                   const std::string& result_types, const std::vector<std::string>& regions);
  std::string body_;
  std::string functions_;  // add_functions' text, each added once
  std::vector<Value> params_;
  std::vector<int> aliases_;  // per parameter: the output it is donated to, or -1
  int next_id_ = 0;
  Precision precision_ = Precision::Highest;
};

// Stable 128-bit fingerprint of a module's text, as 32 hex digits.
std::string fingerprint(const std::string& text);

// "%v3" or "%v3#1": how a value is named in module text.
std::string value_name(const Value& v);
// "array<i64: 1, 2>", for attributes.
std::string i64_array(const std::vector<int64_t>& values);

}  // namespace torch_tpu::hlo
