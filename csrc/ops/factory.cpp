// Factories: ranges and identity matrices. Constant fills (full, zeros, ones, *_like,
// new_*) reach the device as fill_ on an empty tensor and need nothing here.
#include "ops/factory.h"

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

}  // namespace

Value lower_arange(hlo::Builder& b, const Value& start, const Value& step, int64_t n,
                   DType dtype) {
  TensorType t{start.type.dtype, {n}};
  Value r = b.binary("add", b.broadcast_in_dim(start, {n}, {}),
                     b.binary("multiply", b.iota(t, 0), b.broadcast_in_dim(step, {n}, {})));
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
    Value step = b.binary("divide", b.binary("subtract", e, s),
                          b.constant(static_cast<double>(steps - 1), math));
    Value stepv = b.broadcast_in_dim(step, {steps}, {});
    Value i = b.iota(t, 0);
    Value from_start = b.binary("add", sv, b.binary("multiply", stepv, i));
    Value rest = b.binary("subtract", b.full(static_cast<double>(steps - 1), t), i);
    Value from_end = b.binary("subtract", b.broadcast_in_dim(e, {steps}, {}),
                              b.binary("multiply", stepv, rest));
    Value first_half = b.compare(Compare::LT, i, b.full(static_cast<double>(steps / 2), t));
    values = b.select(first_half, from_start, from_end);
  }
  if (base != nullptr) {
    Value bv = b.broadcast_in_dim(b.convert(b.convert(*base, dtype), math), {steps}, {});
    values = b.binary("power", bv, values);
  }
  return b.convert(values, dtype);
}

TORCH_TPU_LOWERING(eye, {"eye.out", "eye.m_out"}, lower_eye);

}  // namespace torch_tpu::ops
