// Nearest, (bi/tri)linear, bicubic and antialiased upsampling with gradients. Source
// positions and weights depend only on the sizes and scales, so they are computed here with
// PyTorch's own float arithmetic and enter the program as constants: the picked elements are
// exactly the CPU kernel's. Interpolation is separable and runs one dim at a time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "ops/common.h"
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
  return scale && *scale > 0 ? static_cast<T>(1.0 / *scale)
                             : static_cast<T>(in) / static_cast<T>(out);
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
      g = scatter_add_along(n.b, g, s.lead + j,
                            nearest_index(s.in[j], s.out[j], s.scales[j], exact), s.in[j]);
    return V{g};
  };
}

// ---- linear, cubic, antialiased ----

// Interpolation along one dim: output o is the sum over taps k of
// weight[k][o] * x[index[k][o]].
struct Taps {
  std::vector<Ints> index;
  std::vector<std::vector<double>> weight;
  explicit Taps(size_t count, int64_t out)
      : index(count, Ints(out, 0)), weight(count, std::vector<double>(out, 0)) {}
};

template <typename T>
T source_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  return align_corners ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                       : scale_value<T>(scale, in, out);
}

// PyTorch's source position of output `o`, floored into [.., in - 1], and the fraction
// past it clamped to [0, 1] (its guard_index_and_lambda). Linear interpolation clamps
// negative positions to 0 first; cubic does not.
template <typename T>
std::pair<int64_t, T> source_position(T ratio, int64_t o, int64_t in, bool align_corners,
                                      bool cubic) {
  T src = align_corners ? ratio * static_cast<T>(o)
                        : ratio * (static_cast<T>(o) + static_cast<T>(0.5)) - static_cast<T>(0.5);
  if (!align_corners && !cubic && src < 0) src = 0;
  int64_t i0 = std::min(static_cast<int64_t>(std::floor(static_cast<float>(src))), in - 1);
  T lambda = std::min(std::max(src - static_cast<T>(i0), T(0)), T(1));
  return {i0, lambda};
}

// PyTorch's source positions and weights in `T` (its opmath), as its CPU kernels compute them.
template <typename T>
Taps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps taps(2, out);
  T ratio = source_scale<T>(in, out, align_corners, scale);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i0 = o;
    T l1 = 0;
    if (in != out) std::tie(i0, l1) = source_position<T>(ratio, o, in, align_corners, false);
    taps.index[0][o] = i0, taps.index[1][o] = i0 + (i0 < in - 1 ? 1 : 0);
    taps.weight[0][o] = T(1) - l1, taps.weight[1][o] = l1;
  }
  return taps;
}

// Keys' cubic convolution kernel with a = -0.75 (PyTorch's bicubic), at distances t + 1,
// t, 1 - t, 2 - t from the four taps; positions past the border repeat the edge.
template <typename T>
Taps cubic_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  const T a = T(-0.75);
  auto near = [a](T x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
  auto far = [a](T x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
  Taps taps(4, out);
  T ratio = source_scale<T>(in, out, align_corners, scale);
  for (int64_t o = 0; o < out; ++o) {
    auto [i0, t] = source_position<T>(ratio, o, in, align_corners, true);
    const T w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      taps.index[k][o] = std::clamp<int64_t>(i0 - 1 + k, 0, in - 1);
      taps.weight[k][o] = w[k];
    }
  }
  return taps;
}

