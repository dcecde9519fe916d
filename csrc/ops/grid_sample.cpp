// grid_sampler_2d / grid_sampler_3d (torch.nn.functional.grid_sample): every output
// position reads the input at the point its grid entry names (x, y[, z] in [-1, 1]),
// interpolated bilinearly, by the nearest element or bicubically (2-d), with zeros, border
// or reflection padding. One program: the source coordinates are computed from the grid
// on the device, each interpolation tap is one gather of C-long rows, and the taps are
// summed with their weights.
//
// The formulas are CPU's: the 2-d kernel is vectorized and unnormalizes as
// (g + 1) * (size / 2) - 0.5 and reflects with a truncated division; the 3-d kernel is
// scalar and unnormalizes as ((g + 1) * size - 1) / 2 and reflects with fmod. Each dim
// follows its own kernel. Half types compute in float32 and round once, at the end, as
// CUDA's kernel does with its opmath type: rounding each step in the half type (what
// CPU does, and differently with and without native f16 arithmetic) moves a source
// coordinate by up to size * eps pixels, enough for nearest to pick another pixel.
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/indexing.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::Value;
using V = std::vector<Value>;
using Ints = std::vector<int64_t>;

enum class Interp { Bilinear = 0, Nearest = 1, Bicubic = 2 };
enum class Padding { Zeros = 0, Border = 1, Reflection = 2 };

// How one spatial dim of the input maps grid values to source coordinates.
struct Axis {
  Math m;
  int64_t size;
  bool align;
  bool vectorized;  // the 2-d kernel's formulas, else the 3-d kernel's
  Padding padding;

  Value k(double v, const Value& like) const { return m.k(v, like); }

  Value unnormalize(const Value& g) const {
    Value one = k(1, g);
    if (vectorized) {
      if (align) return m.mul(m.add(g, one), k(static_cast<double>(size - 1) / 2, g));
      return m.sub(m.mul(m.add(g, one), k(static_cast<double>(size) / 2, g)), k(0.5, g));
    }
    if (align) return m.mul(m.div(m.add(g, one), k(2, g)), k(static_cast<double>(size - 1), g));
    return m.div(m.sub(m.mul(m.add(g, one), k(static_cast<double>(size), g)), one), k(2, g));
  }

  // Into [0, size - 1]; NaN goes to 0.
  Value clip(const Value& x) const {
    Value c = m.min(k(static_cast<double>(size - 1), x), m.max(k(0, x), x));
    return m.sel(m.is_nan(x), k(0, x), c);
  }

  Value reflect(const Value& x) const {
    if (vectorized) {
      if (align && size <= 1) return k(0, x);
      const double low = align ? 0 : -0.5;
      Value twice_span =
          k(align ? 2.0 * static_cast<double>(size - 1) : 2.0 * static_cast<double>(size), x);
      Value in = m.abs(align ? x : m.sub(x, k(low, x)));
      Value extra = m.sub(in, m.mul(m.trunc(m.div(in, twice_span)), twice_span));
      Value r = m.min(extra, m.sub(twice_span, extra));
      return align ? r : m.add(r, k(low, x));
    }
    const double twice_low = align ? 0 : -1;
    const double twice_high =
        align ? 2.0 * static_cast<double>(size - 1) : 2.0 * static_cast<double>(size) - 1;
    if (twice_low == twice_high) return k(0, x);
    Value lo = k(twice_low / 2, x), span = k((twice_high - twice_low) / 2, x);
    Value in = m.abs(m.sub(x, lo));
    Value extra = m.b.binary(Binary::Remainder, in, span);
    Value flips = m.floor(m.div(in, span));
    Value even = m.eq(m.b.binary(Binary::Remainder, flips, k(2, x)), k(0, x));
    return m.sel(even, m.add(extra, lo), m.add(m.sub(span, extra), lo));
  }

  // The padding mode applied to a source coordinate.
  Value pad(const Value& x) const {
    switch (padding) {
      case Padding::Zeros: return x;
      case Padding::Border: return clip(x);
      case Padding::Reflection: return clip(reflect(x));
    }
    return x;
  }

  Value source(const Value& g) const { return pad(unnormalize(g)); }
};

