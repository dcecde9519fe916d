// Convolutions (1d/2d/3d, strided, padded, dilated, grouped, transposed) and their
// gradients, all as stablehlo.convolution. PyTorch sends every convolution on a backend
// it does not know to convolution_overrideable / convolution_backward_overrideable.
//
// The gradients follow from the convolution's bilinearity: the input gradient of a
// convolution is a transposed convolution of the output gradient with the same weight
// (and the other way round), and the weight gradient is a convolution of the input
// with the output gradient in which the input's channels play the batch.
#include <functional>

#include "ops/reduction.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

// bf16/f16 convolutions accumulate in f32, as PyTorch's CPU kernels do.
hlo::DType accumulator(hlo::DType dtype) { return math_dtype(dtype); }

std::string spec(const char* first, const char* second, size_t spatial) {
  std::string s = std::string("[") + first + ", " + second;
  for (size_t i = 0; i < spatial; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

struct Window {
  Ints strides, pad_lo, pad_hi, lhs_dilation, rhs_dilation;
};

// One stablehlo.convolution. `dims` is the "[..]x[..]->[..]" dimension text.
Value convolution(hlo::Builder& b, const Value& lhs, const Value& rhs, const std::string& dims,
                  const Window& w, int64_t feature_groups, int64_t batch_groups,
                  const hlo::TensorType& result) {
  std::string padding = "dense<[";
  for (size_t i = 0; i < w.pad_lo.size(); ++i)
    padding += (i ? ", [" : "[") + std::to_string(w.pad_lo[i]) + ", " + std::to_string(w.pad_hi[i]) + "]";
  padding += "]> : tensor<" + std::to_string(w.pad_lo.size()) + "x2xi64>";
  std::string attrs = "batch_group_count = " + std::to_string(batch_groups) +
                      " : i64, dimension_numbers = #stablehlo.conv<" + dims +
                      ">, feature_group_count = " + std::to_string(feature_groups) +
                      " : i64, lhs_dilation = " + hlo::i64_array(w.lhs_dilation) +
                      ", padding = " + padding + ", rhs_dilation = " + hlo::i64_array(w.rhs_dilation) +
                      ", window_strides = " + hlo::i64_array(w.strides);
  hlo::TensorType acc{accumulator(result.dtype), result.shape};
  return b.convert(b.emit("stablehlo.convolution", {lhs, rhs}, attrs, acc), result.dtype);
}

struct ConvParams {
  Ints stride, padding, dilation;
  int64_t groups = 1;
};

ConvParams params(Node& n, size_t first) {
  return {n.ints(first), n.ints(first + 1), n.ints(first + 2), n.i64(first + 5)};
}

size_t spatial_rank(const Value& x) { return static_cast<size_t>(x.type.rank() - 2); }

// y = conv(x, w) with w [Cout, Cin/groups, k...]; `out` gives y's shape.
Value conv_forward(hlo::Builder& b, const Value& x, const Value& w, const ConvParams& p,
                   const hlo::TensorType& out) {
  size_t s = spatial_rank(x);
  Window win{p.stride, p.padding, p.padding, Ints(s, 1), p.dilation};
  std::string dims = spec("b", "f", s) + "x" + spec("o", "i", s) + "->" + spec("b", "f", s);
  return convolution(b, x, w, dims, win, p.groups, 1, out);
}

// The transposed convolution of x [N, Cin, ...] with w [Cin, Cout/groups, k...] to `out`
// (its spatial size fixes the output padding): a convolution of x dilated by the
// stride with the spatially reversed kernel, its in/out channels swapped per group.
Value conv_transposed(hlo::Builder& b, const Value& x, const Value& w, const ConvParams& p,
                      const hlo::TensorType& out) {
  size_t s = spatial_rank(x);
  const Ints& ws = w.type.shape;
  int64_t g = p.groups, cin = ws[0], cout_g = ws[1];
  Ints grouped{g, cin / g, cout_g}, swapped{cin / g, g * cout_g}, perm{1, 0, 2}, flip;
  for (size_t i = 0; i < s; ++i) {
    grouped.push_back(ws[i + 2]);
    swapped.push_back(ws[i + 2]);
    perm.push_back(static_cast<int64_t>(i + 3));
    flip.push_back(static_cast<int64_t>(i + 2));
  }
  Value k = b.reshape(b.transpose(b.reshape(w, grouped), perm), swapped);
  k = b.emit("stablehlo.reverse", {k}, "dimensions = " + hlo::i64_array(flip), k.type);
  Window win{Ints(s, 1), Ints(s), Ints(s), p.stride, p.dilation};
  for (size_t i = 0; i < s; ++i) {
    int64_t span = p.dilation[i] * (ws[i + 2] - 1);
    win.pad_lo[i] = span - p.padding[i];
    win.pad_hi[i] = out.shape[i + 2] - 1 - p.stride[i] * (x.type.shape[i + 2] - 1) + p.padding[i];
  }
  std::string dims = spec("b", "f", s) + "x" + spec("i", "o", s) + "->" + spec("b", "f", s);
  return convolution(b, x, k, dims, win, g, 1, out);
}

// The weight gradient of y = conv(x, w): for each (out, in) channel pair, the
// correlation of x with dy, so x's channels are the batch and its batch the features.
Value conv_weight_grad(hlo::Builder& b, const Value& dy, const Value& x, const ConvParams& p,
                       const hlo::TensorType& wtype) {
  size_t s = spatial_rank(x);
  Window win{p.dilation, p.padding, Ints(s), Ints(s, 1), p.stride};
  for (size_t i = 0; i < s; ++i) {
    int64_t k = wtype.shape[i + 2], in = x.type.shape[i + 2], o = dy.type.shape[i + 2];
    int64_t reach = o > 0 ? 1 + p.stride[i] * (o - 1) : 0;
    win.pad_hi[i] = reach - in + p.dilation[i] * (k - 1) - p.padding[i];
  }
  std::string dims = spec("f", "b", s) + "x" + spec("i", "o", s) + "->" + spec("f", "b", s);
  return convolution(b, x, dy, dims, win, 1, p.groups, wtype);
}

V lower_convolution(Node& n) {
  hlo::Builder& b = n.b;
  const hlo::TensorType& out = n.out();
  Value x = b.convert(n.in(0), out.dtype), w = b.convert(n.in(1), out.dtype);
  ConvParams p = params(n, 3);
  Value y = n.flag(6) ? conv_transposed(b, x, w, p, out) : conv_forward(b, x, w, p, out);
  if (!n.has(2)) return {y};
  Value bias = b.convert(n.in(2), out.dtype);
  return {b.binary("add", y, b.broadcast_in_dim(bias, out.shape, {1}))};
}

V lower_convolution_backward(Node& n) {
  hlo::Builder& b = n.b;
  const Value &dy = n.in(0), &x = n.in(1), &w = n.in(2);
  ConvParams p = params(n, 3);
  bool transposed = n.flag(6);
  const Ints& mask = n.ints(9);
  // A masked-off gradient is undefined; its placeholder is dropped by the caller.
  auto grad = [&](size_t i, const std::function<Value(const hlo::TensorType&)>& make) {
    return mask[i] ? make(n.out(i)) : b.full(0, n.out(i));
  };
  Value input_grad = grad(0, [&](const hlo::TensorType& t) {
    Value g = b.convert(dy, t.dtype), k = b.convert(w, t.dtype);
    return transposed ? conv_forward(b, g, k, p, t) : conv_transposed(b, g, k, p, t);
  });
  Value weight_grad = grad(1, [&](const hlo::TensorType& t) {
    Value g = b.convert(dy, t.dtype), in = b.convert(x, t.dtype);
    // A transposed convolution is the input gradient of a plain one with the roles of
    // input and output swapped, so its weight gradient swaps them too.
    return transposed ? conv_weight_grad(b, in, g, p, t) : conv_weight_grad(b, g, in, p, t);
  });
  Value bias_grad = grad(2, [&](const hlo::TensorType& t) {
    Ints dims{0};
    for (int64_t d = 2; d < dy.type.rank(); ++d) dims.push_back(d);
    return lower_sum(b, dy, dims, false, t.dtype);
  });
  return {input_grad, weight_grad, bias_grad};
}

}  // namespace

TORCH_TPU_LOWERING(convolution, {"convolution_overrideable", "convolution_overrideable.out"},
                   lower_convolution);
TORCH_TPU_LOWERING(convolution_backward,
                   {"convolution_backward_overrideable", "convolution_backward_overrideable.out"},
                   lower_convolution_backward);

// Compiled graphs see the ops PyTorch routes to the *_overrideable ones in eager mode.
// convolution takes the same arguments; convolution_backward has bias_sizes (argument 3)
// besides, which the bias gradient's shape in the output already gives.
TORCH_TPU_GRAPH_LOWERING(convolution_graph, {"convolution"}, lower_convolution);
TORCH_TPU_GRAPH_LOWERING(convolution_backward_graph, {"convolution_backward"}, [](Node& n) {
  n.args.erase(n.args.begin() + 3);
  return lower_convolution_backward(n);
});

}  // namespace torch_tpu::ops
