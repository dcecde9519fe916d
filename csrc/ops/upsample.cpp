// Nearest and (bi/tri)linear upsampling with gradients. Source positions and weights
// depend only on the sizes and scales, so they are computed here with PyTorch's own
// float arithmetic and enter the program as constants: the picked elements are exactly
// the CPU kernel's. Linear interpolation is separable and runs one dim at a time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "ops/pooling.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::Value;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

std::optional<double> opt_f64(const Node& n, size_t i) {
  if (std::holds_alternative<std::monostate>(n.args.at(i).attr)) return std::nullopt;
  return n.f64(i);
}

// ---- nearest ----

template <typename T>
T scale_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
}

Ints nearest_index(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  Ints index;
  float s = scale_value<float>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) {
      i = static_cast<int64_t>(std::floor(static_cast<float>((static_cast<double>(o) + 0.5) * s)));
    } else if (out == in) {
      i = o;
    } else if (out == 2 * in) {
      i = o >> 1;
    } else {
      i = static_cast<int64_t>(std::floor(static_cast<float>(o) * s));
    }
    index.push_back(std::min(i, in - 1));
  }
  return index;
}

struct Sizes {
  Ints in, out;
  std::vector<std::optional<double>> scales;
  int64_t lead;
};

// Forward schemas: (self, output_size, [align_corners,] scales...).
Sizes forward_sizes(const Node& n, size_t spatial, size_t first_scale) {
  Sizes s;
  const Value& x = n.in(0);
  s.lead = x.type.rank() - static_cast<int64_t>(spatial);
  s.in.assign(x.type.shape.begin() + s.lead, x.type.shape.end());
  s.out = n.ints(1);
  for (size_t j = 0; j < spatial; ++j) s.scales.push_back(opt_f64(n, first_scale + j));
  return s;
}

// Backward schemas: (grad_output, output_size, input_size, [align_corners,] scales...).
Sizes backward_sizes(const Node& n, size_t spatial, size_t first_scale) {
  Sizes s;
  const Ints& input = n.ints(2);
  s.lead = static_cast<int64_t>(input.size() - spatial);
  s.in.assign(input.begin() + s.lead, input.end());
  s.out = n.ints(1);
  for (size_t j = 0; j < spatial; ++j) s.scales.push_back(opt_f64(n, first_scale + j));
  return s;
}

LowerFn nearest(size_t spatial, bool exact) {
  return [spatial, exact](Node& n) {
    Sizes s = forward_sizes(n, spatial, 2);
    Value x = n.in(0);
    for (size_t j = 0; j < spatial; ++j)
      x = take_along(n.b, x, s.lead + j, nearest_index(s.in[j], s.out[j], s.scales[j], exact));
    return V{x};
  };
}

LowerFn nearest_backward(size_t spatial, bool exact) {
  return [spatial, exact](Node& n) {
    Sizes s = backward_sizes(n, spatial, 3);
    Value g = n.b.convert(n.in(0), math_dtype(n.out().dtype));
    for (size_t j = 0; j < spatial; ++j)
      g = scatter_add_along(n.b, g, s.lead + j, nearest_index(s.in[j], s.out[j], s.scales[j], exact),
                            s.in[j]);
    return V{g};
  };
}

// ---- linear ----

struct Taps {
  Ints index0, index1;
  std::vector<double> weight0, weight1;
};

// PyTorch's source positions and weights for linear interpolation, in `T` (its opmath).
template <typename T>
Taps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps taps;
  T ratio = align_corners ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                          : scale_value<T>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i0 = o, i1 = o;
    T l0 = 1, l1 = 0;
    if (in != out) {
      T src = align_corners ? ratio * static_cast<T>(o)
                            : ratio * (static_cast<T>(o) + static_cast<T>(0.5)) - static_cast<T>(0.5);
      if (!align_corners && src < 0) src = 0;
      i0 = std::min(static_cast<int64_t>(std::floor(static_cast<float>(src))), in - 1);
      l1 = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
      i1 = i0 + (i0 < in - 1 ? 1 : 0);
      l0 = T(1) - l1;
    }
    taps.index0.push_back(i0), taps.index1.push_back(i1);
    taps.weight0.push_back(l0), taps.weight1.push_back(l1);
  }
  return taps;
}

Taps taps_for(hlo::DType dtype, int64_t in, int64_t out, bool align_corners,
              std::optional<double> scale) {
  return dtype == hlo::DType::F64 ? linear_taps<double>(in, out, align_corners, scale)
                                  : linear_taps<float>(in, out, align_corners, scale);
}

Value weights(hlo::Builder& b, const std::vector<double>& w, hlo::DType dtype) {
  hlo::TensorType t{dtype, {static_cast<int64_t>(w.size())}};
  std::string text = "dense<[";
  for (size_t i = 0; i < w.size(); ++i) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17e", w[i]);
    text += (i ? ", " : "") + std::string(buf);
  }
  return b.emit("stablehlo.constant", {}, "value = " + text + "]> : " + t.str(), t);
}

