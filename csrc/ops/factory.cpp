// Factories: ranges, identity matrices and triangle indices. In eager mode constant fills (full,
// zeros, ones, *_like, new_*) reach the device as fill_ on an empty tensor and need nothing here;
// compiled graphs see the factories themselves (graph-only lowerings at the end).
#include "ops/factory.h"

#include <string>

#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Compare;
using hlo::DType;
using hlo::TensorType;
using hlo::Value;

// eye.out(n, out) and eye.m_out(n, m, out): the shape comes from the meta kernel.
std::vector<Value> lower_eye(Node& n) {
  const TensorType& out = n.out();
  TensorType it{DType::S64, out.shape};
  Value diagonal = n.b.compare(Compare::EQ, n.b.iota(it, 0), n.b.iota(it, 1));
  return {n.b.convert(diagonal, out.dtype)};
}

// A Scalar argument's value as a `dtype` constant, converted as PyTorch converts a Scalar:
// integers exactly (no detour through double), floats truncated toward zero for integer
// dtypes.
Value scalar_value(Node& n, size_t i, DType dtype) {
  const Attr& a = n.args.at(i).attr;
  if (const int64_t* v = std::get_if<int64_t>(&a)) return n.b.constant_int(*v, dtype);
  if (const bool* v = std::get_if<bool>(&a)) return n.b.constant(*v ? 1 : 0, dtype);
  return n.b.constant(n.f64(i), dtype);
}

// The output filled with the Scalar argument `i`.
LowerFn fill_with(size_t i) {
  return [i](Node& n) {
    const TensorType& out = n.out();
    return std::vector<Value>{n.b.broadcast_in_dim(scalar_value(n, i, out.dtype), out.shape, {})};
  };
}

// The output filled with `value`; empty tensors are zeros (any contents are valid).
LowerFn fill_constant(double value) {
  return [value](Node& n) { return std::vector<Value>{n.b.full(value, n.out())}; };
}

// fill.Tensor(self, value): a 0-d tensor's value.
std::vector<Value> lower_fill_tensor(Node& n) {
  return {cast_to(n.b, n.in(1), n.out().dtype, n.out().shape)};
}

// arange.start_step(start, end, step): the length comes from the meta kernel.
std::vector<Value> lower_arange_graph(Node& n) {
  const TensorType& out = n.out();
  if (out.numel() == 0) return {n.b.full(0, out)};
  DType math = arange_math(out.dtype);
  return {lower_arange(n.b, scalar_value(n, 0, math), scalar_value(n, 2, math), out.shape.at(0),
                       out.dtype)};
}

// triu_indices / tril_indices(row, col, offset): the coordinates of the triangle in
// row-major order, a [2, count] constant (count comes from the meta kernel).
LowerFn tri_indices(bool upper) {
  return [upper](Node& n) {
    const TensorType& out = n.out();
    if (out.numel() == 0) return std::vector<Value>{n.b.full(0, out)};
    int64_t rows = n.i64(0), cols = n.i64(1), offset = n.i64(2);
    std::string r, c;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (upper ? j - i >= offset : j - i <= offset) {
          r += (r.empty() ? "" : ", ") + std::to_string(i);
          c += (c.empty() ? "" : ", ") + std::to_string(j);
        }
    return std::vector<Value>{n.b.emit(
        "stablehlo.constant", {}, "value = dense<[[" + r + "], [" + c + "]]> : " + out.str(), out)};
  };
}

}  // namespace

DType arange_math(DType dtype) {
  if (!hlo::is_float(dtype)) return DType::S64;
  return dtype == DType::BF16 || dtype == DType::F16 ? DType::F32 : DType::F64;
}

Value lower_arange(hlo::Builder& b, const Value& start, const Value& step, int64_t n, DType dtype) {
  TensorType t{start.type.dtype, {n}};
  Value r = b.binary(Binary::Add, b.broadcast_in_dim(start, {n}, {}),
                     b.binary(Binary::Multiply, b.iota(t, 0), b.broadcast_in_dim(step, {n}, {})));
  return b.convert(r, dtype);
}

Value lower_linspace(hlo::Builder& b, const Value& start, const Value& end, int64_t steps,
                     DType dtype, const Value* base) {
  TensorType out{dtype, {steps}};
  if (steps == 0) return b.full(0, out);
  // Integer outputs step in f64 from integer endpoints; floats in their own precision,
  // rounding after each operation as CPU's scalar_t arithmetic does.
  DType math = hlo::is_float(dtype) ? dtype : DType::F64;
  Value s = b.convert(b.convert(start, dtype), math);
  Value e = b.convert(b.convert(end, dtype), math);
  TensorType t{math, {steps}};
  Value sv = b.broadcast_in_dim(s, {steps}, {});
  Value values = sv;
  if (steps > 1) {
    Value step = b.binary(Binary::Divide, b.binary(Binary::Subtract, e, s),
                          b.constant(static_cast<double>(steps - 1), math));
    Value stepv = b.broadcast_in_dim(step, {steps}, {});
    Value i = b.iota(t, 0);
    Value from_start = b.binary(Binary::Add, sv, b.binary(Binary::Multiply, stepv, i));
    Value rest = b.binary(Binary::Subtract, b.full(static_cast<double>(steps - 1), t), i);
    Value from_end = b.binary(Binary::Subtract, b.broadcast_in_dim(e, {steps}, {}),
                              b.binary(Binary::Multiply, stepv, rest));
    Value first_half = b.compare(Compare::LT, i, b.full(static_cast<double>(steps / 2), t));
    values = b.select(first_half, from_start, from_end);
  }
  if (base != nullptr) {
    Value bv = b.broadcast_in_dim(b.convert(b.convert(*base, dtype), math), {steps}, {});
    values = b.binary(Binary::Power, bv, values);
  }
  return b.convert(values, dtype);
}

TORCH_TPU_LOWERING(eye, {"eye.out", "eye.m_out"}, lower_eye);
// Autograd's zero gradients (sgn and other ops of real inputs): PyTorch marks them with
// the ZeroTensor key to skip work; here they are plain zeros.
TORCH_TPU_LOWERING(efficientzerotensor, {"_efficientzerotensor", "_efficientzerotensor.out"},
                   [](Node& n) { return std::vector<hlo::Value>{n.b.full(0, n.out())}; });
TORCH_TPU_LOWERING(triu_indices, {"triu_indices", "triu_indices.out"}, tri_indices(true));
TORCH_TPU_LOWERING(tril_indices, {"tril_indices", "tril_indices.out"}, tri_indices(false));

TORCH_TPU_GRAPH_LOWERING(full, {"full", "full_like", "fill.Scalar"}, fill_with(1));
TORCH_TPU_GRAPH_LOWERING(new_full, {"new_full"}, fill_with(2));
TORCH_TPU_GRAPH_LOWERING(scalar_tensor, {"scalar_tensor"}, fill_with(0));
TORCH_TPU_GRAPH_LOWERING(fill_tensor, {"fill.Tensor"}, lower_fill_tensor);
TORCH_TPU_GRAPH_LOWERING(zeros,
                         {"zeros", "zeros_like", "new_zeros", "zero", "empty.memory_format",
                          "empty_like", "empty_strided", "empty_permuted", "new_empty",
                          "new_empty_strided"},
                         fill_constant(0));
TORCH_TPU_GRAPH_LOWERING(ones, {"ones", "ones_like", "new_ones"}, fill_constant(1));
TORCH_TPU_GRAPH_LOWERING(arange, {"arange.start_step"}, lower_arange_graph);

}  // namespace torch_tpu::ops
