// Hand-written indexing and factory kernels: ops whose output shape depends on the data
// (nonzero, masked_select, bool-mask indexing, repeat_interleave, bincount), which read a count
// from the device as CUDA does, and ranges whose scalars must enter the program in f64.
#include <algorithm>
#include <cmath>

#include <ATen/ExpandUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/RangeUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/dtype.h"
#include "aten/op_call.h"
#include "ops/elementwise.h"
#include "ops/factory.h"
#include "ops/histogram.h"
#include "ops/indexing.h"
#include "ops/reduction.h"

namespace torch_tpu::aten {

namespace {

using V = std::vector<hlo::Value>;

int64_t read_count(const at::Tensor& count) { return to_host(count).item<int64_t>(); }

// nonzero and masked_select: one program computes the count and the compacted values
// (padded to the input's size); the result is the first `count` rows of those.
at::Tensor nonzero_kernel(const at::Tensor& self) {
  const int64_t rank = self.dim();
  if (self.numel() == 0) return at::empty({0, rank}, self.options().dtype(at::kLong));
  auto results = OpCall("nonzero").input(self).run([](hlo::Builder& b, const V& in) {
    V r = ops::lower_nonzero_flat(b, in[0]);
    return V{r[0], ops::unravel(b, r[1], in[0].type.shape)};
  });
  return results[1].narrow(0, 0, read_count(results[0]));
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  at::Tensor r = nonzero_kernel(self);
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor masked_select_kernel(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  int64_t numel = c10::multiply_integers(shape);
  if (numel == 0) return at::empty({0}, self.options());
  auto results = OpCall("masked_select")
                     .input(self)
                     .input(mask)
                     .key(shape)
                     .run([shape, numel](hlo::Builder& b, const V& in) {
                       hlo::Value m = ops::broadcast_to(b, in[1], shape);
                       V r = ops::lower_nonzero_flat(b, m);
                       hlo::Value x = b.reshape(ops::broadcast_to(b, in[0], shape), {numel});
                       return V{r[0], b.gather_flat(x, r[1])};
                     });
  return results[1].narrow(0, 0, read_count(results[0]));
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  at::Tensor r = masked_select_kernel(self, mask);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// Masks become integer indices (one sync each) and indices move to the device, as
// CUDA's kernels prepare them.
// Indices still on the host are checked there, as CPU does; device indices would need
// a sync, so out-of-range ones are clamped (gather) or dropped (scatter), as on XLA.
void check_host_indices(const at::Tensor& self,
                        const c10::List<std::optional<at::Tensor>>& indices) {
  int64_t dim = 0;
  for (const std::optional<at::Tensor>& opt : indices) {
    if (opt && opt->defined() &&
        (opt->scalar_type() == at::kBool || opt->scalar_type() == at::kByte)) {
      dim += opt->dim();
      continue;
    }
    if (opt && opt->defined() && opt->is_cpu() && opt->numel() > 0 && dim < self.dim()) {
      const int64_t size = self.size(dim);
      const int64_t lo = opt->min().item<int64_t>(), hi = opt->max().item<int64_t>();
      TORCH_CHECK_INDEX(lo >= -size && hi < size, "index ", hi >= size ? hi : lo,
                        " is out of bounds for dimension ", dim, " with size ", size);
    }
    ++dim;
  }
}

std::vector<at::Tensor> prepare_indices(const at::Tensor& self,
                                        const c10::List<std::optional<at::Tensor>>& indices) {
  check_host_indices(self, indices);
  std::vector<at::Tensor> expanded = at::native::expandTensors(self, indices, true);
  TORCH_CHECK_INDEX(expanded.size() <= static_cast<size_t>(self.dim()),
                    "too many indices for tensor of dimension ", self.dim(), " (got ",
                    expanded.size(), ")");
  return expanded;
}

// The result shape of advanced indexing with integer indices (masks already expanded),
// with PyTorch's dtype and broadcast checks and messages. Computed here: the same through
// a meta tensor (at::index on kMeta) took 47 of the 58 µs of a small tpu gather.
std::vector<int64_t> index_shape(const at::Tensor& self, const std::vector<at::Tensor>& indices) {
  std::vector<int64_t> broadcast;  // of the indices so far ([] broadcasts to anything)
  for (const at::Tensor& t : indices) {
    if (!t.defined()) continue;
    TORCH_CHECK_INDEX(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt,
                      "tensors used as indices must be long, int, byte or bool tensors");
    // Broadcast right-aligned: each pair of sizes equal, or one of them 1.
    const size_t n = std::max(broadcast.size(), t.sizes().size());
    std::vector<int64_t> joined(n);
    bool fits = true;
    for (size_t d = 0; d < n; ++d) {
      const size_t from_a = n - broadcast.size(), from_b = n - t.sizes().size();
      const int64_t a = d < from_a ? 1 : broadcast[d - from_a];
      const int64_t b = d < from_b ? 1 : t.sizes()[d - from_b];
      fits = fits && (a == b || a == 1 || b == 1);
      joined[d] = a == 1 ? b : a;
    }
    if (!fits) {
      std::string shapes;
      for (const at::Tensor& u : indices)
        if (u.defined()) shapes += (shapes.empty() ? "" : ", ") + c10::str(u.sizes());
      TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together "
                               "with shapes ", shapes);
    }
    broadcast = std::move(joined);
  }
  // The indexed dimensions become the broadcast shape: in their place when they are
  // adjacent, in front of the rest otherwise (as NumPy and PyTorch order them).
  int64_t lo = -1, hi = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(indices.size()); ++d)
    if (indices[d].defined()) {
      if (lo < 0) lo = d;
      hi = d;
    }
  TORCH_CHECK_INDEX(lo >= 0, "at least one index must be provided");
  bool adjacent = true;
  for (int64_t d = lo; d <= hi; ++d) adjacent = adjacent && indices[d].defined();
  std::vector<int64_t> before, after;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d < static_cast<int64_t>(indices.size()) && indices[d].defined()) continue;
    (adjacent && d < lo ? before : after).push_back(self.size(d));
  }
  std::vector<int64_t> shape = before;
  shape.insert(shape.end(), broadcast.begin(), broadcast.end());
  shape.insert(shape.end(), after.begin(), after.end());
  return shape;
}

