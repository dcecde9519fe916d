// Discrete Fourier transforms: the three ATen primitives every torch.fft function and
// stft reduce to (_fft_r2c, _fft_c2r, _fft_c2c), as stablehlo.fft along each transformed
// dim in turn.
//
// PyTorch's primitives are unnormalized in both directions and then scaled by
// `normalization` (0: none, 1: 1/sqrt(n), 2: 1/n, n the signal size). XLA's inverse
// transforms divide by n themselves, so an unnormalized inverse c2c is written as
// conj(fft(conj(x))), and c2r's one inverse real transform has its 1/n folded into the
// final scale.
#include <cmath>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/registry.h"

namespace torch_tpu::ops {

namespace {

using hlo::DType;
using hlo::TensorType;
using hlo::Value;
using V = std::vector<Value>;

enum class FftType { FFT, RFFT, IRFFT };

const char* fft_type_name(FftType t) {
  switch (t) {
    case FftType::FFT: return "FFT";
    case FftType::RFFT: return "RFFT";
    case FftType::IRFFT: return "IRFFT";
  }
  return "FFT";
}

int64_t wrap_dim(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

// One 1-d transform of `x` along `dim` (moved last and back). `length` is the signal
// length: x's size along dim, except for IRFFT, whose input holds length / 2 + 1 bins.
Value fft_along(hlo::Builder& b, const Value& x, int64_t dim, FftType type, int64_t length) {
  const int64_t rank = x.type.rank();
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  std::vector<int64_t> back(rank);
  for (int64_t i = 0; i < rank; ++i) back[perm[i]] = i;
  Value moved = b.transpose(x, perm);
  TensorType result = moved.type;
  switch (type) {
    case FftType::FFT: break;
    case FftType::RFFT:
      result.dtype = hlo::complex_of(x.type.dtype);
      result.shape.back() = length / 2 + 1;
      break;
    case FftType::IRFFT:
      result.dtype = hlo::component(x.type.dtype);
      result.shape.back() = length;
      break;
  }
  std::string attrs = std::string("fft_type = #stablehlo<fft_type ") + fft_type_name(type) +
                      ">, fft_length = " + hlo::i64_array({length});
  return b.transpose(b.emit("stablehlo.fft", {moved}, attrs, result), back);
}

Value conj(hlo::Builder& b, const Value& z) {
  return b.complex(b.real(z), b.unary(Unary::Negate, b.imag(z)));
}

// Forward or unnormalized inverse complex transforms along `dims`.
Value c2c(hlo::Builder& b, Value z, const std::vector<int64_t>& dims, bool forward) {
  if (!forward) z = conj(b, z);
  for (int64_t d : dims) z = fft_along(b, z, d, FftType::FFT, z.type.shape[d]);
  return forward ? z : conj(b, z);
}

// The scale `normalization` asks for, for a signal of `n` elements.
double norm_scale(int64_t normalization, double n) {
  if (normalization == 1) return 1.0 / std::sqrt(n);
  if (normalization == 2) return 1.0 / n;
  return 1.0;
}

Value scaled(hlo::Builder& b, const Value& x, double scale) {
  if (scale == 1.0) return x;
  return b.binary(Binary::Multiply, x, b.full(scale, x.type));
}

std::vector<int64_t> wrapped(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, rank));
  return out;
}

double signal_size(const std::vector<int64_t>& shape, const std::vector<int64_t>& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(shape[d]);
  return n;
}

// _fft_c2c(self, dim, normalization, forward)
V lower_fft_c2c(Node& n) {
  const TensorType& out = n.out();
  Value z = n.b.convert(n.in(0), out.dtype);
  std::vector<int64_t> dims = wrapped(n.ints(1), z.type.rank());
  z = c2c(n.b, z, dims, n.flag(3));
  return {scaled(n.b, z, norm_scale(n.i64(2), signal_size(z.type.shape, dims)))};
}

// _fft_r2c(self, dim, normalization, onesided): the last dim of `dim` is halved when
// onesided.
V lower_fft_r2c(Node& n) {
  const TensorType& out = n.out();
  Value x = n.b.convert(n.in(0), hlo::component(out.dtype));
  std::vector<int64_t> dims = wrapped(n.ints(1), x.type.rank());
  const double size = signal_size(x.type.shape, dims);
  Value z;
  if (n.flag(3)) {
    const int64_t last = dims.back();
    z = fft_along(n.b, x, last, FftType::RFFT, x.type.shape[last]);
    dims.pop_back();
    z = c2c(n.b, z, dims, /*forward=*/true);
  } else {
    z = c2c(n.b, n.b.convert(x, out.dtype), dims, /*forward=*/true);
  }
  return {scaled(n.b, z, norm_scale(n.i64(2), size))};
}

// _fft_c2r(self, dim, normalization, last_dim_size): an unnormalized inverse of r2c; the
// last dim of `dim` holds last_dim_size / 2 + 1 bins and comes out last_dim_size long.
V lower_fft_c2r(Node& n) {
  const TensorType& out = n.out();
  Value z = n.b.convert(n.in(0), hlo::complex_of(out.dtype));
  std::vector<int64_t> dims = wrapped(n.ints(1), z.type.rank());
  const int64_t last = dims.back(), length = n.i64(3);
  // IRFFT reads exactly length / 2 + 1 bins.
  const int64_t bins = length / 2 + 1;
  if (z.type.shape[last] != bins) {
    std::vector<int64_t> start(z.type.rank(), 0), limit = z.type.shape, step(z.type.rank(), 1);
    limit[last] = std::min(limit[last], bins);
    z = n.b.slice(z, start, limit, step);
    if (z.type.shape[last] < bins) {
      std::vector<int64_t> low(z.type.rank(), 0), high(z.type.rank(), 0),
          interior(z.type.rank(), 0);
      high[last] = bins - z.type.shape[last];
      z = n.b.pad(z, n.b.constant(0, z.type.dtype), low, high, interior);
    }
  }
  std::vector<int64_t> rest(dims.begin(), dims.end() - 1);
  z = c2c(n.b, z, rest, /*forward=*/false);
  Value x = fft_along(n.b, z, last, FftType::IRFFT, length);
  std::vector<int64_t> shape = x.type.shape;
  const double size = signal_size(shape, dims);
  // XLA's IRFFT divided by `length`; PyTorch's primitive does not.
  x = scaled(n.b, x, static_cast<double>(length) * norm_scale(n.i64(2), size));
  return {n.b.convert(x, out.dtype)};
}

}  // namespace

TORCH_TPU_LOWERING(fft_c2c, {"_fft_c2c", "_fft_c2c.out"}, lower_fft_c2c);
TORCH_TPU_LOWERING(fft_r2c, {"_fft_r2c", "_fft_r2c.out"}, lower_fft_r2c);
TORCH_TPU_LOWERING(fft_c2r, {"_fft_c2r", "_fft_c2r.out"}, lower_fft_c2r);

}  // namespace torch_tpu::ops
