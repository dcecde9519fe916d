// ATen kernels for reductions; the math is in ops/reduction.
#include <ATen/WrapDimUtilsMulti.h>
#include <torch/library.h>

#include <algorithm>

#include "aten/dtype.h"
#include "aten/op_call.h"
#include "aten/out_args.h"
#include "ops/reduction.h"

namespace torch_tpu::aten {

namespace {

std::vector<int64_t> reduce_dims(const at::Tensor& self, at::OptionalIntArrayRef dim) {
  std::vector<int64_t> dims;
  if (!dim || dim->empty()) {
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
    return dims;
  }
  auto mask = at::dim_list_to_bitset(*dim, self.dim());  // wraps and rejects repeats
  for (int64_t d = 0; d < self.dim(); ++d)
    if (mask[d]) dims.push_back(d);
  return dims;
}

std::vector<int64_t> reduced_shape(const at::Tensor& self, const std::vector<int64_t>& dims,
                                   bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

enum class Kind : int64_t { Sum, Mean };

at::Tensor reduce(Kind kind, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                  c10::ScalarType dtype, const at::Tensor* out) {
  std::vector<int64_t> dims = reduce_dims(self, dim);
  OpCall call(kind == Kind::Sum ? "sum" : "mean");
  call.input(self).key(dims).key(keepdim).key(static_cast<int64_t>(dtype));
  Lowering lower = [&](hlo::Builder& b, const std::vector<hlo::Value>& in) {
    hlo::DType t = to_hlo(dtype);
    return std::vector<hlo::Value>{kind == Kind::Sum ? ops::lower_sum(b, in[0], dims, keepdim, t)
                                                     : ops::lower_mean(b, in[0], dims, keepdim, t)};
  };
  if (out == nullptr) return call.run(lower)[0];
  prepare_out(*out, reduced_shape(self, dims, keepdim), dtype);
  call.write(lower, {*out});
  return *out;
}

c10::ScalarType sum_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong
                                                                        : self.scalar_type();
}

c10::ScalarType mean_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  c10::ScalarType t = dtype.value_or(self.scalar_type());
  TORCH_CHECK(c10::isFloatingType(t) || c10::isComplexType(t),
              "mean(): could not infer output dtype. ",
              dtype ? "Optional" : "Input", " dtype must be either a floating point or complex "
              "dtype. Got: ", t);
  return t;
}

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  return reduce(Kind::Sum, self, dim, keepdim, sum_dtype(self, dtype), nullptr);
}
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  reduce(Kind::Sum, self, dim, keepdim, dtype.value_or(out.scalar_type()), &out);
  return out;
}
at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  return reduce(Kind::Mean, self, dim, keepdim, mean_dtype(self, dtype), nullptr);
}
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  reduce(Kind::Mean, self, dim, keepdim, mean_dtype(self, dtype.value_or(out.scalar_type())),
         &out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.dim_IntList", sum_dim);
  m.impl("sum.IntList_out", sum_out);
  m.impl("mean.dim", mean_dim);
  m.impl("mean.out", mean_out);
}

}  // namespace torch_tpu::aten