void add_indices(OpCall& call, const std::vector<at::Tensor>& indices) {
  call.key(static_cast<int64_t>(indices.size()));
  for (const at::Tensor& t : indices) {
    if (t.defined())
      call.input(t);
    else
      call.key(-1);
  }
}

// Which indices are given (a lowering keeps this, not the index tensors themselves).
std::vector<bool> defined_mask(const std::vector<at::Tensor>& indices) {
  std::vector<bool> mask;
  for (const at::Tensor& t : indices) mask.push_back(t.defined());
  return mask;
}

std::vector<std::optional<hlo::Value>> index_values(const std::vector<bool>& defined, const V& in,
                                                    size_t first) {
  std::vector<std::optional<hlo::Value>> out;
  size_t next = first;
  for (bool d : defined) {
    if (d)
      out.emplace_back(in[next++]);
    else
      out.emplace_back(std::nullopt);
  }
  return out;
}

at::Tensor index_kernel(const at::Tensor& self,
                        const c10::List<std::optional<at::Tensor>>& indices) {
  std::vector<at::Tensor> idx = prepare_indices(self, indices);
  std::vector<int64_t> shape = index_shape(self, idx);
  if (c10::multiply_integers(shape) == 0) return at::empty(shape, self.options());
  OpCall call("index");
  call.input(self);
  add_indices(call, idx);
  return call.run([defined = defined_mask(idx)](hlo::Builder& b, const V& in) {
    return V{ops::lower_index(b, in[0], index_values(defined, in, 1))};
  })[0];
}

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      at::Tensor& out) {
  at::Tensor r = index_kernel(self, indices);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

at::Tensor& index_put_impl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                           const at::Tensor& values, bool accumulate, bool unsafe) {
  TORCH_CHECK(self.scalar_type() == values.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(),
              " for the source.");
  std::vector<at::Tensor> idx = prepare_indices(self, indices);
  std::vector<int64_t> shape = index_shape(self, idx);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), shape), "shape mismatch: value tensor of shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ",
              c10::IntArrayRef(shape));
  if (c10::multiply_integers(shape) == 0) return self;
  const bool here = values.device() == self.device() || values.dim() == 0;
  at::Tensor v = here ? values : values.to(self.device());
  OpCall call("index_put");
  call.input(self);
  add_indices(call, idx);
  call.input(v).key(accumulate);
  call.write(
      [defined = defined_mask(idx), accumulate](hlo::Builder& b, const V& in) {
        return V{
            ops::lower_index_put(b, in[0], index_values(defined, in, 1), in.back(), accumulate)};
      },
      {self});
  return self;
}