// Antialiased interpolation (PIL's resampling, PyTorch's antialias=True): when shrinking,
// the filter (triangle for bilinear, Keys a = -0.5 for bicubic) is stretched by the scale
// and every input it covers contributes, with weights normalised to sum to 1.
template <typename T>
Taps antialiased_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                      bool cubic) {
  auto filter = [cubic](T x) -> T {
    x = std::abs(x);
    if (!cubic) return x < 1 ? 1 - x : 0;
    const T a = T(-0.5);
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
  };
  const T size = cubic ? 4 : 2;
  T ratio = source_scale<T>(in, out, align_corners, scale);
  T support = ratio >= 1 ? size * T(0.5) * ratio : size * T(0.5);
  T invscale = ratio >= 1 ? 1 / ratio : T(1);
  Taps taps(static_cast<size_t>(std::ceil(support)) * 2 + 1, out);
  for (int64_t o = 0; o < out; ++o) {
    T center = ratio * (static_cast<T>(o) + T(0.5));
    int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + T(0.5)), 0);
    int64_t count = std::min<int64_t>(static_cast<int64_t>(center + support + T(0.5)), in) - lo;
    std::vector<T> w;
    T total = 0;
    for (int64_t j = 0; j < count; ++j) {
      w.push_back(filter((static_cast<T>(j + lo) - center + T(0.5)) * invscale));
      total += w.back();
    }
    for (int64_t j = 0; j < count && j < static_cast<int64_t>(taps.index.size()); ++j) {
      taps.index[j][o] = lo + j;
      taps.weight[j][o] = total != 0 ? w[j] / total : w[j];
    }
  }
  return taps;
}

enum class Mode { Linear, Cubic, LinearAA, CubicAA };

template <typename T>
Taps taps_in(Mode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  switch (mode) {
    case Mode::Linear: return linear_taps<T>(in, out, align_corners, scale);
    case Mode::Cubic: return cubic_taps<T>(in, out, align_corners, scale);
    case Mode::LinearAA: return antialiased_taps<T>(in, out, align_corners, scale, false);
    case Mode::CubicAA: return antialiased_taps<T>(in, out, align_corners, scale, true);
  }
  throw std::logic_error("unknown interpolation mode");
}

Taps taps_for(Mode mode, hlo::DType dtype, int64_t in, int64_t out, bool align_corners,
              std::optional<double> scale) {
  return dtype == hlo::DType::F64 ? taps_in<double>(mode, in, out, align_corners, scale)
                                  : taps_in<float>(mode, in, out, align_corners, scale);
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
  return b.binary(Binary::Multiply, x,
                  b.broadcast_in_dim(weights(b, w, x.type.dtype), x.type.shape, {dim}));
}

// Separable interpolation: one dim at a time, each a weighted sum of gathered taps.
LowerFn interpolate(size_t spatial, Mode mode) {
  return [spatial, mode](Node& n) {
    hlo::Builder& b = n.b;
    Sizes s = forward_sizes(n, spatial, 3);
    Value x = b.convert(n.in(0), math_dtype(n.out().dtype));
    for (size_t j = 0; j < spatial; ++j) {
      int64_t dim = s.lead + static_cast<int64_t>(j);
      Taps t = taps_for(mode, x.type.dtype, s.in[j], s.out[j], n.flag(2), s.scales[j]);
      std::optional<Value> sum;
      for (size_t k = 0; k < t.index.size(); ++k) {
        Value term = scale_along(b, take_along(b, x, dim, t.index[k]), dim, t.weight[k]);
        sum = sum ? b.binary(Binary::Add, *sum, term) : term;
      }
      x = *sum;
    }
    return V{x};
  };
}

// The transpose: each tap's weighted gradient added back at its source positions.
LowerFn interpolate_backward(size_t spatial, Mode mode) {
  return [spatial, mode](Node& n) {
    hlo::Builder& b = n.b;
    Sizes s = backward_sizes(n, spatial, 4);
    Value g = b.convert(n.in(0), math_dtype(n.out().dtype));
    for (size_t j = 0; j < spatial; ++j) {
      int64_t dim = s.lead + static_cast<int64_t>(j);
      Taps t = taps_for(mode, g.type.dtype, s.in[j], s.out[j], n.flag(3), s.scales[j]);
      std::optional<Value> sum;
      for (size_t k = 0; k < t.index.size(); ++k) {
        Value term =
            scatter_add_along(b, scale_along(b, g, dim, t.weight[k]), dim, t.index[k], s.in[j]);
        sum = sum ? b.binary(Binary::Add, *sum, term) : term;
      }
      g = *sum;
    }
    return V{g};
  };
}

}  // namespace

TORCH_TPU_LOWERING(upsample_nearest1d, {"upsample_nearest1d", "upsample_nearest1d.out"},
                   nearest(1, false));