// x scaled along `dim` by the per-position weights `w`.
Value scale_along(hlo::Builder& b, const Value& x, int64_t dim, const std::vector<double>& w) {
  return b.binary("multiply", x, b.broadcast_in_dim(weights(b, w, x.type.dtype), x.type.shape, {dim}));
}

LowerFn linear(size_t spatial) {
  return [spatial](Node& n) {
    hlo::Builder& b = n.b;
    Sizes s = forward_sizes(n, spatial, 3);
    Value x = b.convert(n.in(0), math_dtype(n.out().dtype));
    for (size_t j = 0; j < spatial; ++j) {
      int64_t dim = s.lead + static_cast<int64_t>(j);
      Taps t = taps_for(x.type.dtype, s.in[j], s.out[j], n.flag(2), s.scales[j]);
      x = b.binary("add", scale_along(b, take_along(b, x, dim, t.index0), dim, t.weight0),
                   scale_along(b, take_along(b, x, dim, t.index1), dim, t.weight1));
    }
    return V{x};
  };
}

LowerFn linear_backward(size_t spatial) {
  return [spatial](Node& n) {
    hlo::Builder& b = n.b;
    Sizes s = backward_sizes(n, spatial, 4);
    Value g = b.convert(n.in(0), math_dtype(n.out().dtype));
    for (size_t j = 0; j < spatial; ++j) {
      int64_t dim = s.lead + static_cast<int64_t>(j);
      Taps t = taps_for(g.type.dtype, s.in[j], s.out[j], n.flag(3), s.scales[j]);
      g = b.binary("add", scatter_add_along(b, scale_along(b, g, dim, t.weight0), dim, t.index0, s.in[j]),
                   scatter_add_along(b, scale_along(b, g, dim, t.weight1), dim, t.index1, s.in[j]));
    }
    return V{g};
  };
}

}  // namespace

TORCH_TPU_LOWERING(upsample_nearest1d, {"upsample_nearest1d", "upsample_nearest1d.out"}, nearest(1, false));
TORCH_TPU_LOWERING(upsample_nearest2d, {"upsample_nearest2d", "upsample_nearest2d.out"}, nearest(2, false));
TORCH_TPU_LOWERING(upsample_nearest3d, {"upsample_nearest3d", "upsample_nearest3d.out"}, nearest(3, false));
TORCH_TPU_LOWERING(upsample_nearest_exact1d, {"_upsample_nearest_exact1d", "_upsample_nearest_exact1d.out"},
                   nearest(1, true));
TORCH_TPU_LOWERING(upsample_nearest_exact2d, {"_upsample_nearest_exact2d", "_upsample_nearest_exact2d.out"},
                   nearest(2, true));
TORCH_TPU_LOWERING(upsample_nearest_exact3d, {"_upsample_nearest_exact3d", "_upsample_nearest_exact3d.out"},
                   nearest(3, true));
TORCH_TPU_LOWERING(upsample_nearest1d_backward,
                   {"upsample_nearest1d_backward", "upsample_nearest1d_backward.grad_input"},
                   nearest_backward(1, false));
TORCH_TPU_LOWERING(upsample_nearest2d_backward,
                   {"upsample_nearest2d_backward", "upsample_nearest2d_backward.grad_input"},
                   nearest_backward(2, false));
TORCH_TPU_LOWERING(upsample_nearest3d_backward,
                   {"upsample_nearest3d_backward", "upsample_nearest3d_backward.grad_input"},
                   nearest_backward(3, false));
TORCH_TPU_LOWERING(upsample_nearest_exact1d_backward,
                   {"_upsample_nearest_exact1d_backward", "_upsample_nearest_exact1d_backward.grad_input"},
                   nearest_backward(1, true));
TORCH_TPU_LOWERING(upsample_nearest_exact2d_backward,
                   {"_upsample_nearest_exact2d_backward", "_upsample_nearest_exact2d_backward.grad_input"},
                   nearest_backward(2, true));
TORCH_TPU_LOWERING(upsample_nearest_exact3d_backward,
                   {"_upsample_nearest_exact3d_backward", "_upsample_nearest_exact3d_backward.grad_input"},
                   nearest_backward(3, true));
TORCH_TPU_LOWERING(upsample_linear1d, {"upsample_linear1d", "upsample_linear1d.out"}, linear(1));
TORCH_TPU_LOWERING(upsample_bilinear2d, {"upsample_bilinear2d", "upsample_bilinear2d.out"}, linear(2));
TORCH_TPU_LOWERING(upsample_trilinear3d, {"upsample_trilinear3d", "upsample_trilinear3d.out"}, linear(3));
TORCH_TPU_LOWERING(upsample_linear1d_backward,
                   {"upsample_linear1d_backward", "upsample_linear1d_backward.grad_input"},
                   linear_backward(1));
TORCH_TPU_LOWERING(upsample_bilinear2d_backward,
                   {"upsample_bilinear2d_backward", "upsample_bilinear2d_backward.grad_input"},
                   linear_backward(2));
TORCH_TPU_LOWERING(upsample_trilinear3d_backward,
                   {"upsample_trilinear3d_backward", "upsample_trilinear3d_backward.grad_input"},
                   linear_backward(3));

}  // namespace torch_tpu::ops
