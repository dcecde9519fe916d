// Complex numbers: building them from parts (complex, polar) and conjugation (angle is
// with the unary ops), and the list of lowerings that take complex values.
// The views over their parts (view_as_real, view_as_complex, real, imag) are metadata in
// eager mode; a storage read with another element type is reinterpreted in
// ops/strided.cpp.
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ops/common.h"

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
  return {n.b.complex(m.mul(r, n.b.unary(Unary::Cosine, theta)),
                      m.mul(r, n.b.unary(Unary::Sine, theta)))};
}

// conj_physical: the conjugate, materialized; real tensors are their own conjugate.
V lower_conj_physical(Node& n) {
  Value z = n.in(0);
  if (!hlo::is_complex(z.type.dtype)) return {z};
  return {n.b.complex(n.b.real(z), n.b.unary(Unary::Negate, n.b.imag(z)))};
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

V lower_neg_view(Node& n) { return {n.b.unary(Unary::Negate, n.in(0))}; }

}  // namespace

// Ops whose lowerings are right for complex values, by schema base name (in-place and
// out= forms included), each checked against CPU on complex64 and complex128
// (tests/python/test_complex.py). A lowering not listed here refuses complex operands.
bool complex_ok(std::string_view name) {
  static const std::unordered_set<std::string> names = {
      // elementwise math
      "add",
      "sub",
      "rsub",
      "mul",
      "div",
      "neg",
      "abs",
      "angle",
      "sgn",
      "exp",
      "log",
      "sqrt",
      "sin",
      "cos",
      "tanh",
      "sigmoid",
      "reciprocal",
      "relu",  // refuses them with CPU's NotImplementedError text
      "eq",
      "ne",
      "isnan",
      "where",
      "masked_fill",
      "fill",
      "zero",
      // reductions and products
      "sum",
      "mean",
      "prod",
      "cumsum",
      "linalg_vector_norm",
      "mm",
      "bmm",
      "addmm",
      "dot",
      // parts, conjugation, transforms
      "complex",
      "polar",
      "_conj_physical",
      "conj_physical",
      "_conj",
      "_conj_copy",
      "_neg_view",
      "_neg_view_copy",
      "view_as_real",
      "view_as_real_copy",
      "view_as_complex",
      "view_as_complex_copy",
      "_fft_r2c",
      "_fft_c2r",
      "_fft_c2c",
      // data movement and views (graph lowerings of views included)
      "cat",
      "stack",
      "index_select",
      "gather",
      "index",
      "_unsafe_index",
      "flip",
      "roll",
      "constant_pad_nd",
      "clone",
      "copy",
      "_to_copy",
      "alias",
      "alias_copy",
      "detach",
      "detach_copy",
      "lift_fresh",
      "lift_fresh_copy",
      "view",
      "_unsafe_view",
      "view_copy",
      "unsqueeze",
      "unsqueeze_copy",
      "squeeze",
      "squeeze_copy",
      "permute",
      "permute_copy",
      "t",
      "t_copy",
      "transpose",
      "transpose_copy",
      "expand",
      "expand_copy",
      "slice",
      "slice_copy",
      "select",
      "select_copy",
      "split",
      "split_with_sizes",
      "split_copy",
      "split_with_sizes_copy",
      "unbind",
      "unbind_copy",
      "slice_scatter",
      "select_scatter",
      "full",
      "full_like",
      "zeros",
      "zeros_like",
      "new_zeros",
      "ones",
      "ones_like",
      "new_ones",
      "empty",
      "new_full",
      "scalar_tensor",
  };
  std::string_view base = name.substr(0, name.find('.'));
  if (names.count(std::string(base))) return true;
  // In-place forms: "add_" is "add".
  return !base.empty() && base.back() == '_' &&
         names.count(std::string(base.substr(0, base.size() - 1)));
}

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