at::Tensor repeat_interleave_kernel(const at::Tensor& repeats,
                                    std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  int64_t total;
  if (output_size) {
    total = output_size->expect_int();
  } else {
    auto sum =
        OpCall("repeat_interleave_total").input(repeats).run([](hlo::Builder& b, const V& in) {
          hlo::Value r = b.convert(in[0], hlo::DType::S64);
          return V{b.reduce(r, b.constant(0, hlo::DType::S64), {0}, hlo::Binary::Add)};
        });
    total = read_count(sum[0]);
  }
  if (total == 0 || repeats.numel() == 0) return at::empty({total}, repeats.options());
  hlo::DType dtype = to_hlo(repeats.scalar_type());
  return OpCall("repeat_interleave")
      .input(repeats)
      .key(total)
      .run([total, dtype](hlo::Builder& b, const V& in) {
        return V{b.convert(ops::lower_repeat_interleave(b, in[0], total), dtype)};
      })[0];
}

// bincount: its length is the data's maximum + 1, read from the device first (with the
// minimum, for CPU's check) in one small program, as CUDA does.
at::Tensor bincount_kernel(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt,
                           int64_t minlength) {
  const at::Tensor weights = weights_opt ? *weights_opt : at::Tensor();
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && c10::isIntegralType(self.scalar_type(), /*includeBool=*/false),
              "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  // CPU's dtype: counts are int64, weighted sums f32 for f32 weights, else f64; an empty
  // input gives int64 zeros whatever the weights.
  if (self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  const c10::ScalarType dtype = !weights.defined()                    ? at::kLong
                                : weights.scalar_type() == at::kFloat ? at::kFloat
                                                                      : at::kDouble;
  auto range = OpCall("bincount_range").input(self).run([](hlo::Builder& b, const V& in) {
    hlo::Value x = b.convert(in[0], hlo::DType::S64);
    return V{b.concatenate({b.reshape(ops::reduce_extreme(b, x, {0}, false), {1}),
                            b.reshape(ops::reduce_extreme(b, x, {0}, true), {1})},
                           0)};
  });
  at::Tensor host = to_host(range[0]);
  TORCH_CHECK(host[0].item<int64_t>() >= 0,
              "bincount only supports 1-d non-negative integral inputs.");
  const int64_t length = std::max(minlength, host[1].item<int64_t>() + 1);
  OpCall call("bincount");
  call.input(self).key(length).key(static_cast<int64_t>(dtype));
  if (weights.defined()) call.input(weights);
  const hlo::DType out = to_hlo(dtype);
  return call.run([length, out](hlo::Builder& b, const V& in) {
    return V{ops::lower_bincount(b, in[0], in.size() > 1 ? &in[1] : nullptr, length, out)};
  })[0];
}

// arange's length, with CPU's checks (ATen's RangeUtils.h), for the dtypes CPU's arange
// takes; others ask the meta kernel (a Python reference: about 0.2 ms a call).
int64_t arange_length(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                      const at::Tensor& out) {
  switch (out.scalar_type()) {
    case at::kLong: return at::native::compute_arange_size<int64_t>(start, end, step);
    case at::kByte:
    case at::kChar:
    case at::kShort:
    case at::kInt:
    case at::kHalf:
    case at::kBFloat16:
    case at::kFloat:
    case at::kDouble: return at::native::compute_arange_size<double>(start, end, step);
    default: {
      at::Tensor meta = at::empty({0}, out.options().device(c10::kMeta));
      at::arange_out(meta, start, end, step);
      return meta.numel();
    }
  }
}

// Ranges: the scalars enter in ops::arange_math of the output dtype.
// out resized to n elements start, start + step, ... (arange's and range's program).
at::Tensor& write_range(at::Tensor& out, const c10::Scalar& start, const c10::Scalar& step,
                        int64_t n) {
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  hlo::DType dtype = to_hlo(out.scalar_type());
  c10::ScalarType math = to_torch(ops::arange_math(dtype));
  OpCall call("arange");
  call.scalar(start, math).scalar(step, math).key(n).key(static_cast<int64_t>(dtype));
  call.write([n, dtype](hlo::Builder& b,
                        const V& in) { return V{ops::lower_arange(b, in[0], in[1], n, dtype)}; },
             {out});
  return out;
}

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out) {
  const int64_t n = arange_length(start, end, step, out);
  return write_range(out, start, step, n);
}

