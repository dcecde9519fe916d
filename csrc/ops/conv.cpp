// Convolutions (1d/2d/3d, strided, padded, dilated, grouped, transposed) and their
// gradients, all as stablehlo.convolution. PyTorch sends every convolution on a backend
// it does not know to convolution_overrideable / convolution_backward_overrideable.
//
// The gradients follow from the convolution's bilinearity: the input gradient of a
// convolution is a transposed convolution of the output gradient with the same weight
// (and the other way round), and the weight gradient is a convolution of the input
// with the output gradient in which the input's channels play the batch.
#include <functional>

#include "ops/common.h"
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
    padding +=
        (i ? ", [" : "[") + std::to_string(w.pad_lo[i]) + ", " + std::to_string(w.pad_hi[i]) + "]";
  padding += "]> : tensor<" + std::to_string(w.pad_lo.size()) + "x2xi64>";
  std::string attrs =
      "batch_group_count = " + std::to_string(batch_groups) +
      " : i64, dimension_numbers = #stablehlo.conv<" + dims +
      ">, feature_group_count = " + std::to_string(feature_groups) +
      " : i64, lhs_dilation = " + hlo::i64_array(w.lhs_dilation) + ", padding = " + padding +
      ", rhs_dilation = " + hlo::i64_array(w.rhs_dilation) +
      ", window_strides = " + hlo::i64_array(w.strides) + b.precision_config(lhs, rhs);
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
  return {b.binary(Binary::Add, y, b.broadcast_in_dim(bias, out.shape, {1}))};
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

// ---- im2col / col2im (F.unfold / F.fold) ----

struct Patches {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Patches patches(const Node& n, size_t first) {
  const Ints &k = n.ints(first), &d = n.ints(first + 1), &p = n.ints(first + 2),
             &s = n.ints(first + 3);
  return {k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
}

// im2col(self [N?, C, H, W], kernel_size, dilation, padding, stride): [N?, C*kh*kw, L],
// column c*kh*kw + i*kw + j holding the input at kernel offset (i, j) of each window.
V lower_im2col(Node& n) {
  hlo::Builder& b = n.b;
  const hlo::TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  Value x = n.in(0);
  if (x.type.rank() == 3) x = b.reshape(x, {1, x.type.shape[0], x.type.shape[1], x.type.shape[2]});
  const Patches p = patches(n, 1);
  const int64_t batch = x.type.shape[0], c = x.type.shape[1];
  const int64_t h = x.type.shape[2] + 2 * p.ph, w = x.type.shape[3] + 2 * p.pw;
  const int64_t oh = (h - (p.dh * (p.kh - 1) + 1)) / p.sh + 1,
                ow = (w - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  Value padded =
      b.pad(x, b.constant(0, x.type.dtype), {0, 0, p.ph, p.pw}, {0, 0, p.ph, p.pw}, {0, 0, 0, 0});
  V blocks;
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j) {
      Value s = b.slice(padded, {0, 0, i * p.dh, j * p.dw},
                        {batch, c, i * p.dh + (oh - 1) * p.sh + 1, j * p.dw + (ow - 1) * p.sw + 1},
                        {1, 1, p.sh, p.sw});
      blocks.push_back(b.reshape(s, {batch, c, 1, oh * ow}));
    }
  Value cols = blocks.size() == 1 ? blocks[0] : b.concatenate(blocks, 2);
  return {b.reshape(cols, out.shape)};
}

// col2im(self [N?, C*kh*kw, L], output_size, kernel_size, dilation, padding, stride): each
// column's values added back at their window positions (F.fold), accumulated in f32 for
// bf16/f16. Each kernel offset's block lands by one interior-padded pad.
V lower_col2im(Node& n) {
  hlo::Builder& b = n.b;
  const hlo::TensorType& out = n.out();
  if (out.numel() == 0) return {b.full(0, out)};
  const Ints& size = n.ints(1);
  const Patches p = patches(n, 2);
  const hlo::DType acc = accumulator(out.dtype);
  Value x = b.convert(n.in(0), acc);
  if (x.type.rank() == 2) x = b.reshape(x, {1, x.type.shape[0], x.type.shape[1]});
  const int64_t batch = x.type.shape[0], c = x.type.shape[1] / (p.kh * p.kw);
  const int64_t h = size[0] + 2 * p.ph, w = size[1] + 2 * p.pw;
  const int64_t oh = (h - (p.dh * (p.kh - 1) + 1)) / p.sh + 1,
                ow = (w - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  Value cols = b.reshape(x, {batch, c, p.kh * p.kw, oh, ow});
  Value zero = b.constant(0, acc);
  Value sum = b.full(0, {acc, {batch, c, h, w}});
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j) {
      const int64_t k = i * p.kw + j;
      Value block =
          b.reshape(b.slice(cols, {0, 0, k, 0, 0}, {batch, c, k + 1, oh, ow}, {1, 1, 1, 1, 1}),
                    {batch, c, oh, ow});
      const int64_t top = i * p.dh, left = j * p.dw;
      const int64_t bottom = h - (top + (oh - 1) * p.sh + 1),
                    right = w - (left + (ow - 1) * p.sw + 1);
      sum = b.binary(
          Binary::Add, sum,
          b.pad(block, zero, {0, 0, top, left}, {0, 0, bottom, right}, {0, 0, p.sh - 1, p.sw - 1}));
    }
  Value r =
      b.slice(sum, {0, 0, p.ph, p.pw}, {batch, c, p.ph + size[0], p.pw + size[1]}, {1, 1, 1, 1});
  return {b.reshape(b.convert(r, out.dtype), out.shape)};
}

}  // namespace

TORCH_TPU_LOWERING(convolution, {"convolution_overrideable", "convolution_overrideable.out"},
                   lower_convolution);
TORCH_TPU_LOWERING(convolution_backward,
                   {"convolution_backward_overrideable", "convolution_backward_overrideable.out"},
                   lower_convolution_backward);
TORCH_TPU_LOWERING(im2col, {"im2col", "im2col.out"}, lower_im2col);
TORCH_TPU_LOWERING(col2im, {"col2im", "col2im.out"}, lower_col2im);

// Compiled graphs see the ops PyTorch routes to the *_overrideable ones in eager mode.
// convolution takes the same arguments; convolution_backward has bias_sizes (argument 3)
// besides, which the bias gradient's shape in the output already gives.
TORCH_TPU_GRAPH_LOWERING(convolution_graph, {"convolution"}, lower_convolution);
TORCH_TPU_GRAPH_LOWERING(convolution_backward_graph, {"convolution_backward"}, [](Node& n) {
  n.args.erase(n.args.begin() + 3);
  return lower_convolution_backward(n);
});

}  // namespace torch_tpu::ops
