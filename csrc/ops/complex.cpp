// Complex numbers: building them from parts (complex, polar) and conjugation (angle is
// with the unary ops).
// The views over their parts (view_as_real, view_as_complex, real, imag) are metadata in
// eager mode; a storage read with another element type is reinterpreted in
// ops/strided.cpp.
#include <vector>

#include "ops/elementwise.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;

// complex(real, imag)
V lower_complex(Node& n) {
  const DType part = hlo::component(n.out().dtype);
  return {n.b.complex(cast_to(n.b, n.in(0), part, n.out().shape),
                      cast_to(n.b, n.in(1), part, n.out().shape))};
}

// polar(abs, angle) = abs * (cos(angle) + i sin(angle))
V lower_polar(Node& n) {
  const DType part = hlo::component(n.out().dtype);
  Math m{n.b};
  Value r = cast_to(n.b, n.in(0), part, n.out().shape);
  Value theta = cast_to(n.b, n.in(1), part, n.out().shape);
  return {n.b.complex(m.mul(r, n.b.unary("cosine", theta)), m.mul(r, n.b.unary("sine", theta)))};
}

// conj_physical: the conjugate, materialized; real tensors are their own conjugate.
V lower_conj_physical(Node& n) {
  Value z = n.in(0);
  if (!hlo::is_complex(z.type.dtype)) return {z};
  return {n.b.complex(n.b.real(z), n.b.unary("negate", n.b.imag(z)))};
}

// Compiled graphs hold the views over complex parts as values.
V lower_view_as_real(Node& n) {
  const Value& z = n.in(0);
  std::vector<int64_t> shape = z.type.shape;
  shape.push_back(1);
  return {n.b.concatenate({n.b.reshape(n.b.real(z), shape), n.b.reshape(n.b.imag(z), shape)},
                          z.type.rank())};
}

V lower_view_as_complex(Node& n) {
  const Value& x = n.in(0);
  const int64_t rank = x.type.rank();
  std::vector<int64_t> start(rank, 0), limit = x.type.shape, step(rank, 1);
  std::vector<int64_t> shape(x.type.shape.begin(), x.type.shape.end() - 1);
  limit.back() = 1;
  Value re = n.b.reshape(n.b.slice(x, start, limit, step), shape);
  start.back() = 1;
  limit.back() = 2;
  Value im = n.b.reshape(n.b.slice(x, start, limit, step), shape);
  return {n.b.complex(re, im)};
}

V lower_neg_view(Node& n) { return {n.b.unary("negate", n.in(0))}; }

}  // namespace

TORCH_TPU_LOWERING(complex, {"complex", "complex.out"}, lower_complex);
TORCH_TPU_LOWERING(polar, {"polar", "polar.out"}, lower_polar);
TORCH_TPU_LOWERING(conj_physical, {"_conj_physical", "conj_physical.out", "conj_physical_"},
                   lower_conj_physical);

TORCH_TPU_GRAPH_LOWERING(conj, {"_conj", "_conj_copy"}, lower_conj_physical);
TORCH_TPU_GRAPH_LOWERING(neg_view, {"_neg_view", "_neg_view_copy"}, lower_neg_view);
TORCH_TPU_GRAPH_LOWERING(view_as_real, {"view_as_real", "view_as_real_copy"}, lower_view_as_real);
TORCH_TPU_GRAPH_LOWERING(view_as_complex, {"view_as_complex", "view_as_complex_copy"},
                         lower_view_as_complex);

}  // namespace torch_tpu::ops