// torch.range (deprecated): start, start + step, ... up to end inclusive, the length as
// CPU's RangeFactories computes it (in double for floating dtypes, int64 otherwise); the
// values as arange's program writes them.
at::Tensor& range_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                      at::Tensor& out) {
  int64_t n;
  if (c10::isIntegralType(out.scalar_type(), /*includeBool=*/false)) {
    const int64_t s = start.toLong(), e = end.toLong(), d = step.toLong();
    TORCH_CHECK(d > 0 || d < 0, "step must be nonzero");
    TORCH_CHECK((d > 0 && e >= s) || (d < 0 && e <= s),
                "upper bound and lower bound inconsistent with step sign");
    n = (e - s) / d + 1;
  } else {
    const double s = start.toDouble(), e = end.toDouble(), d = step.toDouble();
    TORCH_CHECK(d > 0 || d < 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(s) && std::isfinite(e),
                "unsupported range: ", s, " -> ", e);
    TORCH_CHECK((d > 0 && e >= s) || (d < 0 && e <= s),
                "upper bound and lower bound inconsistent with step sign");
    n = static_cast<int64_t>((e - s) / d + 1);
  }
  return write_range(out, start, step, n);
}

at::Tensor& space_out(const char* name, const c10::Scalar& start, const c10::Scalar& end,
                      int64_t steps, const std::optional<double>& base, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  hlo::DType dtype = to_hlo(out.scalar_type());
  OpCall call(name);
  call.scalar(start, at::kDouble).scalar(end, at::kDouble);
  call.key(steps).key(static_cast<int64_t>(dtype));
  if (base) call.scalar(*base, at::kDouble);
  call.write(
      [steps, dtype, has_base = base.has_value()](hlo::Builder& b, const V& in) {
        return V{ops::lower_linspace(b, in[0], in[1], steps, dtype, has_base ? &in[2] : nullptr)};
      },
      {out});
  return out;
}

at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                         at::Tensor& out) {
  return space_out("linspace", start, end, steps, std::nullopt, out);
}

at::Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps,
                         double base, at::Tensor& out) {
  return space_out("logspace", start, end, steps, base, out);
}

