#include "ops/strided.h"

#include <algorithm>
#include <stdexcept>

namespace torch_tpu::ops {

namespace {

// The dims that move through memory (size > 1, stride > 0), outermost stride first.
struct Window {
  std::vector<int64_t> dims;   // original dim indices, by descending stride
  std::vector<int64_t> shape;  // reshaped window: [s0, t0/t1, ..., t(m-2)/t(m-1), t(m-1)]
  int64_t length = 1;          // elements in the window
  int64_t span = 1;            // elements from the first to the last one viewed, plus one
  bool regular = true;         // strides nest without overlap
};

Window window(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  Window w;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && strides[d] > 0) w.dims.push_back(static_cast<int64_t>(d));
  std::stable_sort(w.dims.begin(), w.dims.end(),
                   [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  for (int64_t d : w.dims) w.span += (sizes[d] - 1) * strides[d];
  if (w.dims.empty()) {
    w.shape = {1};
    return w;
  }
  w.shape.push_back(sizes[w.dims[0]]);
  for (size_t k = 0; k + 1 < w.dims.size(); ++k) {
    int64_t outer = strides[w.dims[k]], inner = strides[w.dims[k + 1]];
    if (outer % inner != 0 || outer / inner < sizes[w.dims[k + 1]]) {
      w.regular = false;
      return w;
    }
    w.shape.push_back(outer / inner);
  }
  w.shape.push_back(strides[w.dims.back()]);
  w.length = sizes[w.dims[0]] * strides[w.dims[0]];
  return w;
}

bool is_row_major(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

// Flat element index of every view element: offset + sum(i_k * stride_k).
hlo::Value flat_indices(hlo::Builder& b, const hlo::Value& offset,
                        const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  hlo::TensorType type{hlo::DType::S64, sizes};
  hlo::Value index = b.broadcast_in_dim(offset, sizes, {});
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] <= 1 || strides[d] == 0) continue;
    hlo::Value step = b.binary(hlo::Binary::Multiply, b.iota(type, static_cast<int64_t>(d)),
                               b.full(static_cast<double>(strides[d]), type));
    index = b.binary(hlo::Binary::Add, index, step);
  }
  return index;
}

std::vector<hlo::Value> zero_indices(hlo::Builder& b, size_t n) {
  std::vector<hlo::Value> zeros;
  hlo::Value zero = b.constant_int(0, hlo::DType::S64);
  for (size_t i = 0; i < n; ++i) zeros.push_back(zero);
  return zeros;
}

}  // namespace

StridedLayout classify(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                       int64_t offset, int64_t storage_numel) {
  StridedLayout layout;
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) {
    layout.kind = StridedLayout::Kind::Empty;
    return layout;
  }
  if (offset == 0 && numel == storage_numel && is_row_major(sizes, strides)) {
    layout.kind = StridedLayout::Kind::Dense;
    return layout;
  }
  Window w = window(sizes, strides);
  if (!w.regular) {
    layout.kind = StridedLayout::Kind::Gather;
    return layout;
  }
  layout.kind = StridedLayout::Kind::Strided;
  // The window may run past the end of the buffer by at most length - span elements.
  if (offset + w.length > storage_numel) layout.pad = w.length - w.span;
  return layout;
}

hlo::Value reinterpret_flat(hlo::Builder& b, const hlo::Value& flat, hlo::DType dtype) {
  hlo::DType from = flat.type.dtype;
  if (from == dtype) return flat;
  // Booleans are stored one byte each but i1 cannot be bitcast: go through u8.
  if (from == hlo::DType::Pred) return reinterpret_flat(b, b.convert(flat, hlo::DType::U8), dtype);
  if (dtype == hlo::DType::Pred)
    return b.convert(reinterpret_flat(b, flat, hlo::DType::U8), hlo::DType::Pred);
  int64_t n = flat.type.shape.at(0);
  // Complex values cannot be bitcast: a complex element is its (real, imaginary) pair of
  // part-type elements, as in memory.
  if (hlo::is_complex(from)) {
    hlo::Value re = b.reshape(b.real(flat), {n, 1}), im = b.reshape(b.imag(flat), {n, 1});
    hlo::Value parts = b.reshape(b.concatenate({re, im}, 1), {2 * n});
    return reinterpret_flat(b, parts, dtype);
  }
  if (hlo::is_complex(dtype)) {
    hlo::Value parts = reinterpret_flat(b, flat, hlo::component(dtype));
    int64_t m = parts.type.shape.at(0);
    if (m % 2 != 0)
      throw std::invalid_argument("storage size is not a multiple of the element size");
    hlo::Value pairs = b.reshape(parts, {m / 2, 2});
    hlo::Value re = b.reshape(b.slice(pairs, {0, 0}, {m / 2, 1}, {1, 1}), {m / 2});
    hlo::Value im = b.reshape(b.slice(pairs, {0, 1}, {m / 2, 2}, {1, 1}), {m / 2});
    return b.complex(re, im);
  }
  int sw = hlo::byte_width(from), tw = hlo::byte_width(dtype);
  if (sw == tw) return b.bitcast_convert(flat, {dtype, {n}});
  if (sw < tw) {
    int64_t ratio = tw / sw;
    if (n % ratio != 0)
      throw std::invalid_argument("storage size is not a multiple of the element size");
    return b.bitcast_convert(b.reshape(flat, {n / ratio, ratio}), {dtype, {n / ratio}});
  }
  int64_t ratio = sw / tw;
  return b.reshape(b.bitcast_convert(flat, {dtype, {n, ratio}}), {n * ratio});
}

