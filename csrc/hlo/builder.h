// Builds one StableHLO module as MLIR text. Ops are written in MLIR's generic form so
// the text parses on any StableHLO version the plugin may carry.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::hlo {

struct Value {
  int id = -1;
  TensorType type;
};

enum class Compare { EQ, NE, LT, LE, GT, GE };
enum class Reducer { Add, Mul, Max, Min, And, Or };

class Builder {
 public:
  // A function argument; arguments are numbered in the order they are declared.
  Value parameter(const TensorType& type);

  // A 0-d constant of `dtype`; integer and bool dtypes take the value truncated.
  Value constant(double value, DType dtype);
  Value constant_int(int64_t value, DType dtype);
  // `value` broadcast to `type`.
  Value full(double value, const TensorType& type);

  Value unary(const char* op, const Value& x);  // "exponential", "negate", ...
  Value binary(const char* op, const Value& a, const Value& b);  // "add", "maximum", ...
  Value compare(Compare direction, const Value& a, const Value& b);
  Value select(const Value& pred, const Value& on_true, const Value& on_false);
  Value convert(const Value& x, DType dtype);
  Value bitcast_convert(const Value& x, const TensorType& type);

  Value broadcast_in_dim(const Value& x, const std::vector<int64_t>& shape,
                         const std::vector<int64_t>& dims);
  Value reshape(const Value& x, const std::vector<int64_t>& shape);
  Value transpose(const Value& x, const std::vector<int64_t>& permutation);
  Value slice(const Value& x, const std::vector<int64_t>& start,
              const std::vector<int64_t>& limit, const std::vector<int64_t>& strides);
  Value dynamic_slice(const Value& x, const std::vector<Value>& starts,
                      const std::vector<int64_t>& sizes);
  Value dynamic_update_slice(const Value& x, const Value& update,
                             const std::vector<Value>& starts);
  Value pad(const Value& x, const Value& padding, const std::vector<int64_t>& low,
            const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
  Value concatenate(const std::vector<Value>& values, int64_t dim);
  Value iota(const TensorType& type, int64_t dim);

  Value dot_general(const Value& lhs, const Value& rhs, const std::vector<int64_t>& lhs_batch,
                    const std::vector<int64_t>& rhs_batch,
                    const std::vector<int64_t>& lhs_contract,
                    const std::vector<int64_t>& rhs_contract, DType result);
  Value reduce(const Value& x, const Value& init, const std::vector<int64_t>& dims,
               Reducer reducer);

  // Elements of 1-d `flat` at the integer positions in `indices` (any shape).
  Value gather_flat(const Value& flat, const Value& indices);
  // `flat` with the elements at `indices` replaced by `updates` (same shape as indices).
  Value scatter_flat(const Value& flat, const Value& indices, const Value& updates);

  // The module text, returning `outputs` from `main`.
  std::string module(const std::vector<Value>& outputs) const;

 private:
  Value emit(const std::string& op, const std::vector<Value>& operands,
             const std::string& attributes, const TensorType& result,
             const std::string& region = "");
  std::string body_;
  std::string param_signature_;
  int next_id_ = 0;
};

// Stable 128-bit fingerprint of a module's text, as 32 hex digits.
std::string fingerprint(const std::string& text);

}  // namespace torch_tpu::hlo