// torch.unique (sorted or not: CPU sorts either way) and unique_consecutive, of the
// elements or of the slices along `dim`: one program sorts (unique; slices in
// lexicographic order)
// or keeps the order (consecutive), marks where a run of equal slices starts (NaNs
// never equal, as on CPU), numbers the runs, and gives the first slice of each run, the
// run number of each slice and the run lengths padded to the slice count; the run count
// is read back to trim them.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_runs(const at::Tensor& self, bool sort,
                                                           bool return_inverse, bool return_counts,
                                                           std::optional<int64_t> dim) {
  at::Tensor x = dim ? self.movedim(*dim, 0) : self.reshape({-1});
  const int64_t n = x.dim() == 0 ? 1 : x.size(0);
  const int64_t width = n == 0 ? 0 : x.numel() / n;
  const std::vector<int64_t> inverse_shape = dim ? std::vector<int64_t>{n} : self.sizes().vec();
  at::Tensor inverse_empty = at::empty(return_inverse ? inverse_shape : std::vector<int64_t>{0},
                                       self.options().dtype(at::kLong));
  if (self.numel() == 0) {
    std::vector<int64_t> shape = x.sizes().vec();
    if (!shape.empty()) shape[0] = 0;
    at::Tensor values = at::empty(shape, self.options());
    return {dim ? values.movedim(0, *dim) : values, inverse_empty,
            at::empty({0}, self.options().dtype(at::kLong))};
  }
  auto results =
      OpCall(sort ? "unique" : "unique_consecutive")
          .input(x.contiguous())
          .key(sort ? 1 : 0)
          .run([n, width, sort](hlo::Builder& b, const V& in) {
            const hlo::DType t = in[0].type.dtype;
            // Bools sort as bytes.
            const hlo::DType key_t = t == hlo::DType::Pred ? hlo::DType::U8 : t;
            hlo::Value rows = b.convert(b.reshape(in[0], {n, width}), key_t);
            hlo::TensorType it{hlo::DType::S64, {n}};
            hlo::Value pos = b.iota(it, 0);
            if (sort) {
              // Slices in lexicographic order: stable sorts by each column, the last first.
              hlo::TensorType sv{key_t, {}}, si{hlo::DType::S64, {}};
              std::string less = b.region({sv, sv, si, si}, [key_t](hlo::Builder& r, const V& a) {
                hlo::Value lt = r.compare(hlo::Compare::LT, a[0], a[1]);
                if (hlo::is_float(key_t)) {
                  hlo::Value ln = ops::is_nan(r, a[0]), rn = ops::is_nan(r, a[1]);
                  lt = r.binary(hlo::Binary::Or, lt,
                                r.binary(hlo::Binary::And, r.unary(hlo::Unary::Not, ln), rn));
                }
                return V{lt};
              });
              for (int64_t c = width - 1; c >= 0; --c) {
                hlo::Value column = b.reshape(b.slice(rows, {0, c}, {n, c + 1}, {1, 1}), {n});
                hlo::Value key = b.gather_flat(column, pos);
                V out =
                    b.emit_multi("stablehlo.sort", {key, pos},
                                 "dimension = 0 : i64, is_stable = true", {key.type, it}, {less});
                pos = out[1];
              }
              if (width > 0) rows = ops::select_along(b, rows, 0, pos);
            }
            hlo::Value prev = n == 1
                                  ? rows
                                  : b.concatenate({b.slice(rows, {0, 0}, {1, width}, {1, 1}),
                                                   b.slice(rows, {0, 0}, {n - 1, width}, {1, 1})},
                                                  0);
            hlo::Value differs = b.reduce(b.compare(hlo::Compare::NE, rows, prev),
                                          b.constant(0, hlo::DType::Pred), {1}, hlo::Binary::Or);
            hlo::Value first = b.compare(hlo::Compare::EQ, b.iota(it, 0), b.full(0, it));
            hlo::Value starts = b.binary(hlo::Binary::Or, first, differs);
            hlo::Value starts_n = b.convert(starts, hlo::DType::S64);
            hlo::Value run =
                b.binary(hlo::Binary::Subtract, ops::cumsum_1d(b, starts_n), b.full(1, it));
            hlo::Value count =
                b.reduce(starts_n, b.constant(0, hlo::DType::S64), {0}, hlo::Binary::Add);
            // The first slice of run g: slot g gets its position (the other slices aim past
            // the end, which the scatter drops).
            hlo::Value target = b.select(starts, run, b.full(static_cast<double>(n), it));
            hlo::Value first_of = b.scatter_flat(b.full(0, it), target, b.iota(it, 0));
            hlo::Value values = ops::select_along(b, rows, 0, first_of);
            hlo::Value inverse = b.scatter_flat(b.full(0, it), pos, run);
            hlo::Value lengths = ops::add_along(b, b.full(0, it), 0, run, b.full(1, it));
            return V{count, b.convert(values, t), inverse, lengths};
          });
  const int64_t count = read_count(results[0]);
  std::vector<int64_t> shape = x.sizes().vec();
  if (shape.empty()) shape.push_back(1);
  shape[0] = count;
  at::Tensor values = results[1].narrow(0, 0, count).reshape(shape);
  if (dim) values = values.movedim(0, *dim).contiguous();
  at::Tensor inverse = return_inverse ? results[2].reshape(inverse_shape) : inverse_empty;
  at::Tensor counts =
      return_counts ? results[3].narrow(0, 0, count) : at::empty({0}, results[3].options());
  return {values, inverse, counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2_kernel(const at::Tensor& self, bool sorted,
                                                              bool return_inverse,
                                                              bool return_counts) {
  return unique_runs(self, true, return_inverse, return_counts, std::nullopt);
}

// unique_dim always returns the inverse and the counts, as CPU's kernel does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim_kernel(const at::Tensor& self,
                                                                 int64_t dim, bool sorted,
                                                                 bool return_inverse,
                                                                 bool return_counts) {
  TORCH_CHECK(self.dim() > 0 || dim == 0 || dim == -1, "unique_dim: dim out of range");
  if (self.dim() == 0) return unique_runs(self, true, true, true, std::nullopt);
  return unique_runs(self, true, true, true, c10::maybe_wrap_dim(dim, self.dim()));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive_kernel(
    const at::Tensor& self, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  if (dim) {
    TORCH_CHECK(self.dim() > 0 || *dim == 0 || *dim == -1, "unique_consecutive: dim out of range");
    if (self.dim() == 0)
      dim.reset();
    else
      dim = c10::maybe_wrap_dim(*dim, self.dim());
  }
  return unique_runs(self, false, return_inverse, return_counts, dim);
}

// _padded_dense_to_jagged_forward(dense [B, L, ...], offsets [B + 1], total_L): the rows
// of each batch item below its length, one after another (a padded tensor back to a
// nested jagged one). The offsets are read back, as CPU's kernel checks the lengths
// against L and sizes the result from them; one gather on the device moves the rows.
at::Tensor padded_to_jagged_kernel(const at::Tensor& dense, at::TensorList offsets,
                                   std::optional<c10::SymInt> total_L) {
  TORCH_CHECK(offsets.size() == 1,
              "_padded_dense_to_jagged_forward(): only a single jagged dim is supported for now");
  TORCH_CHECK(dense.dim() >= 2, "_padded_dense_to_jagged_forward(): expected a padded tensor");
  at::Tensor off = to_host(offsets[0]).to(at::kLong);
  const int64_t batch = dense.size(0), length = dense.size(1);
  TORCH_CHECK(off.numel() == batch + 1,
              "_padded_dense_to_jagged_forward(): expected offsets of batch size + 1");
  const int64_t* o = off.data_ptr<int64_t>();
  const int64_t total = total_L ? total_L->expect_int() : o[batch];
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(std::max<int64_t>(total, 0)));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = o[b + 1] - o[b];
    TORCH_CHECK(n <= length, "_padded_dense_to_jagged_forward(): found batch item of length ", n,
                " when max length specified by padded input is ", length);
    for (int64_t l = 0; l < n && static_cast<int64_t>(index.size()) < total; ++l)
      index.push_back(b * length + l);
  }
  index.resize(static_cast<size_t>(total), 0);
  std::vector<int64_t> shape = dense.sizes().vec();
  shape.erase(shape.begin());
  shape[0] = total;
  at::Tensor rows = dense.reshape({batch * length, -1});
  at::Tensor idx = at::tensor(index, at::kLong).to(dense.device());
  return rows.index_select(0, idx).reshape(shape);
}