hlo::Value lower_strided_read(hlo::Builder& b, const hlo::Value& flat, const hlo::Value& offset,
                              const std::vector<int64_t>& sizes,
                              const std::vector<int64_t>& strides, const StridedLayout& layout) {
  hlo::TensorType out{flat.type.dtype, sizes};
  switch (layout.kind) {
    case StridedLayout::Kind::Empty: return b.full(0, out);
    case StridedLayout::Kind::Dense: return b.reshape(flat, sizes);
    case StridedLayout::Kind::Gather:
      return b.gather_flat(flat, flat_indices(b, offset, sizes, strides));
    case StridedLayout::Kind::Strided: break;
  }
  Window w = window(sizes, strides);
  hlo::Value source = flat;
  if (layout.pad > 0) source = b.pad(flat, b.constant(0, flat.type.dtype), {0}, {layout.pad}, {0});
  hlo::Value x = b.reshape(b.dynamic_slice(source, {offset}, {w.length}), w.shape);
  // Keep the first element of the innermost (stride) axis: x[:s0, :s1, ..., :1].
  std::vector<int64_t> kept;
  for (int64_t d : w.dims) kept.push_back(sizes[d]);
  std::vector<int64_t> limit = kept;
  limit.push_back(1);
  std::vector<int64_t> start(limit.size(), 0), step(limit.size(), 1);
  x = b.reshape(b.slice(x, start, limit, step), kept);
  // x is in window order; put its dims back in the view's order, then broadcast
  // size-1 and stride-0 dims.
  std::vector<int64_t> ascending = w.dims;
  std::sort(ascending.begin(), ascending.end());
  std::vector<int64_t> permutation;
  for (int64_t d : ascending)
    permutation.push_back(std::find(w.dims.begin(), w.dims.end(), d) - w.dims.begin());
  return b.broadcast_in_dim(b.transpose(x, permutation), sizes, ascending);
}

hlo::Value lower_strided_write(hlo::Builder& b, const hlo::Value& flat, const hlo::Value& offset,
                               const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& strides, const StridedLayout& layout,
                               const hlo::Value& values) {
  int64_t n = flat.type.shape.at(0);
  switch (layout.kind) {
    case StridedLayout::Kind::Empty: return flat;
    case StridedLayout::Kind::Dense: return b.reshape(values, {n});
    case StridedLayout::Kind::Gather:
      return b.scatter_flat(flat, flat_indices(b, offset, sizes, strides), values);
    case StridedLayout::Kind::Strided: break;
  }
  Window w = window(sizes, strides);
  // Values of the moving dims only (stride-0 dims keep their first element), in
  // ascending dim order, then transposed into window order.
  std::vector<int64_t> start(sizes.size(), 0), limit, step(sizes.size(), 1);
  for (size_t d = 0; d < sizes.size(); ++d) limit.push_back(strides[d] == 0 ? 1 : sizes[d]);
  hlo::Value v = b.slice(values, start, limit, step);
  std::vector<int64_t> ascending = w.dims;
  std::sort(ascending.begin(), ascending.end());
  std::vector<int64_t> moving_shape;
  for (int64_t d : ascending) moving_shape.push_back(sizes[d]);
  v = b.reshape(v, moving_shape);
  std::vector<int64_t> permutation;
  for (int64_t d : w.dims)
    permutation.push_back(std::find(ascending.begin(), ascending.end(), d) - ascending.begin());
  v = b.transpose(v, permutation);
  std::vector<int64_t> update_shape;
  for (int64_t d : w.dims) update_shape.push_back(sizes[d]);
  update_shape.push_back(1);
  if (w.dims.empty()) update_shape = {1};
  v = b.reshape(v, update_shape);

  hlo::Value source = flat;
  if (layout.pad > 0) source = b.pad(flat, b.constant(0, flat.type.dtype), {0}, {layout.pad}, {0});
  hlo::Value window_values = b.reshape(b.dynamic_slice(source, {offset}, {w.length}), w.shape);
  window_values = b.dynamic_update_slice(window_values, v, zero_indices(b, w.shape.size()));
  source = b.dynamic_update_slice(source, b.reshape(window_values, {w.length}), {offset});
  if (layout.pad > 0) source = b.slice(source, {0}, {n}, {1});
  return source;
}

}  // namespace torch_tpu::ops
