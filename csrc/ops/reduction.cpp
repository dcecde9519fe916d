#include "ops/reduction.h"

namespace torch_tpu::ops {

namespace {

std::vector<int64_t> all_dims_if_empty(const hlo::Value& x, const std::vector<int64_t>& dims) {
  if (!dims.empty()) return dims;
  std::vector<int64_t> all;
  for (int64_t d = 0; d < x.type.rank(); ++d) all.push_back(d);
  return all;
}

hlo::DType accumulator(hlo::DType dtype) {
  return dtype == hlo::DType::F16 || dtype == hlo::DType::BF16 ? hlo::DType::F32 : dtype;
}

hlo::Value keep_dims(hlo::Builder& b, const hlo::Value& reduced, const hlo::Value& x,
                     const std::vector<int64_t>& dims, bool keepdim) {
  if (!keepdim) return reduced;
  std::vector<int64_t> shape = x.type.shape;
  for (int64_t d : dims) shape[d] = 1;
  return b.reshape(reduced, shape);
}

}  // namespace

hlo::Value lower_sum(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& dims,
                     bool keepdim, hlo::DType dtype) {
  std::vector<int64_t> rdims = all_dims_if_empty(x, dims);
  hlo::DType acc = accumulator(dtype);
  hlo::Value in = b.convert(x, acc);
  hlo::Value sum = b.reduce(in, b.constant(0, acc), rdims,
                            acc == hlo::DType::Pred ? hlo::Reducer::Or : hlo::Reducer::Add);
  return keep_dims(b, b.convert(sum, dtype), x, rdims, keepdim);
}

hlo::Value lower_mean(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& dims,
                      bool keepdim, hlo::DType dtype) {
  std::vector<int64_t> rdims = all_dims_if_empty(x, dims);
  hlo::DType acc = accumulator(dtype);
  int64_t count = 1;
  for (int64_t d : rdims) count *= x.type.shape[d];
  hlo::Value sum = b.reduce(b.convert(x, acc), b.constant(0, acc), rdims, hlo::Reducer::Add);
  // 0/0 gives NaN for an empty reduction, as in PyTorch.
  hlo::Value mean = b.binary("divide", sum, b.full(static_cast<double>(count), sum.type));
  return keep_dims(b, b.convert(mean, dtype), x, rdims, keepdim);
}

}  // namespace torch_tpu::ops