// The older forms: _unique (no counts) and unique_dim_consecutive (a required dim).
std::tuple<at::Tensor, at::Tensor> unique_kernel(const at::Tensor& self, bool sorted,
                                                 bool return_inverse) {
  auto [values, inverse, counts] = unique2_kernel(self, sorted, return_inverse, false);
  return {values, inverse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim_consecutive_kernel(
    const at::Tensor& self, int64_t dim, bool return_inverse, bool return_counts) {
  return unique_consecutive_kernel(self, return_inverse, return_counts, dim);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero_kernel);
  m.impl("nonzero.out", nonzero_out);
  m.impl("masked_select", masked_select_kernel);
  m.impl("masked_select.out", masked_select_out);
  m.impl("index.Tensor", index_kernel);
  m.impl("index.Tensor_out", index_out);
  m.impl("_index_put_impl_", index_put_impl);
  m.impl("repeat_interleave.Tensor", repeat_interleave_kernel);
  m.impl("bincount", bincount_kernel);
  m.impl("_unique2", unique2_kernel);
  m.impl("_unique", unique_kernel);
  m.impl("_padded_dense_to_jagged_forward", padded_to_jagged_kernel);
  m.impl("unique_dim_consecutive", unique_dim_consecutive_kernel);
  m.impl("unique_dim", unique_dim_kernel);
  m.impl("unique_consecutive", unique_consecutive_kernel);
  m.impl("arange.start_out", arange_out);
  m.impl("range.out", range_out);
  m.impl("linspace.out", linspace_out);
  m.impl("logspace.out", logspace_out);
  m.impl("unfold", at::native::unfold);
}

}  // namespace torch_tpu::aten