TORCH_TPU_LOWERING(upsample_nearest2d, {"upsample_nearest2d", "upsample_nearest2d.out"},
                   nearest(2, false));
TORCH_TPU_LOWERING(upsample_nearest3d, {"upsample_nearest3d", "upsample_nearest3d.out"},
                   nearest(3, false));
TORCH_TPU_LOWERING(upsample_nearest_exact1d,
                   {"_upsample_nearest_exact1d", "_upsample_nearest_exact1d.out"},
                   nearest(1, true));
TORCH_TPU_LOWERING(upsample_nearest_exact2d,
                   {"_upsample_nearest_exact2d", "_upsample_nearest_exact2d.out"},
                   nearest(2, true));
TORCH_TPU_LOWERING(upsample_nearest_exact3d,
                   {"_upsample_nearest_exact3d", "_upsample_nearest_exact3d.out"},
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
                   {"_upsample_nearest_exact1d_backward",
                    "_upsample_nearest_exact1d_backward.grad_input"},
                   nearest_backward(1, true));
TORCH_TPU_LOWERING(upsample_nearest_exact2d_backward,
                   {"_upsample_nearest_exact2d_backward",
                    "_upsample_nearest_exact2d_backward.grad_input"},
                   nearest_backward(2, true));
TORCH_TPU_LOWERING(upsample_nearest_exact3d_backward,
                   {"_upsample_nearest_exact3d_backward",
                    "_upsample_nearest_exact3d_backward.grad_input"},
                   nearest_backward(3, true));
TORCH_TPU_LOWERING(upsample_linear1d, {"upsample_linear1d", "upsample_linear1d.out"},
                   interpolate(1, Mode::Linear));
TORCH_TPU_LOWERING(upsample_bilinear2d, {"upsample_bilinear2d", "upsample_bilinear2d.out"},
                   interpolate(2, Mode::Linear));
TORCH_TPU_LOWERING(upsample_trilinear3d, {"upsample_trilinear3d", "upsample_trilinear3d.out"},
                   interpolate(3, Mode::Linear));
TORCH_TPU_LOWERING(upsample_linear1d_backward,
                   {"upsample_linear1d_backward", "upsample_linear1d_backward.grad_input"},
                   interpolate_backward(1, Mode::Linear));
TORCH_TPU_LOWERING(upsample_bilinear2d_backward,
                   {"upsample_bilinear2d_backward", "upsample_bilinear2d_backward.grad_input"},
                   interpolate_backward(2, Mode::Linear));
TORCH_TPU_LOWERING(upsample_trilinear3d_backward,
                   {"upsample_trilinear3d_backward", "upsample_trilinear3d_backward.grad_input"},
                   interpolate_backward(3, Mode::Linear));
TORCH_TPU_LOWERING(upsample_bicubic2d, {"upsample_bicubic2d", "upsample_bicubic2d.out"},
                   interpolate(2, Mode::Cubic));
TORCH_TPU_LOWERING(upsample_bicubic2d_backward,
                   {"upsample_bicubic2d_backward", "upsample_bicubic2d_backward.grad_input"},
                   interpolate_backward(2, Mode::Cubic));
TORCH_TPU_LOWERING(upsample_bilinear2d_aa,
                   {"_upsample_bilinear2d_aa", "_upsample_bilinear2d_aa.out"},
                   interpolate(2, Mode::LinearAA));
TORCH_TPU_LOWERING(upsample_bilinear2d_aa_backward,
                   {"_upsample_bilinear2d_aa_backward",
                    "_upsample_bilinear2d_aa_backward.grad_input"},
                   interpolate_backward(2, Mode::LinearAA));
TORCH_TPU_LOWERING(upsample_bicubic2d_aa, {"_upsample_bicubic2d_aa", "_upsample_bicubic2d_aa.out"},
                   interpolate(2, Mode::CubicAA));
TORCH_TPU_LOWERING(upsample_bicubic2d_aa_backward,
                   {"_upsample_bicubic2d_aa_backward",
                    "_upsample_bicubic2d_aa_backward.grad_input"},
                   interpolate_backward(2, Mode::CubicAA));

}  // namespace torch_tpu::ops