// Reads the input at integer coordinates (one float value per spatial dim, [N, *out]):
// [N, *out, C] rows, zero where a coordinate is outside the input.
struct Reader {
  hlo::Builder& b;
  Value rows;  // [N * prod(in), C]
  Ints in;     // spatial sizes
  Ints lead;   // [N, *out]

  Value read(const std::vector<Value>& coords) const {
    Math m{b};
    hlo::TensorType it{DType::S64, lead};
    Value linear = b.iota(it, 0);  // n
    Value inside = b.full(1, {DType::Pred, lead});
    for (size_t d = 0; d < in.size(); ++d) {
      Value i = b.convert(coords[d], DType::S64);
      inside = m.and_(
          inside, m.and_(m.ge(i, b.full(0, it)), m.lt(i, b.full(static_cast<double>(in[d]), it))));
      linear = m.add(m.mul(linear, b.full(static_cast<double>(in[d]), it)), i);
    }
    linear = m.sel(inside, linear, b.full(0, it));
    Value picked = select_along(b, rows, 0, linear);
    const int64_t c = rows.type.shape[1];
    Ints shape = lead;
    shape.push_back(c);
    picked = b.reshape(picked, shape);
    Ints dims;
    for (size_t d = 0; d < lead.size(); ++d) dims.push_back(static_cast<int64_t>(d));
    Value mask = b.broadcast_in_dim(inside, shape, dims);
    return m.sel(mask, picked, b.full(0, picked.type));
  }
};

// `w` ([N, *out]) broadcast over the channel dim of `v` ([N, *out, C]).
Value weigh(hlo::Builder& b, const Value& v, const Value& w) {
  Ints dims;
  for (int64_t d = 0; d < w.type.rank(); ++d) dims.push_back(d);
  return b.binary(Binary::Multiply, v, b.broadcast_in_dim(w, v.type.shape, dims));
}

// PyTorch's cubic convolution coefficients (A = -0.75) at distances t + 1, t, 1 - t,
// 2 - t, as its vectorized kernel writes them.
std::vector<Value> cubic_coefficients(const Math& m, const Value& t) {
  auto k = [&](double v) { return m.k(v, t); };
  const double a = -0.75;
  auto far = [&](const Value& x) {
    return m.sub(m.mul(m.add(m.mul(m.sub(m.mul(k(a), x), k(5 * a)), x), k(8 * a)), x), k(4 * a));
  };
  auto near = [&](const Value& x) {
    return m.add(m.mul(m.mul(m.sub(m.mul(k(a + 2), x), k(a + 3)), x), x), k(1));
  };
  return {far(m.add(t, k(1))), near(t), near(m.sub(k(1), t)), far(m.sub(k(2), t))};
}

LowerFn grid_sampler(int64_t spatial) {
  return [spatial](Node& n) {
    hlo::Builder& b = n.b;
    Math m{b};
    auto widen = [&](const Value& v) {
      return v.type.dtype == DType::F16 || v.type.dtype == DType::BF16 ? b.convert(v, DType::F32)
                                                                       : v;
    };
    const Value x = widen(n.in(0));
    const Value grid = widen(n.in(1));
    const auto interp = static_cast<Interp>(n.i64(2));
    const auto padding = static_cast<Padding>(n.i64(3));
    const bool align = n.flag(4);
    const hlo::TensorType& out = n.out();
    if (out.numel() == 0) return V{b.full(0, out)};
    if (interp == Interp::Bicubic && spatial != 2)
      throw std::invalid_argument("grid_sampler_3d: bicubic interpolation needs a 4-d input");
    const int64_t batch = x.type.shape[0], channels = x.type.shape[1];
    Ints in(x.type.shape.begin() + 2, x.type.shape.end());
    Ints lead(grid.type.shape.begin(), grid.type.shape.end() - 1);  // [N, *out]
    int64_t points = 1;
    for (int64_t s : in) points *= s;

    // The input as rows of C: [N * prod(in), C].
    Ints perm{0};
    for (int64_t d = 0; d < spatial; ++d) perm.push_back(2 + d);
    perm.push_back(1);
    Reader reader{b, b.reshape(b.transpose(x, perm), {batch * points, channels}), in, lead};

    // Grid component j (x, y, z) addresses spatial dim spatial - 1 - j.
    std::vector<Value> g(spatial);
    std::vector<Axis> axes;
    for (int64_t d = 0; d < spatial; ++d) {
      const int64_t j = spatial - 1 - d;
      Ints start(grid.type.rank(), 0), limit = grid.type.shape, strides(grid.type.rank(), 1);
      start.back() = j;
      limit.back() = j + 1;
      g[d] = b.reshape(b.slice(grid, start, limit, strides), lead);
      axes.push_back(Axis{m, in[d], align, spatial == 2, padding});
    }

    Value acc;
    auto add = [&](const Value& term) { acc = acc.id < 0 ? term : m.add(acc, term); };
    if (interp == Interp::Nearest) {
      std::vector<Value> c;
      for (int64_t d = 0; d < spatial; ++d)
        c.push_back(b.unary(Unary::RoundNearestEven, axes[d].source(g[d])));
      acc = reader.read(c);
    } else if (interp == Interp::Bilinear) {
      // Corner k takes the floor or the next element in each dim (bit d of k, dims in
      // x, y, z order as CPU weights them), weighted by the distance to the other.
      std::vector<Value> lo(spatial), hi(spatial), w_lo(spatial), w_hi(spatial);
      for (int64_t d = 0; d < spatial; ++d) {
        Value s = axes[d].source(g[d]);
        lo[d] = m.floor(s);
        hi[d] = m.add(lo[d], m.k(1, s));
        if (spatial == 2) {  // w = x - x0, e = 1 - w
          w_hi[d] = m.sub(s, lo[d]);
          w_lo[d] = m.sub(m.k(1, s), w_hi[d]);
        } else {  // x1 - x, x - x0
          w_lo[d] = m.sub(hi[d], s);
          w_hi[d] = m.sub(s, lo[d]);
        }
      }
      // CPU's corner order: nw, ne, sw, se (then the same below for 3-d); the weight is
      // the product in x, y, z order in 3-d, and (y weight) * (x weight) in 2-d.
      for (int64_t k = 0; k < (int64_t{1} << spatial); ++k) {
        std::vector<Value> c(spatial);
        std::vector<Value> w(spatial);
        for (int64_t d = 0; d < spatial; ++d) {
          // bit 0 of k picks x (the last dim), bit 1 y, bit 2 z.
          const bool up = (k >> (spatial - 1 - d)) & 1;
          c[d] = up ? hi[d] : lo[d];
          w[d] = up ? w_hi[d] : w_lo[d];
        }
        Value weight;
        if (spatial == 2) {
          weight = m.mul(w[0], w[1]);
        } else {
          weight = m.mul(m.mul(w[2], w[1]), w[0]);
        }
        add(weigh(b, reader.read(c), weight));
      }
    } else {  // bicubic, 2-d
      std::vector<Value> s(2), i0(2);
      std::vector<std::vector<Value>> coeff(2);
      for (int64_t d = 0; d < 2; ++d) {
        s[d] = axes[d].unnormalize(g[d]);
        i0[d] = m.floor(s[d]);
        coeff[d] = cubic_coefficients(m, m.sub(s[d], i0[d]));
      }
      auto tap = [&](int64_t d, int64_t k) {
        Value c = m.add(i0[d], m.k(static_cast<double>(k - 1), i0[d]));
        return m.trunc(axes[d].pad(c));
      };
      Value total;
      for (int64_t i = 0; i < 4; ++i) {
        Value row;
        for (int64_t k = 0; k < 4; ++k) {
          Value term = weigh(b, reader.read({tap(0, i), tap(1, k)}), coeff[1][k]);
          row = row.id < 0 ? term : m.add(row, term);
        }
        Value term = weigh(b, row, coeff[0][i]);
        total = total.id < 0 ? term : m.add(total, term);
      }
      acc = total;
    }
    // [N, *out, C] -> [N, C, *out]
    Ints back{0, spatial + 1};
    for (int64_t d = 0; d < spatial; ++d) back.push_back(1 + d);
    return V{b.convert(b.transpose(acc, back), out.dtype)};
  };
}

}  // namespace

TORCH_TPU_LOWERING(grid_sampler_2d, {"grid_sampler_2d", "grid_sampler_2d.out"}, grid_sampler(2));
TORCH_TPU_LOWERING(grid_sampler_3d, {"grid_sampler_3d", "grid_sampler_3d.out"}, grid_sampler(3));

}  // namespace torch_tpu::ops
